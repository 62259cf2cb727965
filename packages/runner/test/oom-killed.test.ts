// A command that outgrows its sandbox's memory is OOM-killed (exit 137), and every result says
// so with `oomKilled: true`: buffered and streamed exec, REST session runs and the shell socket.
// A command that dies of a plain SIGKILL also exits 137 and has no `oomKilled`. Real namespace
// driver (bubblewrap, cgroups, the real agent); it fails, never skips, where it cannot run.
import { ExecEvent, RunResult } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { nsRunner } from './namespace-runner.ts'
import { createSandbox, shellUrl, type TestRunner } from './runner-fixture.ts'
import { ShellClient } from './shell-client.ts'

const MiB = 1024 * 1024
/** Asks for 512 MiB in a sandbox of 128 MiB. */
const MEMORY_HOG = `perl -e '$x = "a" x (512 * 1024 * 1024); print "survived\\n"'`
/** Dies of SIGKILL without touching the memory limit (in a child, so a session's bash lives on). */
const PLAIN_KILL = `bash -c 'kill -9 $$'`

async function post(runner: TestRunner, url: string, payload: Record<string, unknown>) {
  const res = await runner.app.inject({ method: 'POST', url, headers: runner.auth, payload })
  expect(res.statusCode, res.body).toBe(200)
  return res
}

async function buffered(runner: TestRunner, id: string, command: string, sessionId?: string) {
  const body = { command, ...(sessionId ? { sessionId } : {}) }
  return RunResult.parse((await post(runner, `/v1/sandboxes/${id}/exec`, body)).json())
}

async function streamedExit(runner: TestRunner, id: string, command: string, sessionId?: string) {
  const body = { command, stream: true, ...(sessionId ? { sessionId } : {}) }
  const lines = (await post(runner, `/v1/sandboxes/${id}/exec`, body)).body.trim().split('\n')
  return ExecEvent.parse(JSON.parse(lines.at(-1)!))
}

describe('OOM kills on results (namespace driver)', () => {
  it('marks a command the memory limit killed oomKilled on every path, and a plain SIGKILL not', async () => {
    await using runner = await nsRunner({ listen: true })
    const id = await createSandbox(runner, { limits: { memoryBytes: 128 * MiB } })

    const exec = await buffered(runner, id, MEMORY_HOG)
    expect(exec).toMatchObject({ exitCode: 137, oomKilled: true })
    expect(exec.stdout).not.toContain('survived')
    const plainExec = await buffered(runner, id, 'kill -9 $$')
    expect(plainExec.exitCode).toBe(137)
    expect(plainExec).not.toHaveProperty('oomKilled')

    expect(await buffered(runner, id, MEMORY_HOG, 'default')).toMatchObject({
      exitCode: 137,
      oomKilled: true,
    })
    const plainRun = await buffered(runner, id, PLAIN_KILL, 'default')
    expect(plainRun.exitCode).toBe(137)
    expect(plainRun).not.toHaveProperty('oomKilled')

    const rest = RunResult.parse(
      (await post(runner, `/v1/sandboxes/${id}/sessions/default/run`, { command: MEMORY_HOG })).json(),
    )
    expect(rest).toMatchObject({ exitCode: 137, oomKilled: true })

    expect(await streamedExit(runner, id, MEMORY_HOG)).toEqual(
      expect.objectContaining({ type: 'exit', exitCode: 137, oomKilled: true }),
    )
    expect(await streamedExit(runner, id, MEMORY_HOG, 'default')).toEqual(
      expect.objectContaining({ type: 'exit', exitCode: 137, oomKilled: true }),
    )
    const plainStream = await streamedExit(runner, id, 'kill -9 $$')
    expect(plainStream).toMatchObject({ type: 'exit', exitCode: 137 })
    expect(plainStream).not.toHaveProperty('oomKilled')

    await using shell = await ShellClient.open(shellUrl(runner, id, '?sessionId=default'), runner.apiKey)
    shell.send({ type: 'shell_run', id: 'hog', command: MEMORY_HOG })
    expect(await shell.nextOf('shell_exit', 'hog')).toMatchObject({ code: 137, oomKilled: true })
    shell.send({ type: 'shell_run', id: 'plain', command: PLAIN_KILL })
    const plainExit = await shell.nextOf('shell_exit', 'plain')
    expect(plainExit.code).toBe(137)
    expect(plainExit).not.toHaveProperty('oomKilled')
    // The kills took the commands, never the shell: its state is still there.
    expect(await shell.run('after', 'echo alive')).toMatchObject({ stdout: 'alive\n', code: 0 })
  }, 120_000)
})
