import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, expect, it } from 'vitest'
import { HttpClient } from '../src/http-client.ts'
import { ConchError, ConnectionError, Sandbox } from '../src/index.ts'
import { okBody } from '../src/rest-shapes.ts'
import { retryPolicy } from '../src/retry-policy.ts'

// Retries of REST calls against a real HTTP server on loopback that answers each request from a
// script: 429 and 503 with and without Retry-After, resets after reading the body, then 200.

/** One scripted answer: a status with headers, or a reset of the connection. */
type Answer = { status: number; headers?: Record<string, string> } | 'reset'

/** A request the server received, with its body. */
interface Seen {
  method: string
  path: string
  body: string
}

class ScriptedServer implements AsyncDisposable {
  readonly seen: Seen[] = []
  url = ''
  readonly #server: Server
  readonly #answers: Answer[]
  readonly #last: Answer

  private constructor(answers: Answer[], last: Answer) {
    this.#answers = answers
    this.#last = last
    this.#server = createServer((req, res) => void this.#answer(req, res))
  }

  /** Answers with `answers` in order, then `last` for ever. */
  static async start(answers: Answer[], last: Answer = { status: 200 }): Promise<ScriptedServer> {
    const s = new ScriptedServer(answers, last)
    s.#server.listen(0, '127.0.0.1')
    await once(s.#server, 'listening')
    s.url = `http://127.0.0.1:${(s.#server.address() as AddressInfo).port}`
    return s
  }

  /** Resolves when the server has received `n` requests. */
  async received(n: number): Promise<void> {
    while (this.seen.length < n) await once(this.#server, 'seen')
  }

  client(options: { retry?: Parameters<typeof retryPolicy>[0]; requestTimeoutMs?: number } = {}) {
    return new HttpClient({
      baseUrl: this.url,
      secret: 'conch_x',
      fetch: (input, init) => fetch(input, init),
      requestTimeoutMs: options.requestTimeoutMs ?? 30_000,
      retry: retryPolicy(options.retry ?? { baseDelayMs: 1, maxDelayMs: 5 }),
    })
  }

  async #answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body = ''
    for await (const chunk of req) body += String(chunk)
    this.seen.push({ method: req.method ?? '', path: req.url ?? '', body })
    this.#server.emit('seen')
    const answer = this.#answers.shift() ?? this.#last
    if (answer === 'reset') {
      req.socket.destroy()
      return
    }
    if (answer.status === 200) {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ ok: true }))
      return
    }
    const code = answer.status === 429 ? 'RATE_LIMITED' : 'AGENT_UNAVAILABLE'
    res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers })
    res.end(JSON.stringify({ error: { code, message: `not now (${answer.status})` } }))
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#server.closeAllConnections()
    this.#server.close()
    await once(this.#server, 'close').catch(() => {})
  }
}

