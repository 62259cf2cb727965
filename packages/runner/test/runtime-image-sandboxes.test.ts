// A sweep of the runtime image (runtime-image-sweep.ts) under live sandboxes of the real
// namespace and gVisor drivers: the sweep releases the host's mount and file, the sandboxes go on
// running on their own binds, the loop device goes with the last of them, and the next sandbox
// mounts the image again. Needs root, bubblewrap and runsc; fails, never skips.
import { createHash } from 'node:crypto'
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { GvisorDriver } from '../src/drivers/gvisor-driver.ts'
import { NamespaceDriver } from '../src/drivers/namespace-driver.ts'
import { isMountPoint, sweepRuntimeImages } from '../src/drivers/runtime-image-sweep.ts'
import { exec } from './namespace-runner.ts'
import { createSandbox, startRunner } from './runner-fixture.ts'
import { eventually, farFuture, imageCache, loopDevicesOf } from './runtime-image-cache.ts'

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex')

/** Host pids whose executable is the file `dev`/`ino` (the agent's node on the image). */
function processesRunning(dev: number, ino: number): number[] {
  const pids: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const exe = statSync(`/proc/${name}/exe`)
      if (exe.dev === dev && exe.ino === ino) pids.push(Number(name))
    } catch {}
  }
  return pids
}

async function sweepUnderLiveSandbox(
  make: (stateDir: string, runtimeCacheDir: string) => NamespaceDriver | GvisorDriver,
  readsAgentBinary: boolean,
): Promise<void> {
  await using cache = imageCache()
  const stateDir = mkdtempSync(join(tmpdir(), 'conch-image-'))
  const driver = make(stateDir, cache.dir)
  const problem = driver.problem({ limits: { memoryBytes: 1, cpus: 1 } })
  if (problem) throw new Error(`this host cannot run ${driver.name} sandboxes: ${problem}`)
  await using runner = await startRunner({ stateDir, driver, removeStateDir: true })
  const id = await createSandbox(runner)
  expect((await exec(runner, id, 'echo before')).stdout).toBe('before\n')
  const [key] = readdirSync(cache.dir).filter((name) => /^[0-9a-f]{16}$/.test(name))
  const image = join(cache.dir, `${key}.img`)
  const node = statSync(join(cache.dir, `${key}`, 'node'))
  const agents = readsAgentBinary ? processesRunning(node.dev, node.ino) : []
  if (readsAgentBinary) expect(agents).toHaveLength(1)

  // No runner has used the image for a day, as the sweep sees it: it is released.
  expect((await sweepRuntimeImages(cache.dir, { now: farFuture() })).released).toEqual([key])
  expect(isMountPoint(join(cache.dir, `${key}`))).toBe(false)
  expect(existsSync(image)).toBe(false)
  expect(loopDevicesOf(image)).toHaveLength(1)

  // The live sandbox goes on: its shell, a new session's bash, and the agent's own binary.
  expect((await exec(runner, id, 'echo after; cat /proc/self/status | grep -c Pid')).stdout).toBe(
    'after\n3\n',
  )
  expect((await exec(runner, id, 'echo fresh', 'after-sweep')).stdout).toBe('fresh\n')
  for (const pid of agents)
    expect(sha256(readFileSync(`/proc/${pid}/exe`))).toBe(
      sha256(readFileSync(realpathSync(process.execPath))),
    )

  // Its end frees the loop device; the next sandbox mounts the image again.
  const res = await runner.app.inject({ method: 'DELETE', url: `/v1/sandboxes/${id}`, headers: runner.auth })
  expect(res.statusCode).toBeLessThan(300)
  expect(await eventually(() => loopDevicesOf(image).length === 0)).toBe(true)
  const next = await createSandbox(runner)
  expect((await exec(runner, next, 'echo next')).stdout).toBe('next\n')
  expect(isMountPoint(join(cache.dir, `${key}`))).toBe(true)
}

describe('runtime image sweep under live sandboxes', () => {
  it('never breaks a live namespace sandbox, and frees the loop device with it', async () => {
    await sweepUnderLiveSandbox(
      (stateDir, runtimeCacheDir) => new NamespaceDriver({ stateDir, runtimeCacheDir }),
      true,
    )
  }, 180_000)

  it('never breaks a live gVisor sandbox, and frees the loop device with it', async () => {
    await sweepUnderLiveSandbox(
      (stateDir, runtimeCacheDir) => new GvisorDriver({ stateDir, runtimeCacheDir }),
      false,
    )
  }, 180_000)
})
