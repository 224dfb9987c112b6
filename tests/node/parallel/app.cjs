// An Express application that asks an LLM, tested in parallel with per-test recordings: in-process through
// supertest, and as a server the suite starts (server.mjs). No test tooling in it: the preload that
// `cassette run` puts in NODE_OPTIONS carries each incoming request's test into the calls it makes.
const express = require('express')
const { OpenAI } = require('openai')

async function ask (prompt) {
  const completion = await new OpenAI().chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: prompt }]
  })
  return completion.choices[0].message.content
}

const PAGE = `<!doctype html><title>ask</title>
<input aria-label="prompt"><button>Ask</button><p data-testid="answer"></p>
<script>
  document.querySelector('button').onclick = async () => {
    const prompt = document.querySelector('input').value
    const response = await fetch('/ask', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt }) })
    document.querySelector('[data-testid=answer]').textContent = (await response.json()).answer
  }
</script>`

const app = express()
app.use(express.json())
app.get('/', (request, response) => response.type('html').send(PAGE))
app.post('/ask', async (request, response) => {
  response.json({ answer: await ask(request.body.prompt) })
})

module.exports = { app, ask }
