// The per-test helper for Vitest, as docs/per-test.md gives it: ESM, no globals, the test's file in its id.
import { createRequire } from 'node:module'
import path from 'node:path'
import { afterEach, beforeEach, expect } from 'vitest'

const hooks = process.env.CASSETTE_NODE_TEST_HOOKS
const { startTest, endTest } = hooks ? createRequire(import.meta.url)(hooks) : { startTest () {}, endTest () {} }
const testId = () => {
  const { testPath, currentTestName } = expect.getState()
  return `${path.relative(process.cwd(), testPath)}::${currentTestName}`
}

beforeEach(() => startTest(testId(), { scope: 'test' }))
afterEach(() => endTest(testId()))
