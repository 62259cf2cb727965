// conch's MCP tools driven by the MCP SDK's own client against a real runner: state that carries
// across calls, timeouts that keep the shell, output budgets, progress, cancellation, files,
// processes, and errors a model can act on.

import { Sandbox } from '@conch/sdk'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RunnerChild, startRunnerChild } from '../../sdk/test/runner-child.ts'
import { type ConchMcpServer, createConchMcpServer } from '../src/index.ts'

let runner: RunnerChild
let mcp: ConchMcpServer
let client: Client
let sandbox: string

const BUDGET = 4096

async function call(name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult
}

function text(result: CallToolResult): string {
  return result.content.map((c) => (c.type === 'text' ? c.text : '')).join('')
}

async function run(command: string, extra: Record<string, unknown> = {}) {
  const result = await call('shell_run', { sandbox, command, ...extra })
  expect(result.isError, text(result)).toBeFalsy()
  return result.structuredContent as {
    stdout: string
    stderr: string
    exitCode: number
    timedOut: boolean
    stdoutBytes: number
  }
}

beforeAll(async () => {
  runner = await startRunnerChild()
  mcp = createConchMcpServer({ url: runner.url, apiKey: runner.apiKey, outputBudgetBytes: BUDGET })
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  await mcp.server.connect(serverSide)
  client = new Client({ name: 'test', version: '1.0.0' })
  await client.connect(clientSide)
  const created = await call('sandbox_create', { metadata: { by: 'mcp-test' } })
  sandbox = (created.structuredContent as { sandbox: string }).sandbox
}, 90_000)

afterAll(async () => {
  await call('sandbox_destroy', { sandbox }).catch(() => {})
  await client?.close()
  await mcp?.close()
  await runner?.[Symbol.asyncDispose]()
})

