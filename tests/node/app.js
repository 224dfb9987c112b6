// A small application as it would be written without any test tooling in mind:
// the SDKs read their keys and base URLs from the environment, nothing else.
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'

export async function summarize (text) {
  const openai = new OpenAI()
  const completion = await openai.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [
      { role: 'system', content: 'Summarize the text in one sentence.' },
      { role: 'user', content: text }
    ]
  })
  return completion.choices[0].message.content
}

export async function haiku (topic) {
  const anthropic = new Anthropic()
  const message = await anthropic.messages.create({
    model: 'claude-sonnet-4-6',
    max_tokens: 200,
    messages: [{ role: 'user', content: `Write a haiku about ${topic}.` }]
  })
  return message.content[0].text
}

// Plain fetch, as code does that needs no SDK; it honours OPENAI_BASE_URL like the SDK.
export async function embed (text) {
  const base = process.env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1'
  const response = await fetch(`${base}/embeddings`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${process.env.OPENAI_API_KEY}` },
    body: JSON.stringify({ model: 'text-embedding-3-small', input: text })
  })
  if (!response.ok) throw new Error(`embeddings answered ${response.status}: ${await response.text()}`)
  return (await response.json()).data[0].embedding
}

// Streamed answers, read delta by delta as a chat UI would.
export async function streamSummary (text) {
  const openai = new OpenAI()
  const stream = await openai.chat.completions.create({
    model: 'gpt-4o-mini',
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: 'user', content: text }]
  })
  let answer = ''
  let usage
  for await (const chunk of stream) {
    answer += chunk.choices[0]?.delta?.content ?? ''
    usage = chunk.usage ?? usage
  }
  return { text: answer, usage }
}

export async function streamHaiku (topic) {
  const anthropic = new Anthropic()
  const stream = anthropic.messages.stream({
    model: 'claude-sonnet-4-6',
    max_tokens: 200,
    messages: [{ role: 'user', content: `Write a haiku about ${topic}.` }]
  })
  const message = await stream.finalMessage()
  return { text: message.content[0].text, usage: message.usage }
}
