// Code in a sandbox is an adversary who reads our source, so it knows where the image keeps the
// API key (/run/secrets, the runner's environment), the state dir (/var/lib/conch) and where a
// Docker socket would be. From inside a sandbox of the runner in the container, none of them
// can be reached.
import { describe, expect } from 'vitest'
import { test } from '../../tests-e2e/test/runner-fixture.ts'
import { containerExec, tier } from './tier-fixture.ts'

describe('attacks from a sandbox in the container', () => {
  test('runs against the runner in the container, not one on the host', async ({ runner, sandbox }) => {
    expect(runner.url).toBe(tier().url)
    const listed = await containerExec(tier().name, 'ls /var/lib/conch/sandboxes')
    expect(listed.split('\n')).toContain(sandbox.id)
  })

  test('cannot read the API key from the secret file, the environment or any process', async ({
    sandbox,
  }) => {
    const key = tier().apiKey
    const r = await sandbox.exec(
      'cat /run/secrets/conch-api-key; env; cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n"; ' +
        'grep -rs conch_ /proc/*/cmdline /var/lib/conch /run 2>/dev/null; true',
    )
    expect(r.stdout).not.toContain(key)
    expect(r.stderr).not.toContain(key)
    // The key is there to find, outside the sandbox: the probe could have seen it.
    expect(await containerExec(tier().name, 'cat /run/secrets/conch-api-key')).toBe(key)
  })

  test('cannot see the state dir or the runner database', async ({ sandbox }) => {
    const r = await sandbox.exec('ls -a /var/lib/conch; find / -xdev -name "runner.db*" 2>/dev/null; true')
    expect(r.stdout).not.toContain('runner.db')
    expect(r.stderr).toMatch(/No such file or directory/)
    expect(await containerExec(tier().name, 'ls /var/lib/conch')).toContain('runner.db')
  })

  test('cannot see the runner or any process outside its own pid namespace', async ({ sandbox }) => {
    const r = await sandbox.exec(
      'cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" " "; echo; grep CapEff /proc/self/status; id -u',
    )
    expect(r.stdout).not.toMatch(/conch runner|main.ts runner/)
    expect(r.stdout).not.toContain('tini')
    expect(r.stdout).toMatch(/CapEff:\s+0000000000000000/)
    expect(r.stdout.trim().split('\n').at(-1)).toBe('1000')
  })

  test('reaches no Docker socket, by path or over the network', async ({ sandbox }) => {
    const socketPath = new URL(tier().dockerHost.replace(/^unix:/, 'file:')).pathname
    const r = await sandbox.exec(
      `for p in /var/run/docker.sock /run/docker.sock ${socketPath}; do test -e "$p" && echo "found $p"; done; ` +
        'for port in 2375 2376; do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && echo "open $port"; done; ' +
        `(exec 3<>/dev/tcp/127.0.0.1/${new URL(tier().url).port}) 2>/dev/null && echo "runner reachable"; true`,
    )
    expect(r.stdout).toBe('')
    // Nor does the container itself hold a Docker socket that a sandbox escape could use.
    const inContainer = await containerExec(
      tier().name,
      `for p in /var/run/docker.sock /run/docker.sock ${socketPath}; do test -e "$p" && echo "found $p"; done; true`,
    )
    expect(inContainer).toBe('')
  })
})
