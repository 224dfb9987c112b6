// The per-test helper for Jest, as docs/per-test.md gives it in CommonJS: no globals, the test's file in its id.
const path = require('node:path')
const { afterEach, beforeEach, expect } = require('@jest/globals')

const hooks = process.env.CASSETTE_NODE_TEST_HOOKS
const { startTest, endTest } = hooks ? require(hooks) : { startTest () {}, endTest () {} }
const testId = () => {
  const { testPath, currentTestName } = expect.getState()
  return `${path.relative(process.cwd(), testPath)}::${currentTestName}`
}

beforeEach(() => startTest(testId(), { scope: 'test' }))
afterEach(() => endTest(testId()))
