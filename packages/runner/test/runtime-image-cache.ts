// Test fixture: a temp cache dir for runtime images (runtime-image.ts) and a tiny runtime to put
// on them, so lifecycle tests build images in seconds and leave none behind: disposing the dir
// sweeps it as if a day had passed, unmounts what is left under it and deletes it.
import { spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { vi } from 'vitest'
import type { AgentRuntime } from '../src/drivers/agent-runtime.ts'
import { LEGACY_IDLE_MS, sweepRuntimeImages } from '../src/drivers/runtime-image-sweep.ts'

/** A temp cache dir that is swept, unmounted and removed at dispose. */
export interface ImageCache extends AsyncDisposable {
  /** Its path. */
  dir: string
}

/** A sweep time at which every image in a cache dir is unwanted. */
export function farFuture(): number {
  return Date.now() + 10 * LEGACY_IDLE_MS
}

/** Mount points under `dir` in this mount namespace, deepest first. */
export function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length)
}

/** Loop devices whose backing file is `file` (deleted or not). */
export function loopDevicesOf(file: string): string[] {
  const out = spawnSync('losetup', ['-l', '-n', '-O', 'NAME,BACK-FILE'], { encoding: 'utf8' }).stdout
  return out
    .split('\n')
    .filter((line) => {
      const back = line.trim().split(/\s+/).slice(1).join(' ')
      return back === file || back === `${file} (deleted)`
    })
    .map((line) => line.trim().split(/\s+/)[0] ?? '')
}

/** Makes a temp cache dir; fails (never skips) when the process is not root. */
export function imageCache(): ImageCache {
  if (process.getuid?.() !== 0) throw new Error('runtime image tests need root (loop devices and mounts)')
  const dir = mkdtempSync(join(tmpdir(), 'conch-images-'))
  return {
    dir,
    async [Symbol.asyncDispose]() {
      await sweepRuntimeImages(dir, { now: farFuture() })
      for (const point of mountsUnder(dir)) spawnSync('umount', ['-l', point])
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** A runtime of two small files (a `node` that exits 2, an entry), distinct per call. */
export function tinyRuntime(dir: string, content = `${Date.now()}-${Math.random()}`): AgentRuntime {
  const node = join(dir, 'node')
  writeFileSync(node, `#!/bin/sh\n# ${content}\nexit 2\n`)
  chmodSync(node, 0o755)
  const entry = join(dir, 'agent.mjs')
  writeFileSync(entry, `// ${content}\n`)
  return {
    mounts: [
      { host: node, guest: '/opt/conch/node' },
      { host: entry, guest: '/opt/conch/conch-agent.mjs' },
    ],
    symlinks: [],
    node: '/opt/conch/node',
    entry: '/opt/conch/conch-agent.mjs',
  }
}

/** Waits (up to 30 s) until `check` holds; false when it never did. */
export async function eventually(check: () => boolean): Promise<boolean> {
  try {
    await vi.waitFor(
      () => {
        if (!check()) throw new Error('not yet')
      },
      { timeout: 30_000, interval: 50 },
    )
    return true
  } catch {
    return check()
  }
}