describe('conch MCP tools', () => {
  it('lists every tool with a description and an object input schema', async () => {
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name).sort()).toEqual(
      [
        'exec',
        'file_edit',
        'file_list',
        'file_read',
        'file_write',
        'process_kill',
        'process_output',
        'port_expose',
        'port_list',
        'process_start',
        'restore',
        'sandbox_create',
        'sandbox_destroy',
        'sandbox_list',
        'session_create',
        'session_list',
        'shell_interrupt',
        'shell_run',
        'snapshot',
      ].sort(),
    )
    for (const tool of tools) {
      expect(tool.description?.length, tool.name).toBeGreaterThan(20)
      expect(tool.inputSchema.type).toBe('object')
    }
    const shellRun = tools.find((t) => t.name === 'shell_run')
    expect(shellRun?.inputSchema.required).toEqual(['sandbox', 'command'])
  })

  it('keeps cd, exported variables and functions across shell_run calls', async () => {
    await run('cd /tmp && export GREETING=hi && shout() { echo "${1^^}"; }')
    const r = await run('pwd; echo $GREETING; shout quiet')
    expect(r.stdout).toBe('/tmp\nhi\nQUIET\n')
    expect(r.exitCode).toBe(0)
  })

  it('separates sessions', async () => {
    await run('export ONLY_HERE=1', { session: 'other' })
    expect((await run('echo "[$ONLY_HERE]"')).stdout).toBe('[]\n')
    expect((await run('echo "[$ONLY_HERE]"', { session: 'other' })).stdout).toBe('[1]\n')
    const listed = await call('session_list', { sandbox })
    expect(text(listed)).toMatch(/^other\topen\t\S*workspace\tidle$/m)
  })

  it('reports the exit code and stderr of a failing command', async () => {
    const r = await run('echo oops >&2; exit_code() { return 3; }; exit_code')
    expect(r.exitCode).toBe(3)
    expect(r.stderr).toBe('oops\n')
  })

  it('stops a command at its timeout and keeps the shell and its state', async () => {
    await run('export KEPT=yes')
    const r = await run('sleep 60', { timeoutMs: 1_000 })
    expect(r.timedOut).toBe(true)
    expect((await run('echo $KEPT')).stdout).toBe('yes\n')
  })

  it('keeps 10 MB of output within the budget, head and tail, and says how much it elided', async () => {
    const result = await call('shell_run', {
      sandbox,
      command: "echo FIRST; head -c 10000000 /dev/zero | tr '\\0' a; echo; echo LAST",
    })
    const r = result.structuredContent as { stdout: string; stdoutBytes: number }
    expect(r.stdoutBytes).toBe(10_000_000 + 'FIRST\n'.length + 1 + 'LAST\n'.length)
    expect(r.stdout.startsWith('FIRST\naaa')).toBe(true)
    expect(r.stdout.endsWith('a\nLAST\n')).toBe(true)
    expect(Buffer.byteLength(r.stdout)).toBeLessThan(BUDGET + 300)
    expect(r.stdout).toMatch(/\d+ bytes elided \(of 10000012\)/)
    expect(text(result).length).toBeLessThan(BUDGET + 400)
  })

  it('sends progress with the latest output lines when the client asks for it', async () => {
    const messages: string[] = []
    const result = (await client.callTool(
      { name: 'shell_run', arguments: { sandbox, command: 'echo step-one; sleep 2.5; echo step-two' } },
      undefined,
      {
        onprogress: (p) => messages.push(p.message ?? ''),
      },
    )) as CallToolResult
    expect((result.structuredContent as { stdout: string }).stdout).toBe('step-one\nstep-two\n')
    expect(messages.length).toBeGreaterThan(0)
    expect(messages.some((m) => m.includes('step-one'))).toBe(true)
  })

  it('interrupts the command when the client cancels the call, and the shell goes on', async () => {
    const abort = new AbortController()
    const pending = client.callTool(
      { name: 'shell_run', arguments: { sandbox, command: 'echo started; sleep 120; echo never' } },
      undefined,
      {
        signal: abort.signal,
        onprogress: (p) => {
          if (p.message?.includes('started')) abort.abort(new Error('cancelled by the test'))
        },
      },
    )
    await expect(pending).rejects.toThrow(/cancelled by the test/)
    // Runs on a shell are serial: the next one finishes long before `sleep 120` would have.
    const next = await run('echo after')
    expect(next.stdout).toBe('after\n')
  })

  it('interrupts a running command with shell_interrupt', async () => {
    const pending = call('shell_run', { sandbox, session: 'long', command: 'sleep 120' })
    await expect
      .poll(async () => text(await call('session_list', { sandbox })), { timeout: 20_000 })
      .toMatch(/^long\topen\t\S+\trunning/m)
    const interrupted = await call('shell_interrupt', { sandbox, session: 'long' })
    expect(interrupted.isError).toBeFalsy()
    const r = (await pending).structuredContent as { exitCode: number }
    expect(r.exitCode).toBe(130)
  })

  it('writes, reads with line numbers and ranges, edits and lists files', async () => {
    const lines = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join('\n')
    expect(
      (await call('file_write', { sandbox, path: 'notes.txt', content: `${lines}\n` })).isError,
    ).toBeFalsy()
    const read = text(await call('file_read', { sandbox, path: 'notes.txt', offset: 10, limit: 3 }))
    expect(read).toBe(
      'notes.txt: lines 10-12 of 30 (read on with offset 13)\n    10\tline 10\n    11\tline 11\n    12\tline 12',
    )

    const ambiguous = await call('file_edit', {
      sandbox,
      path: 'notes.txt',
      old_string: 'line 1',
      new_string: 'x',
    })
    expect(ambiguous.isError).toBe(true)
    expect(text(ambiguous)).toMatch(/occurs 11 times.*make it unique/)
    const missing = await call('file_edit', {
      sandbox,
      path: 'notes.txt',
      old_string: 'no such text',
      new_string: 'x',
    })
    expect(missing.isError).toBe(true)
    expect(text(missing)).toMatch(/not found/)

    const edited = await call('file_edit', {
      sandbox,
      path: 'notes.txt',
      old_string: 'line 30\n',
      new_string: 'the end\n',
    })
    expect(edited.isError).toBeFalsy()
    expect((await run('tail -n 1 notes.txt', { session: 'files' })).stdout).toBe('the end\n')

    const listed = text(await call('file_list', { sandbox, path: '/workspace' }))
    expect(listed).toMatch(/^notes\.txt\tfile\t/m)
  })

  it('starts a background process, reads its output since an offset, and kills it', async () => {
    const started = await call('process_start', { sandbox, command: 'echo ready; sleep 300' })
    const processId = (started.structuredContent as { process: string }).process
    let first = { nextOffset: 0, stdout: '' }
    await expect
      .poll(async () => {
        first = (await call('process_output', { sandbox, process: processId }))
          .structuredContent as typeof first
        return first.stdout
      })
      .toBe('ready\n')
    const since = (await call('process_output', { sandbox, process: processId, since: first.nextOffset }))
      .structuredContent as { stdout: string }
    expect(since.stdout).toBe('')
    const killed = await call('process_kill', { sandbox, process: processId })
    expect(text(killed)).toMatch(/is killed$/)
  })

  it('runs an isolated exec that leaves the sessions untouched', async () => {
    const r = (await call('exec', { sandbox, command: 'cd / && export GREETING=changed && pwd' }))
      .structuredContent as {
      stdout: string
    }
    expect(r.stdout).toBe('/\n')
    expect((await run('echo $GREETING')).stdout).toBe('hi\n')
  })

  it('checkpoints a sandbox and forks a new one where the same session goes on', async () => {
    await run('mkdir -p /tmp/snapdir && cd /tmp/snapdir && export SNAPPED=before && echo kept > f.txt', {
      session: 'snap',
    })
    const taken = await call('snapshot', { sandbox, name: 'mcp-test' })
    expect(taken.isError, text(taken)).toBeFalsy()
    const snapshotId = (taken.structuredContent as { snapshot: string }).snapshot
    const restored = await call('restore', { snapshot: snapshotId })
    expect(restored.isError, text(restored)).toBeFalsy()
    const fork = (restored.structuredContent as { sandbox: string }).sandbox
    expect(fork).not.toBe(sandbox)
    try {
      const r = await call('shell_run', { sandbox: fork, session: 'snap', command: 'echo "$SNAPPED $PWD"' })
      expect((r.structuredContent as { stdout: string }).stdout).toBe('before /tmp/snapdir\n')
    } finally {
      await call('sandbox_destroy', { sandbox: fork })
    }
  })

  it('lists a listening port and exposes it with a URL that carries a token for that port', async () => {
    const port = 20_000 + Math.floor(Math.random() * 20_000)
    const started = await call('process_start', {
      sandbox,
      command: `exec python3 -m http.server ${port} --bind 127.0.0.1`,
    })
    const processId = (started.structuredContent as { process: string }).process
    try {
      await expect
        .poll(async () => text(await call('port_list', { sandbox })), { timeout: 20_000 })
        .toMatch(new RegExp(`^${port}\\t127\\.0\\.0\\.1`, 'm'))
      const exposed = await call('port_expose', { sandbox, port })
      expect(exposed.isError, text(exposed)).toBeFalsy()
      const url = (exposed.structuredContent as { url: string }).url
      expect(url).toContain(`/ports/${port}/`)
      expect(url).toMatch(/cpt_/)
      const answer = await fetch(url, { redirect: 'manual' })
      expect([200, 302, 303, 307]).toContain(answer.status)
    } finally {
      await call('process_kill', { sandbox, process: processId })
    }
  })

  it("offers a session's recent output and a workspace file as resources", async () => {
    await run('echo resource-marker-1; echo resource-marker-2 >&2', { session: 'res' })
    const { resources } = await client.listResources()
    const uri = `conch://sandboxes/${sandbox}/sessions/res/scrollback`
    expect(resources.map((r) => r.uri)).toContain(uri)
    const scrollback = await client.readResource({ uri })
    const body = scrollback.contents[0] as { text: string }
    expect(body.text).toContain('resource-marker-1\n')
    expect(body.text).toContain('resource-marker-2\n')

    await run('mkdir -p dir && printf "# hello\\n" > dir/readme.md', { session: 'res' })
    const file = await client.readResource({ uri: `conch://sandboxes/${sandbox}/files/dir/readme.md` })
    expect((file.contents[0] as { text: string }).text).toBe('# hello\n')
  })

  it('creates a sandbox with its idle settings, a fork of it keeps them, and a bad pair is refused with what to do', async () => {
    const created = await call('sandbox_create', {
      hibernateAfterMs: 120_000,
      idleTimeoutMs: 900_000,
      sessionIdleTimeoutMs: null,
    })
    expect(created.isError, text(created)).toBeFalsy()
    const id = (created.structuredContent as { sandbox: string }).sandbox
    const settings = async (sandboxId: string) => {
      const sb = await Sandbox.connect(sandboxId, { url: runner.url, apiKey: runner.apiKey })
      const { hibernateAfterMs, idleTimeoutMs, sessionIdleTimeoutMs } = sb.info
      return { hibernateAfterMs, idleTimeoutMs, sessionIdleTimeoutMs }
    }
    const wanted = { hibernateAfterMs: 120_000, idleTimeoutMs: 900_000, sessionIdleTimeoutMs: null }
    try {
      expect(await settings(id)).toEqual(wanted)
      const snap = (await call('snapshot', { sandbox: id })).structuredContent as { snapshot: string }
      const restored = await call('restore', { snapshot: snap.snapshot })
      expect(restored.isError, text(restored)).toBeFalsy()
      const fork = (restored.structuredContent as { sandbox: string }).sandbox
      try {
        expect(await settings(fork)).toEqual(wanted)
      } finally {
        await call('sandbox_destroy', { sandbox: fork })
      }
    } finally {
      await call('sandbox_destroy', { sandbox: id })
    }
    const refused = await call('sandbox_create', { hibernateAfterMs: 900_000, idleTimeoutMs: 120_000 })
    expect(refused.isError).toBe(true)
    expect(text(refused)).toMatch(
      /^BAD_REQUEST: .*hibernateAfterMs \(900000\) must be shorter than idleTimeoutMs/,
    )
  })

  it('starts a process with keepAlive, which counts against the per-sandbox cap of such processes', async () => {
    const started: string[] = []
    try {
      for (let i = 0; i < 16; i++) {
        const r = await call('process_start', { sandbox, command: 'sleep 120', keepAlive: true })
        expect(r.isError, text(r)).toBeFalsy()
        started.push((r.structuredContent as { process: string }).process)
      }
      // The 17th is refused: the tool passed keepAlive through to the runner.
      const over = await call('process_start', { sandbox, command: 'sleep 120', keepAlive: true })
      expect(over.isError).toBe(true)
      expect(text(over)).toMatch(/^RATE_LIMITED: .*keepAlive/)
      const plain = await call('process_start', { sandbox, command: 'sleep 120' })
      expect(plain.isError, text(plain)).toBeFalsy()
      started.push((plain.structuredContent as { process: string }).process)
    } finally {
      for (const process of started) await call('process_kill', { sandbox, process })
    }
  })

  it('answers a call on an unknown sandbox with the error code and what to do, not a protocol error', async () => {
    const result = await call('shell_run', { sandbox: 'sb_doesnotexist', command: 'true' })
    expect(result.isError).toBe(true)
    expect(text(result)).toMatch(/^SANDBOX_NOT_FOUND: /)
  })

  it('refuses arguments that do not match the schema before touching the sandbox', async () => {
    const result = await call('shell_run', { sandbox, command: '' })
    expect(result.isError).toBe(true)
    expect(text(result)).toMatch(/command/)
  })
})
