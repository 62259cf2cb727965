import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { test as base, describe, expect } from 'vitest'
import { HttpClient } from '../src/http-client.ts'
import {
  AuthError,
  ConchError,
  ConnectionError,
  DeadlineError,
  Sandbox,
  SandboxNotFoundError,
} from '../src/index.ts'
import { okBody } from '../src/rest-shapes.ts'
import { FakeRunner } from './fake-runner.ts'

// REST calls: typed errors from error bodies and bare statuses, and client-side deadlines.

const test = base.extend<{ runner: FakeRunner }>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take their dependencies by destructuring
  runner: async ({}, use) => {
    await using runner = await FakeRunner.start()
    await use(runner)
  },
})

describe('REST calls', () => {
  test('turn a 401 error body into AuthError with the runner message and the route', async ({ runner }) => {
    const err = await Sandbox.connect(runner.sandboxId, { url: runner.url, apiKey: 'conch_wrong' }).catch(
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(AuthError)
    expect(err).toMatchObject({ code: 'UNAUTHORIZED', status: 401 })
    expect(String(err)).toContain(`GET /v1/sandboxes/${runner.sandboxId}: bad API key`)
  })

  test('turn SANDBOX_NOT_FOUND into SandboxNotFoundError naming the sandbox', async ({ runner }) => {
    const err = await Sandbox.connect('sb_missing0000', { url: runner.url, apiKey: runner.apiKey }).catch(
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(SandboxNotFoundError)
    expect(String(err)).toContain('sb_missing0000')
  })

  test('reject without credentials before any request', async () => {
    await expect(Sandbox.connect('sb_x', { url: 'http://127.0.0.1:1' })).rejects.toBeInstanceOf(AuthError)
  })

  test('give up with DeadlineError when the runner does not answer in time', async ({ runner }) => {
    const http = new HttpClient({ baseUrl: runner.url, secret: runner.apiKey, fetch, requestTimeoutMs: 50 })
    const err = await http
      .json('GET', `/v1/sandboxes/${runner.sandboxId}/hang`, okBody)
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(DeadlineError)
    expect(err).toMatchObject({ code: 'DEADLINE_EXCEEDED' })
    expect(String(err)).toContain('within 50 ms')
  })

  test('reject with the caller abort reason, not a deadline', async ({ runner }) => {
    const http = new HttpClient({
      baseUrl: runner.url,
      secret: runner.apiKey,
      fetch,
      requestTimeoutMs: 5_000,
    })
    const controller = new AbortController()
    const pending = http.json('GET', `/v1/sandboxes/${runner.sandboxId}/hang`, okBody, {
      signal: controller.signal,
    })
    controller.abort(new Error('stop'))
    await expect(pending).rejects.toThrow('stop')
  })

  test('report an unreachable runner as ConnectionError with the cause', async () => {
    const server = createServer()
    server.listen(0, '127.0.0.1')
    await new Promise((r) => server.once('listening', r))
    const { port } = server.address() as AddressInfo
    await new Promise((r) => server.close(r))
    const err = await Sandbox.list({ url: `http://127.0.0.1:${port}`, apiKey: 'conch_x' }).catch(
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(ConnectionError)
    expect((err as ConnectionError).cause).toBeDefined()
  })

  test('map an error answer without an ErrorBody by its status', async () => {
    const server = createServer((_req, res) => {
      res.writeHead(429, { 'content-type': 'text/html' })
      res.end('<h1>slow down</h1>')
    })
    server.listen(0, '127.0.0.1')
    await new Promise((r) => server.once('listening', r))
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const err = await Sandbox.list({ url, apiKey: 'conch_x' }).catch((e: unknown) => e)
      expect(err).toBeInstanceOf(ConchError)
      expect(err).toMatchObject({ code: 'RATE_LIMITED', status: 429 })
      expect(String(err)).toContain('slow down')
    } finally {
      server.closeAllConnections()
      server.close()
    }
  })
})
