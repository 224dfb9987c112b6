'use strict'
// Tell the cassette proxy which test runs, from a Node test runner (node:test, Jest, Vitest, Mocha).
//
// `cassette run -- npm test` puts the proxy's address, the control channel and this
// file's path in the environment (CASSETTE_PROXY_URL, CASSETTE_CONTROL_URL,
// CASSETTE_CONTROL_TOKEN, CASSETTE_NODE_TEST_HOOKS). Then, in a setup file:
//
//   const { startTest, endTest } = require(process.env.CASSETTE_NODE_TEST_HOOKS)
//   beforeEach((t) => startTest(`app.test.js::${t.name}`, { scope: 'test' }))   // node:test
//   afterEach((t) => endTest(`app.test.js::${t.name}`))
//   const id = () => `${path.relative(process.cwd(), expect.getState().testPath)}::${expect.getState().currentTestName}`
//   beforeEach(() => startTest(id(), { scope: 'test' }))                          // Jest, Vitest
//   afterEach(() => endTest(id()))
//
// The call goes straight to the proxy's listener in absolute form (no proxy variable, NO_PROXY
// entry or DNS is involved) and the proxy answers it itself. Outside `cassette run` (no token)
// both functions do nothing, so the suite still runs without the proxy.
// Workers in parallel share one proxy: each call names its runner (this process and thread), and
// every request of this process carries its test (node_test_carrier.cjs), so each lands in its own
// test's folder. Tests that run at the same time in one process: wrap each in withTest(id, fn).

const http = require('node:http')
const { threadId } = require('node:worker_threads')
const carrier = require('./node_test_carrier.cjs').install()

const RUNNER = threadId ? `${process.pid}.${threadId}` : String(process.pid)

const OPTIONS = ['mode', 'ignore', 'repeats', 'scope', 'record_statuses']

function call (path, body) {
  const proxy = process.env.CASSETTE_PROXY_URL
  const token = process.env.CASSETTE_CONTROL_TOKEN
  if (!proxy || !token) return Promise.resolve(null)
  const control = new URL(process.env.CASSETTE_CONTROL_URL || 'http://cassette.control')
  const target = new URL(proxy)
  const data = JSON.stringify(body)
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: target.hostname,
        port: target.port,
        method: 'POST',
        path: `${control.origin}${path}`,
        headers: {
          host: control.host,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(data),
          'x-cassette-control-token': token
        }
      },
      (response) => {
        let text = ''
        response.setEncoding('utf8')
        response.on('data', (chunk) => { text += chunk })
        response.on('end', () => {
          if (response.statusCode === 200) return resolve(JSON.parse(text))
          let message = text
          try { message = JSON.parse(text).error.message } catch {}
          reject(new Error(`cassette control: ${response.statusCode} ${message}`))
        })
      }
    )
    request.on('error', reject)
    request.end(data)
  })
}

// Requests from now on belong to `test` and follow its options: { mode, ignore, repeats, scope, record_statuses }.
function startTest (test, options = {}) {
  const unknown = Object.keys(options).filter((name) => !OPTIONS.includes(name))
  if (unknown.length) return Promise.reject(new Error(`cassette: unknown test option(s) ${unknown.join(', ')}; use ${OPTIONS.join(', ')}`))
  if (process.env.CASSETTE_CONTROL_TOKEN) carrier.start(test)
  return call('/v1/test/start', { test, options, runner: RUNNER })
}

// Requests from now on belong to no test.
function endTest (test) {
  carrier.end(test)
  return call('/v1/test/end', { test, runner: RUNNER })
}

// The requests `fn` makes (and everything it awaits) belong to `test`, whatever else runs in this process.
function withTest (test, fn) {
  return carrier.run(test, fn)
}

module.exports = { startTest, endTest, withTest }