describe('REST retries', () => {
  it('retries a GET answered 503 and then 429 until it succeeds', async () => {
    await using server = await ScriptedServer.start([{ status: 503 }, { status: 429 }])
    await expect(server.client().json('GET', '/v1/x', okBody)).resolves.toEqual({ ok: true })
    expect(server.seen.map((s) => s.method)).toEqual(['GET', 'GET', 'GET'])
  })

  it('sends the same file body again when a PUT is answered 503', async () => {
    await using server = await ScriptedServer.start([{ status: 503 }])
    await server.client().json('PUT', '/v1/files', okBody, { query: { path: 'a' }, raw: 'content' })
    expect(server.seen).toEqual([
      { method: 'PUT', path: '/v1/files?path=a', body: 'content' },
      { method: 'PUT', path: '/v1/files?path=a', body: 'content' },
    ])
  })

  it('retries a DELETE whose connection was reset', async () => {
    await using server = await ScriptedServer.start(['reset'])
    await server.client().json('DELETE', '/v1/x', okBody)
    expect(server.seen.map((s) => s.method)).toEqual(['DELETE', 'DELETE'])
  })

  it('does not send a creating POST again after a 503 and throws its typed error', async () => {
    await using server = await ScriptedServer.start([], { status: 503 })
    const err = await Sandbox.create({ url: server.url, apiKey: 'conch_x' }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ConchError)
    expect(err).toMatchObject({ code: 'AGENT_UNAVAILABLE', status: 503 })
    expect(server.seen.map((s) => `${s.method} ${s.path}`)).toEqual(['POST /v1/sandboxes'])
  })

  it('does not send a creating POST again after the runner read it and the connection dropped', async () => {
    await using server = await ScriptedServer.start(['reset'])
    const err = await Sandbox.create({ url: server.url, apiKey: 'conch_x' }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ConnectionError)
    expect(server.seen).toHaveLength(1)
  })

  it('retries a POST the API makes idempotent (process wait) when marked so', async () => {
    await using server = await ScriptedServer.start([{ status: 429 }, { status: 503 }])
    await server.client().json('POST', '/v1/wait', okBody, { json: { timeoutMs: 1 }, idempotent: true })
    expect(server.seen).toHaveLength(3)
    expect(server.seen.every((s) => s.body === '{"timeoutMs":1}')).toBe(true)
  })

  it('stops after `attempts` tries and throws the last typed error', async () => {
    await using server = await ScriptedServer.start([], { status: 503 })
    const err = await server
      .client({ retry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 5 } })
      .json('GET', '/v1/x', okBody)
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ConchError)
    expect(err).toMatchObject({ code: 'AGENT_UNAVAILABLE', status: 503 })
    expect(String(err)).toContain('GET /v1/x: not now (503)')
    expect(server.seen).toHaveLength(3)
  })

  it('sends once with retry: false', async () => {
    await using server = await ScriptedServer.start([], { status: 429 })
    const err = await Sandbox.list({ url: server.url, apiKey: 'conch_x', retry: false }).catch(
      (e: unknown) => e,
    )
    expect(err).toMatchObject({ code: 'RATE_LIMITED', status: 429 })
    expect(server.seen).toHaveLength(1)
  })

  it('reads the retry option of the connect options', async () => {
    await using server = await ScriptedServer.start([], { status: 429 })
    const err = await Sandbox.list({
      url: server.url,
      apiKey: 'conch_x',
      retry: { attempts: 2, baseDelayMs: 1 },
    }).catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'RATE_LIMITED', status: 429 })
    expect(server.seen).toHaveLength(2)
  })

  it('gives up at once when Retry-After (seconds) asks for longer than the deadline leaves', async () => {
    await using server = await ScriptedServer.start([], { status: 429, headers: { 'retry-after': '30' } })
    const err = await server
      .client({ retry: { maxDelayMs: 60_000 }, requestTimeoutMs: 10_000 })
      .json('GET', '/v1/x', okBody)
      .catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'RATE_LIMITED', status: 429 })
    expect(server.seen).toHaveLength(1)
  })

  it('gives up at once when Retry-After (an HTTP date) is later than the deadline', async () => {
    const later = new Date(Date.now() + 60_000).toUTCString()
    await using server = await ScriptedServer.start([], { status: 503, headers: { 'retry-after': later } })
    const err = await server
      .client({ retry: { maxDelayMs: 120_000 }, requestTimeoutMs: 10_000 })
      .json('GET', '/v1/x', okBody)
      .catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'AGENT_UNAVAILABLE', status: 503 })
    expect(server.seen).toHaveLength(1)
  })

  it('caps a long Retry-After at maxDelayMs and tries again', async () => {
    await using server = await ScriptedServer.start([{ status: 429, headers: { 'retry-after': '3600' } }])
    await server.client({ retry: { maxDelayMs: 5 } }).json('GET', '/v1/x', okBody)
    expect(server.seen).toHaveLength(2)
  })

  it('stops retrying when the caller aborts during the wait', async () => {
    await using server = await ScriptedServer.start([], { status: 503, headers: { 'retry-after': '30' } })
    const controller = new AbortController()
    const call = server
      .client({ retry: { maxDelayMs: 60_000 }, requestTimeoutMs: 120_000 })
      .json('GET', '/v1/x', okBody, { signal: controller.signal })
      .catch((e: unknown) => e)
    await server.received(1)
    const reason = new Error('caller gave up')
    controller.abort(reason)
    expect(await call).toBe(reason)
    expect(server.seen).toHaveLength(1)
  })
})
