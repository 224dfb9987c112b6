// A node:test file that announces its tests to the cassette proxy (not part of `npm test`: run by
// tests/integration/test_node_per_test.py). Each test asks the same question twice; the fake upstream
// numbers its answers, so the answers show which recordings each test replays.
import { appendFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { afterEach, beforeEach, test } from 'node:test'

const require = createRequire(import.meta.url)
const { startTest, endTest } = require(process.env.CASSETTE_NODE_TEST_HOOKS)

const id = (t) => `per_test/sequence.mjs::${t.name}`
beforeEach((t) => startTest(id(t), { repeats: 'sequence', scope: 'test' }))
afterEach((t) => endTest(id(t)))

async function ask () {
  const response = await fetch('https://api.openai.com/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-placeholder', 'x-fake-numbered': '1' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'same question' }] })
  })
  const body = await response.json()
  return response.status === 200 ? body.choices[0].message.content : `${response.status} ${body.error.code}`
}

function keep (t, answers) {
  appendFileSync(process.env.RESULTS, JSON.stringify([t.name, answers]) + '\n')
}

test('first asks twice', async (t) => { keep(t, [await ask(), await ask()]) })

test('second asks twice', async (t) => { keep(t, [await ask(), await ask()]) })
