'use strict'
// Preloaded into every Node process that `cassette run` starts (NODE_OPTIONS=--require ...).
//
// Node's built-in fetch (and so the openai and @anthropic-ai/sdk packages) ignores
// HTTPS_PROXY before Node 22.21 and 24, where NODE_USE_ENV_PROXY=1 does the job.
// On older versions, route fetch through the proxy with undici's EnvHttpProxyAgent,
// taken from the application's own node_modules: Node does not expose the undici
// it bundles. Without it, say once per run what to do instead of failing silently.

const fs = require('node:fs')
const path = require('node:path')

const [major, minor] = process.versions.node.split('.').map(Number)
const fetchHonoursProxyVariables = major >= 24 || (major === 22 && minor >= 21)

function resolveUndici () {
  const from = [process.cwd()]
  if (process.argv[1]) from.push(path.dirname(path.resolve(process.argv[1])))
  try {
    return require(require.resolve('undici', { paths: from }))
  } catch {
    return null
  }
}

function noticeOnce (message) {
  const marker = process.env.CASSETTE_NODE_NOTICE
  try {
    if (marker) fs.closeSync(fs.openSync(marker, 'wx'))
  } catch {
    return
  }
  process.stderr.write(`cassette: ${message}\n`)
}

if (!fetchHonoursProxyVariables && (process.env.HTTPS_PROXY || process.env.HTTP_PROXY)) {
  const undici = resolveUndici()
  if (undici && typeof undici.EnvHttpProxyAgent === 'function') {
    // undici 6 warns that EnvHttpProxyAgent is experimental in every process (npm's own
    // included): the proxy is ours, not the application's choice, so keep its stderr clean.
    const emitWarning = process.emitWarning
    process.emitWarning = () => {}
    try {
      undici.setGlobalDispatcher(new undici.EnvHttpProxyAgent())
    } finally {
      process.emitWarning = emitWarning
    }
  } else {
    noticeOnce(
      `Node ${process.versions.node}'s fetch ignores HTTPS_PROXY and no undici (>= 6.16) is resolvable from ` +
      `${process.cwd()}, so fetch calls bypass the proxy. Fix: \`npm install --save-dev undici@6\` in the ` +
      'application, or use Node >= 22.21, or the zero-CA route `cassette run --reverse openai=https://api.openai.com`.'
    )
  }
}

// Every request of this process names its test, for per-test recordings in parallel (node_test_carrier.cjs).
require('./node_test_carrier.cjs').install()
