// node:test files run as parallel processes (`node --test --test-concurrency=4`), each test's id holding its file.
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import path from 'node:path'
import { afterEach, beforeEach, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import request from 'supertest'
import { app, ask } from './app.mjs'

process.env.OPENAI_API_KEY ??= 'sk-placeholder-for-replay'
const hooks = process.env.CASSETTE_NODE_TEST_HOOKS
const { startTest, endTest } = hooks ? createRequire(import.meta.url)(hooks) : { startTest () {}, endTest () {} }
const file = path.relative(process.cwd(), fileURLToPath(import.meta.url))
const id = (t) => `${file}::${t.name}`
beforeEach((t) => startTest(id(t), { scope: 'test' }))
afterEach((t) => endTest(id(t)))

test('asks the model itself', async (t) => {
  assert.equal(await ask(id(t)), `echo: ${id(t)}`)
})

test('asks through the app in-process (supertest)', async (t) => {
  const response = await request(app).post('/ask').send({ prompt: id(t) })
  assert.equal(response.body.answer, `echo: ${id(t)}`)
})
