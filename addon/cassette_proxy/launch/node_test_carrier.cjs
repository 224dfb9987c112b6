'use strict'
// Which test a request belongs to, carried on every request this Node process sends (core/traffic/attribution.py).
//
// Loaded by the preload (node_preload.cjs) into every Node process `cassette run` starts, and by the
// test helper (node_test_hooks.cjs). It adds `x-cassette-test: <test ids, percent-encoded>` to every
// outgoing request: fetch (Node's own and undici's, through the global dispatcher) and the http/https
// modules (supertest, axios). The proxy takes the header off before keying, recording or forwarding.
//
// The value is, first, the test of the async context: the incoming request a server handles (its
// `x-cassette-test` header or the `cassette-test` member of its W3C `baggage`), or `withTest(id, fn)`;
// else the tests this process (this worker thread) announced with startTest and has not ended: empty
// between tests, several ids when several run at once (the proxy refuses to guess between them). A
// process that never announced a test and handles no carried request sends no header.

const { AsyncLocalStorage } = require('node:async_hooks')
const http = require('node:http')
const https = require('node:https')

const HEADER = 'x-cassette-test'
const CARRIER = Symbol.for('cassette.test.carrier')
const DISPATCHER = Symbol.for('undici.globalDispatcher.1') // where Node's fetch and undici find the dispatcher

function encode (tests) {
  return tests.map(encodeURIComponent).join(',')
}

function fromBaggage (baggage) {
  for (const member of String(baggage).split(',')) {
    const [name, ...rest] = member.split('=')
    if (name.trim() === 'cassette-test' && rest.length) return rest.join('=').split(';')[0].trim()
  }
  return undefined
}

function incoming (headers) {
  const own = headers[HEADER]
  if (own !== undefined) return Array.isArray(own) ? own.join(',') : own
  return headers.baggage === undefined ? undefined : fromBaggage(headers.baggage)
}

function hasHeader (headers) {
  if (Array.isArray(headers)) {
    return headers.some((entry, i) => Array.isArray(entry) ? String(entry[0]).toLowerCase() === HEADER : i % 2 === 0 && String(entry).toLowerCase() === HEADER)
  }
  return Object.keys(headers).some((name) => name.toLowerCase() === HEADER)
}

function withCarrier (headers, value) {
  if (headers == null) return { [HEADER]: value }
  if (typeof headers[Symbol.iterator] === 'function' && !Array.isArray(headers)) headers = [...headers]
  if (hasHeader(headers)) return headers // the application passed one on itself
  if (Array.isArray(headers)) return Array.isArray(headers[0]) ? [...headers, [HEADER, value]] : [...headers, HEADER, value]
  return { ...headers, [HEADER]: value }
}

function carryingDispatcher (dispatcher, carrier) {
  return new Proxy(dispatcher, {
    get (target, name) {
      if (name === 'dispatch') {
        return (options, handler) => {
          const value = carrier.value()
          if (value !== undefined) options = { ...options, headers: withCarrier(options.headers, value) }
          return target.dispatch(options, handler)
        }
      }
      const member = Reflect.get(target, name, target)
      return typeof member === 'function' ? member.bind(target) : member
    }
  })
}

function install () {
  // Kept on the http module, which every realm of the process shares: Jest runs each test file in a vm
  // context of its own (its own globalThis), and must not patch the modules once per file.
  if (http[CARRIER]) return http[CARRIER]
  const carrier = {
    context: new AsyncLocalStorage(),
    open: [],
    announced: false,
    value () {
      const carried = this.context.getStore()
      if (carried !== undefined) return carried
      return this.announced ? encode(this.open) : undefined
    },
    start (test) {
      this.announced = true
      if (!this.open.includes(test)) this.open.push(test)
    },
    end (test) {
      this.open = this.open.filter((t) => t !== test)
    },
    run (test, fn) {
      return this.context.run(encode([test]), fn)
    }
  }
  http[CARRIER] = carrier

  // fetch: the global dispatcher (the preload's EnvHttpProxyAgent) sends the header. undici defines it
  // writable but not configurable, so it is replaced, not redefined. Without one yet (Node's own
  // fetch makes it on first use), fetch itself adds the header.
  const dispatcher = globalThis[DISPATCHER]
  if (dispatcher && typeof dispatcher.dispatch === 'function') {
    globalThis[DISPATCHER] = carryingDispatcher(dispatcher, carrier)
  } else if (typeof globalThis.fetch === 'function') {
    const fetch = globalThis.fetch
    globalThis.fetch = function (input, init) {
      const value = carrier.value()
      if (value === undefined) return fetch(input, init)
      const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined))
      if (!headers.has(HEADER)) headers.set(HEADER, value)
      return fetch(input, { ...init, headers })
    }
  }

  // The http and https modules (superagent, axios, the SDKs' node-fetch shims).
  for (const module of [http, https]) {
    for (const name of ['request', 'get']) {
      const original = module[name]
      module[name] = function (...args) {
        const request = original.apply(this, args)
        const value = carrier.value()
        if (value !== undefined && !request.headersSent && request.getHeader(HEADER) === undefined) {
          try { request.setHeader(HEADER, value) } catch {} // headers given as a raw array are already written
        }
        return request
      }
    }
  }

  // A server: each incoming request's handling (and every call it makes) carries that request's test.
  for (const Server of [http.Server, https.Server]) {
    const emit = Server.prototype.emit
    Server.prototype.emit = function (event, request) {
      if (event === 'request' && request && request.headers) {
        const value = incoming(request.headers)
        if (value !== undefined) return carrier.context.run(value, () => emit.apply(this, arguments))
      }
      return emit.apply(this, arguments)
    }
  }
  return carrier
}

module.exports = { install, HEADER }
