// conch under the OpenAI Agents SDK's own interfaces, against a real runner: the `Shell` its
// shellTool calls, and function tools invoked the way the SDK invokes them.
import { RunContext } from '@openai/agents'
import { describe, expect, it } from 'vitest'
import { conchAgentTools, conchShell } from '../src/openai-agents.ts'
import { useSandbox } from './sandbox-fixture.ts'

const fx = useSandbox()

describe('conchShell', () => {
  it("runs an action's commands in one persistent session, in order", async () => {
    const shell = conchShell({ sandbox: fx.sb })
    const first = await shell.run({
      commands: ['cd /tmp', 'export X=7', 'echo "$X $PWD"; echo warn >&2; false'],
    })
    expect(first.output).toEqual([
      { stdout: '', stderr: '', outcome: { type: 'exit', exitCode: 0 } },
      { stdout: '', stderr: '', outcome: { type: 'exit', exitCode: 0 } },
      { stdout: '7 /tmp\n', stderr: 'warn\n', outcome: { type: 'exit', exitCode: 1 } },
    ])
    const second = await shell.run({ commands: ['echo $X'] })
    expect(second.output[0]?.stdout).toBe('7\n')
  })

  it('reports a timeout, keeps the shell, and runs none of the later commands', async () => {
    const shell = conchShell({ sandbox: fx.sb, session: 'slow' })
    const r = await shell.run({ commands: ['sleep 60', 'echo never'], timeoutMs: 1_000 })
    expect(r.output).toEqual([{ stdout: '', stderr: '', outcome: { type: 'timeout' } }])
    expect((await shell.run({ commands: ['echo alive'] })).output[0]?.stdout).toBe('alive\n')
  })

  it("keeps each command's output within the model's maxOutputLength, head and tail", async () => {
    const shell = conchShell({ sandbox: fx.sb })
    const r = await shell.run({ commands: ['seq 1 100000'], maxOutputLength: 200 })
    const out = r.output[0]?.stdout ?? ''
    expect(out.startsWith('1\n2\n3\n')).toBe(true)
    expect(out.endsWith('99999\n100000\n')).toBe(true)
    expect(out).toMatch(/bytes elided \(of 588895\)/)
    expect(r.maxOutputLength).toBe(200)
  })
})

describe('conchAgentTools', () => {
  it('offers the file and process tools, bound to the sandbox', async () => {
    const tools = conchAgentTools({ sandbox: fx.sb })
    const names = tools.map((t) => t.name)
    expect(names).toContain('file_edit')
    expect(names).not.toContain('shell_run')
    for (const t of tools) expect(Object.keys(t.parameters.properties)).not.toContain('sandbox')
    const byName = (name: string) => tools.find((t) => t.name === name)!
    const context = new RunContext()
    expect(
      await byName('file_write').invoke(context, JSON.stringify({ path: 'a.txt', content: 'one\ntwo\n' })),
    ).toMatch(/^wrote 8 bytes/)
    expect(
      await byName('file_edit').invoke(
        context,
        JSON.stringify({ path: 'a.txt', old_string: 'two', new_string: '2' }),
      ),
    ).toBe('replaced 1 occurrence in a.txt')
    expect(await fx.sb.files.read('a.txt')).toBe('one\n2\n')
  })

  it('answers arguments that do not match with what is wrong, without running anything', async () => {
    const [write] = conchAgentTools({ sandbox: fx.sb, only: ['file_write'] })
    const answer = await write!.invoke(new RunContext(), JSON.stringify({ path: 'b.txt' }))
    expect(answer).toMatch(/^invalid arguments: [\s\S]*content/)
    expect((await fx.sb.exec('test -e b.txt')).exitCode).toBe(1)
  })
})
