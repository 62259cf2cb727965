// conch mcp over its two transports, with the MCP SDK's own clients: stdio as a desktop client
// starts it (a subprocess whose stdout is the protocol), and streamable HTTP as a remote agent
// reaches it, with attacks on the HTTP endpoint's authentication and session binding.
import { fileURLToPath } from 'node:url'
import { Sandbox } from '@conch/sdk'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RunnerChild, startRunnerChild } from '../../sdk/test/runner-child.ts'
import { type ConchMcpHttpServer, startMcpHttpServer } from '../src/index.ts'

const BIN = fileURLToPath(new URL('../src/bin.ts', import.meta.url))

let runner: RunnerChild
let http: ConchMcpHttpServer

function text(result: unknown): string {
  return (result as CallToolResult).content.map((c) => (c.type === 'text' ? c.text : '')).join('')
}

function httpClient(secret: string | null): { client: Client; transport: StreamableHTTPClientTransport } {
  const transport = new StreamableHTTPClientTransport(new URL(http.url), {
    requestInit: secret === null ? {} : { headers: { authorization: `Bearer ${secret}` } },
  })
  return { client: new Client({ name: 'remote-agent', version: '1.0.0' }), transport }
}

/** A raw JSON-RPC POST to the endpoint, for requests no well-behaved client sends. */
function post(headers: Record<string, string>, body: unknown): Promise<Response> {
  return fetch(http.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: JSON.stringify(body),
  })
}

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
}

beforeAll(async () => {
  runner = await startRunnerChild()
  http = await startMcpHttpServer({ url: runner.url, port: 0 })
}, 90_000)

afterAll(async () => {
  await http?.close()
  await runner?.[Symbol.asyncDispose]()
})

describe('conch mcp over stdio', () => {
  it('serves the tools to a client that starts it as a subprocess, with state across calls', async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ['--conditions=source', BIN, '--url', runner.url],
      env: { PATH: process.env.PATH ?? '', CONCH_API_KEY: runner.apiKey },
      stderr: 'pipe',
    })
    const client = new Client({ name: 'desktop', version: '1.0.0' })
    await client.connect(transport)
    try {
      const { tools } = await client.listTools()
      expect(tools.some((t) => t.name === 'shell_run')).toBe(true)
      const created = await client.callTool({ name: 'sandbox_create', arguments: {} })
      const sandbox = (created.structuredContent as { sandbox: string }).sandbox
      await client.callTool({ name: 'shell_run', arguments: { sandbox, command: 'cd /tmp; X=kept' } })
      const r = await client.callTool({
        name: 'shell_run',
        arguments: { sandbox, command: 'echo "$PWD $X"' },
      })
      expect((r.structuredContent as { stdout: string }).stdout).toBe('/tmp kept\n')
      await client.callTool({ name: 'sandbox_destroy', arguments: { sandbox } })
    } finally {
      await client.close()
    }
  })

  it('refuses to start without credentials for a given runner, saying which flag is missing', async () => {
    const { spawnSync } = await import('node:child_process')
    const result = spawnSync(process.execPath, ['--conditions=source', BIN, '--url', runner.url], {
      env: { PATH: process.env.PATH ?? '' },
      input: '',
      encoding: 'utf8',
    })
    expect(result.status).toBe(2)
    expect(result.stderr).toMatch(/--api-key or --token is required/)
    expect(result.stdout).toBe('')
  })
})

