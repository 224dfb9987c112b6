import assert from 'node:assert/strict'
import { test } from 'node:test'

import { embed, haiku, streamHaiku, streamSummary, summarize } from '../app.js'

// Replay needs no real key, but the SDKs refuse to start without one.
process.env.OPENAI_API_KEY ??= 'sk-placeholder-for-replay'
process.env.ANTHROPIC_API_KEY ??= 'sk-ant-placeholder-for-replay'

test('summarize returns the model answer', async () => {
  assert.equal(await summarize('Cassettes let CI run offline.'), 'echo: Cassettes let CI run offline.')
})

test('haiku returns the text block', async () => {
  assert.equal(await haiku('tape reels'), 'echo: Write a haiku about tape reels.')
})

test('embed returns the vector', async () => {
  assert.deepEqual(await embed('reel'), [0.1, 0.2, 0.3])
})

test('a streamed summary arrives whole, with its usage', async () => {
  const { text, usage } = await streamSummary('Streams replay event by event.')
  assert.equal(text, 'echo: Streams replay event by event.')
  assert.equal(usage.completion_tokens, 6)
})

test('a streamed haiku arrives whole, with its usage', async () => {
  const { text, usage } = await streamHaiku('rewinding')
  assert.equal(text, 'echo: Write a haiku about rewinding.')
  assert.equal(usage.output_tokens, 6)
})
