// Each test asks with its own id as the prompt, so a recording filed under another test's folder shows.
const path = require('node:path')
const request = require('supertest')
const { expect, test } = require('@jest/globals')
const { app, ask } = require('./app.cjs')

process.env.OPENAI_API_KEY ??= 'sk-placeholder-for-replay'
const prompt = () => `${path.relative(process.cwd(), expect.getState().testPath)}::${expect.getState().currentTestName}`

test('asks the model itself', async () => {
  expect(await ask(prompt())).toBe(`echo: ${prompt()}`)
})

test('asks through the app in-process (supertest)', async () => {
  const response = await request(app).post('/ask').send({ prompt: prompt() })
  expect(response.body.answer).toBe(`echo: ${prompt()}`)
})