describe('conch mcp over streamable HTTP', () => {
  it('serves a remote agent that sends the API key, keeping shell state across calls', async () => {
    const { client, transport } = httpClient(runner.apiKey)
    await client.connect(transport)
    try {
      const created = await client.callTool({ name: 'sandbox_create', arguments: {} })
      const sandbox = (created.structuredContent as { sandbox: string }).sandbox
      await client.callTool({
        name: 'shell_run',
        arguments: { sandbox, command: 'greet() { echo "hi $1"; }' },
      })
      const r = await client.callTool({ name: 'shell_run', arguments: { sandbox, command: 'greet http' } })
      expect((r.structuredContent as { stdout: string }).stdout).toBe('hi http\n')
      await client.callTool({ name: 'sandbox_destroy', arguments: { sandbox } })
    } finally {
      await transport.terminateSession()
      await client.close()
    }
  })

  it('refuses a request without credentials with 401 and a Bearer challenge', async () => {
    const res = await post({}, initialize)
    expect(res.status).toBe(401)
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/)
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /Authorization: Bearer/,
    )
  })

  it('refuses a key the runner does not know, and holds no session for it', async () => {
    const before = http.sessionCount
    const res = await post({ authorization: `Bearer conch_${'0'.repeat(48)}` }, initialize)
    expect(res.status).toBe(401)
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /refused the credential/,
    )
    expect(http.sessionCount).toBe(before)
  })

  it('lets a sandbox token reach its own sandbox only', async () => {
    const mine = await Sandbox.create({ url: runner.url, apiKey: runner.apiKey })
    const other = await Sandbox.create({ url: runner.url, apiKey: runner.apiKey })
    try {
      const { token } = await mine.createAccessToken()
      const { client, transport } = httpClient(token)
      await client.connect(transport)
      try {
        const ok = await client.callTool({
          name: 'shell_run',
          arguments: { sandbox: mine.id, command: 'echo mine' },
        })
        expect((ok.structuredContent as { stdout: string }).stdout).toBe('mine\n')
        const refused = await client.callTool({
          name: 'shell_run',
          arguments: { sandbox: other.id, command: 'echo stolen' },
        })
        expect(refused.isError).toBe(true)
        expect(text(refused)).toMatch(/^(FORBIDDEN|SANDBOX_NOT_FOUND): /)
        const listed = await client.callTool({ name: 'sandbox_list', arguments: {} })
        expect(listed.isError).toBe(true)
        expect(text(listed)).toMatch(/^FORBIDDEN: /)
      } finally {
        await transport.terminateSession()
        await client.close()
      }
    } finally {
      await mine.destroy()
      await other.destroy()
    }
  })

  it('does not let another credential ride an open session by its id', async () => {
    const { client, transport } = httpClient(runner.apiKey)
    await client.connect(transport)
    const sb = await Sandbox.create({ url: runner.url, apiKey: runner.apiKey })
    try {
      const sessionId = transport.sessionId as string
      expect(sessionId).toMatch(/^[0-9a-f-]{36}$/)
      const { token } = await sb.createAccessToken()
      const list = { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }
      const hijack = await post({ authorization: `Bearer ${token}`, 'mcp-session-id': sessionId }, list)
      expect(hijack.status).toBe(404)
      const anonymous = await post({ 'mcp-session-id': sessionId }, list)
      expect(anonymous.status).toBe(401)
      // The owner's session still works.
      expect((await client.listTools()).tools.length).toBeGreaterThan(0)
    } finally {
      await sb.destroy()
      await transport.terminateSession()
      await client.close()
    }
  })

  it('refuses hostile request bodies with a clear status and keeps serving', async () => {
    const auth = { authorization: `Bearer ${runner.apiKey}` }
    const notJson = await fetch(http.url, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{',
    })
    expect(notJson.status).toBe(400)
    const noSession = await post(auth, { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} })
    expect(noSession.status).toBe(400)
    expect(((await noSession.json()) as { error: { message: string } }).error.message).toMatch(/initialize/)
    const huge = await fetch(http.url, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: `"${'x'.repeat(17 * 1024 * 1024)}"`,
    })
    expect(huge.status).toBe(413)
    const elsewhere = await fetch(new URL('/admin', http.url), { headers: auth })
    expect(elsewhere.status).toBe(404)
    const { client, transport } = httpClient(runner.apiKey)
    await client.connect(transport)
    expect((await client.listTools()).tools.length).toBeGreaterThan(0)
    await transport.terminateSession()
    await client.close()
  })
})
