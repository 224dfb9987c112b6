// Tests that run at the same time in one process (node:test's `concurrency`): each body wrapped in
// withTest, so its requests name their own test although the process runs three at once.
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, beforeEach, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import request from 'supertest'
import { app, ask } from './app.mjs'

process.env.OPENAI_API_KEY ??= 'sk-placeholder-for-replay'
const hooks = process.env.CASSETTE_NODE_TEST_HOOKS
const { startTest, endTest, withTest } = hooks
  ? createRequire(import.meta.url)(hooks)
  : { startTest () {}, endTest () {}, withTest: (id, fn) => fn() }
const file = path.relative(process.cwd(), fileURLToPath(import.meta.url))
const id = (t) => `${file}::${t.name}`
beforeEach((t) => startTest(id(t), { scope: 'test' }))
afterEach((t) => endTest(id(t)))

describe('at once', { concurrency: true }, () => {
  for (const name of ['one', 'two', 'three']) {
    test(`concurrent ${name}`, (t) => withTest(id(t), async () => {
      await sleep(300) // all three have started: the process's own carrier names all three
      assert.equal(await ask(id(t)), `echo: ${id(t)}`)
      const response = await request(app).post('/ask').send({ prompt: `${id(t)} (app)` })
      assert.equal(response.body.answer, `echo: ${id(t)} (app)`)
    }))
  }
})
