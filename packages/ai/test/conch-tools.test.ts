// The tool definitions themselves, against a real runner: the AI SDK mapping (bound to one
// sandbox, no sandbox argument for the model to get wrong) and what a model sees when its shell
// ends or a call fails.
import { Sandbox } from '@conch/sdk'
import { describe, expect, it } from 'vitest'
import { conchTools } from '../src/ai-sdk.ts'
import { ConchClient, runTool, SANDBOX_TOOLS } from '../src/index.ts'
import { shellRun } from '../src/shell-tools.ts'
import { useSandbox } from './sandbox-fixture.ts'

const fx = useSandbox()

const options = { toolCallId: 'call-1', messages: [], context: {} } as never

describe('conchTools for the AI SDK', () => {
  it('offers the sandbox tools without a sandbox argument', () => {
    const tools = conchTools({ sandbox: fx.sb })
    expect(Object.keys(tools).sort()).toEqual(SANDBOX_TOOLS.map((t) => t.name).sort())
    expect(Object.keys(tools)).not.toContain('sandbox_create')
    const shape =
      (tools.shell_run?.inputSchema as { shape?: Record<string, unknown> } | undefined)?.shape ?? {}
    expect(Object.keys(shape).sort()).toEqual(['command', 'session', 'timeoutMs'])
  })

  it('runs in the bound sandbox and keeps state across calls', async () => {
    const tools = conchTools({ sandbox: fx.sb, only: ['shell_run'] })
    expect(Object.keys(tools)).toEqual(['shell_run'])
    const execute = tools.shell_run?.execute as (input: unknown, options: unknown) => Promise<string>
    await execute({ command: 'cd /tmp && N=41', session: 'default' }, options)
    expect(await execute({ command: 'echo $((N + 1)) $PWD', session: 'default' }, options)).toBe(
      'exit code 0\nstdout:\n42 /tmp\n',
    )
  })

  it('cannot be pointed at another sandbox by the model', async () => {
    const other = await Sandbox.create({ url: fx.runner.url, apiKey: fx.runner.apiKey })
    try {
      const tools = conchTools({ sandbox: fx.sb, only: ['shell_run'] })
      const execute = tools.shell_run?.execute as (input: unknown, options: unknown) => Promise<string>
      // A `sandbox` argument the model adds is overridden by the bound sandbox.
      await execute({ command: 'echo mark > where.txt', session: 'marks', sandbox: other.id }, options)
      expect(await fx.sb.files.read('where.txt')).toBe('mark\n')
      expect((await other.exec('test -e where.txt')).exitCode).toBe(1)
      await expect(ConchClient.bound(fx.sb).sandbox(other.id)).rejects.toThrow(/bound to one sandbox/)
    } finally {
      await other.destroy()
    }
  })
})

describe('what a model sees', () => {
  it('a shell that exited: the error, then a fresh shell in the same session on the next call', async () => {
    const client = ConchClient.bound(fx.sb)
    const context = { client, outputBudgetBytes: 4096 }
    const exited = await runTool(
      shellRun,
      { sandbox: fx.sb.id, session: 'quits', command: 'exit 3' },
      context,
    )
    expect(exited.isError).toBe(true)
    expect(exited.text).toMatch(/^SHELL_CLOSED: [\s\S]*starts a new shell there/)
    const next = await runTool(
      shellRun,
      { sandbox: fx.sb.id, session: 'quits', command: 'echo back' },
      context,
    )
    expect(next.isError, next.text).toBeFalsy()
    expect(next.structured?.stdout).toBe('back\n')
  })
})
