// Each test asks with its own id as the prompt, so a recording filed under another test's folder shows.
import path from 'node:path'
import request from 'supertest'
import { expect, inject, test } from 'vitest'
import { app, ask } from './app.mjs'

process.env.OPENAI_API_KEY ??= 'sk-placeholder-for-replay'
const prompt = () => `${path.relative(process.cwd(), expect.getState().testPath)}::${expect.getState().currentTestName}`

test('asks the model itself', async () => {
  expect(await ask(prompt())).toBe(`echo: ${prompt()}`)
})

test('asks through the app in-process (supertest)', async () => {
  const response = await request(app).post('/ask').send({ prompt: prompt() })
  expect(response.body.answer).toBe(`echo: ${prompt()}`)
})

test('asks through the server the suite started', async () => {
  const response = await fetch(`${inject('appUrl')}/ask`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: prompt() })
  })
  expect((await response.json()).answer).toBe(`echo: ${prompt()}`)
})
