// `conch mcp` as an MCP client starts it: with no runner URL it starts its own runner on
// loopback, keeps stdout for the protocol, and stops that runner when the client goes away.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { afterAll, describe, expect, it } from 'vitest'

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url))
const stateDir = mkdtempSync(join(tmpdir(), 'conch-mcp-command-'))

afterAll(() => rmSync(stateDir, { recursive: true, force: true, maxRetries: 5 }))

describe('conch mcp', () => {
  it('prints its help', async () => {
    const { spawnSync } = await import('node:child_process')
    const help = spawnSync(process.execPath, ['--conditions=source', MAIN, 'mcp', '--help'], {
      encoding: 'utf8',
    })
    expect(help.status).toBe(0)
    expect(help.stdout).toMatch(/^conch mcp: /)
    expect(help.stdout).toMatch(/--transport <t>/)
  })

  it('starts its own runner when given no URL and serves a stateful shell over stdio', async () => {
    const env: Record<string, string> = { PATH: process.env.PATH ?? '' }
    env.CONCH_STATE_DIR = stateDir
    // The local driver keeps this test about the command, not isolation (tests-e2e covers that).
    env.CONCH_DRIVER = 'local'
    env.CONCH_UNSAFE_LOCAL = '1'
    const stderr: string[] = []
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ['--conditions=source', MAIN, 'mcp'],
      env,
      stderr: 'pipe',
    })
    transport.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk.toString()))
    const client = new Client({ name: 'desktop', version: '1.0.0' })
    await client.connect(transport)
    try {
      expect(client.getServerVersion()?.name).toBe('conch')
      const created = await client.callTool({ name: 'sandbox_create', arguments: {} })
      const sandbox = (created.structuredContent as { sandbox: string }).sandbox
      await client.callTool({ name: 'shell_run', arguments: { sandbox, command: 'cd /tmp' } })
      const r = await client.callTool({ name: 'shell_run', arguments: { sandbox, command: 'pwd' } })
      expect((r.structuredContent as { stdout: string }).stdout).toBe('/tmp\n')
      await client.callTool({ name: 'sandbox_destroy', arguments: { sandbox } })
      expect(stderr.join('')).toMatch(/conch mcp: started a runner at http:\/\/127\.0\.0\.1:\d+/)
    } finally {
      await client.close()
    }
  })
})
