// The warm-up of a pooled sandbox (packages/runner/src/pool-warm-up.ts), attacked through the SDK
// against the real runner CLI and its default driver, by the client who takes the sandbox: it
// replays its shell's scrollback from the start, lists sessions and processes and greps the
// sandbox for the warm-up's commands. Whatever the warm-up did must not show.
import { Sandbox } from '@conch/sdk'
import { expect, it, vi } from 'vitest'
import { startRunner } from '../harness/runner-process.ts'

async function metric(runner: { url: string; apiKey: string }, name: string): Promise<number> {
  const res = await fetch(`${runner.url}/metrics`, { headers: { authorization: `Bearer ${runner.apiKey}` } })
  const line = (await res.text()).split('\n').find((l) => l.startsWith(`${name}{`))
  return line === undefined ? 0 : Number(line.split(' ').at(-1))
}

it('a pooled sandbox shows nothing of its warm-up: scrollback, sessions, processes, files', async () => {
  await using runner = await startRunner({ args: ['--warm-pool', '1', '--log-level', 'warn'] })
  await vi.waitFor(async () => expect(await metric(runner, 'conch_warm_pool_ready')).toBe(1), {
    timeout: 60_000,
    interval: 100,
  })
  const sandbox = await Sandbox.create({ url: runner.url, apiKey: runner.apiKey })
  await using _destroy = { [Symbol.asyncDispose]: () => sandbox.destroy() }
  expect(await metric(runner, 'conch_warm_pool_hits_total')).toBe(1)
  const shell = await sandbox.shell()
  // The marker is put together at run time, so no command of this test holds it.
  const search = [
    'm=conch-pool-; m+=warm-up',
    'grep -rl "$m" "$PWD" "$HOME" /tmp /var/tmp /dev/shm /run 2>/dev/null | head -5',
    'all=; for p in /proc/[0-9]*; do all+=$(tr "\\0" " " < $p/cmdline 2>/dev/null); all+=" "; done',
    'case $all in *"$m"*) echo "process holds it";; *) echo none;; esac',
    'env | grep -c CONCH_WARM_UP; history | wc -l',
  ].join('\n')
  const found = 'none\n0\n0\n'
  expect(await shell.run(search)).toMatchObject({ stdout: found, exitCode: 0 })
  expect((await sandbox.listSessions()).map((s) => s.id)).toEqual([shell.sessionId])
  // Replayed from offset 0, the session's log holds the client's one run and nothing before it.
  const replayed: string[] = []
  const again = await sandbox.reattachShell(shell.sessionId, {
    offset: 0,
    onOutput: (o) => replayed.push(typeof o.data === 'string' ? o.data : Buffer.from(o.data).toString()),
  })
  await again.run('true')
  expect(replayed.join('')).toBe(found)
  again.close()
  shell.close()
})
