// The local driver's agent shares the host, so it gets a temp root of its sandbox's own: the
// command files and pipes of an agent killed without its cleanup go with the sandbox's folder,
// not into the host's shared /dev/shm, where every such agent used to leave its directories.
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { exec } from './namespace-runner.ts'
import { createSandbox, startRunner } from './runner-fixture.ts'

/** Directories an agent makes in a temp root (session command files, children's pipes). */
const agentDirs = (root: string): string[] =>
  existsSync(root) ? readdirSync(root).filter((name) => name.startsWith('conch-')) : []

describe('local driver: the agent temp root', () => {
  it('is in the sandbox folder, and goes with it even when the agent is killed', async () => {
    await using runner = await startRunner()
    const id = await createSandbox(runner)
    const r = await exec(
      runner,
      id,
      'echo out > /dev/stdout; echo "$BASH_SOURCE"; readlink /proc/self/fd/1',
      'default',
    )
    expect(r.exitCode).toBe(0)
    const folder = join(runner.stateDir, 'sandboxes', id)
    // The run's command file and its stdout pipe live under the sandbox's own temp root, not in
    // the host's /dev/shm (checked by path: other tests make directories there meanwhile).
    const [, commandFile, stdoutPipe] = r.stdout.split('\n')
    expect(commandFile).toContain(join(folder, 'tmp'))
    expect(stdoutPipe).toContain(join(folder, 'tmp'))
    expect(agentDirs(join(folder, 'tmp')).length).toBeGreaterThan(0)
    const agent = Number((await exec(runner, id, 'echo $PPID', 'default')).stdout.trim())
    process.kill(agent, 'SIGKILL')
    const res = await runner.app.inject({
      method: 'DELETE',
      url: `/v1/sandboxes/${id}`,
      headers: runner.auth,
    })
    expect(res.statusCode).toBeLessThan(300)
    expect(existsSync(folder)).toBe(false)
  })
})
