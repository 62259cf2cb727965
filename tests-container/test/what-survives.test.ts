// What survives what, in a container: a runner restart inside the running container keeps every
// sandbox (agents are detached; the entrypoint starts the runner again and it reconnects); a
// container restart ends them, and the state volume keeps their records and the key.
import { Sandbox } from '@conch/sdk'
import { describe, expect, test, vi } from 'vitest'
import { startRunnerContainer } from '../harness/runner-container.ts'
import { containerExec, createSandbox, docker, tier, waitReady } from './tier-fixture.ts'

/** The runner's pid inside the container, from the state dir's lock. */
async function runnerPid(name: string): Promise<string> {
  return (await containerExec(name, 'cat /var/lib/conch/runner.pid')).trim()
}

describe('what survives what', () => {
  test('a runner killed inside the container is started again and keeps the shell state', async () => {
    await using box = await startRunnerContainer(docker(), { image: tier().image, name: 'conch-survive' })
    const sandbox = await createSandbox(box)
    const sh = await sandbox.shell()
    await sh.run('cd /usr && export SURVIVES=yes')
    await sandbox.files.write('/workspace/kept.txt', 'on disk\n')
    const bashPid = (await sh.run('echo $$')).stdout.trim()
    const before = await runnerPid(box.name)

    await containerExec(box.name, `kill -KILL ${before}`)
    // The entrypoint starts a new runner; wait until it holds the lock and has reconnected.
    await vi.waitFor(
      async () => {
        const pid = await runnerPid(box.name).catch(() => '')
        if (pid === before || pid === '')
          throw new Error(`no new runner after killing ${before}:\n${await box.logs()}`)
      },
      { timeout: 60_000, interval: 250 },
    )
    await waitReady(box.url)

    const again = await Sandbox.connect(sandbox.id, { url: box.url, apiKey: box.apiKey })
    await using shell = await again.reattachShell(sh.sessionId)
    const state = await shell.run('pwd; echo "$SURVIVES"; echo $$')
    expect(state.stdout).toBe(`/usr\nyes\n${bashPid}\n`)
    expect(await again.files.read('/workspace/kept.txt')).toBe('on disk\n')
    expect(await box.logs()).toContain('starting it again')
  })

  test('a container restart ends the sandboxes but the volume keeps their records and the key', async () => {
    await using box = await startRunnerContainer(docker(), { image: tier().image, name: 'conch-restart' })
    const sandbox = await createSandbox(box)
    const sh = await sandbox.shell()
    await sh.run('export GONE=soon')

    await docker().run(['restart', '--time', '20', box.name])
    await box.waitHealthy()
    await waitReady(box.url)

    // The same key still works (it comes from the secret file), and the record is on the volume.
    const listed = await Sandbox.list({ url: box.url, apiKey: box.apiKey })
    const record = listed.find((s) => s.id === sandbox.id)
    expect(record?.status).toBe('dead')
    expect(record?.deadReason).toBeTruthy()
    // No process of the old sandbox is left in the container (its cgroups name it; the runner's
    // warm pool has sandboxes of its own running by now).
    const procs = await containerExec(
      box.name,
      `grep -l '${sandbox.id}' /proc/[0-9]*/cgroup 2>/dev/null | wc -l`,
    )
    expect(procs.trim()).toBe('0')
  })

  test('a new container on the same volume lists the sandboxes of the old one', async () => {
    await using first = await startRunnerContainer(docker(), { image: tier().image, name: 'conch-volume' })
    const sandbox = await createSandbox(first)
    await docker().run(['rm', '--force', first.name])
    await using second = await startRunnerContainer(docker(), {
      image: tier().image,
      name: 'conch-volume-next',
      volume: first.volume,
    })
    await waitReady(second.url)
    const listed = await Sandbox.list({ url: second.url, apiKey: second.apiKey })
    expect(listed.map((s) => s.id)).toContain(sandbox.id)
  })
})
