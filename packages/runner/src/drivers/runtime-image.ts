// The agent's runtime (the Node binary and the agent bundle) on a read-only ext4 image of its
// own, so a sandbox binds it from a filesystem whose paths name nothing of the host: `/proc/self/mountinfo` inside shows `/node` on a loop device, not the checkout's path.
// One image per runtime content (keyed by the files' paths, sizes and mtimes), built once and
// shared by every sandbox of every runner on the host; it stays mounted like a package cache,
// because agents outlive their runner. Builders on the same key serialise on a lock directory.
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  closeSync,
  cpSync,
  existsSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs'
import { join } from 'node:path'
import { AGENT_NODE_FLAGS, compileCacheFlag } from '@conch/protocol'
import { RunnerError } from '../runner-error.ts'
import { type AgentRuntime, GUEST_RUNTIME_DIR } from './agent-runtime.ts'

/** The image's folder holding V8's compile cache of the agent bundle (portable: keyed relative to it). */
const COMPILE_CACHE_DIR = 'compile-cache'

/** Where images and their mount points live unless the driver is told otherwise. */
export const DEFAULT_RUNTIME_CACHE = '/var/cache/conch/runtime'

/** Total size of a file or a directory tree, in bytes. */
function treeBytes(path: string): number {
  const stat = statSync(path)
  if (!stat.isDirectory()) return stat.size
  let total = 4096
  for (const entry of readdirSync(path)) total += treeBytes(join(path, entry))
  return total
}

/** A key that changes when any runtime file changes. */
function contentKey(runtime: AgentRuntime): string {
  const hash = createHash('sha256')
  // The image's layout: images without a compile cache get a new key, so they are rebuilt.
  hash.update(`layout:${COMPILE_CACHE_DIR}\0`)
  const visit = (path: string): void => {
    const stat = statSync(path)
    hash.update(`${path}\0${stat.size}\0${stat.mtimeMs}\0`)
    if (stat.isDirectory()) for (const entry of readdirSync(path).sort()) visit(join(path, entry))
  }
  for (const m of runtime.mounts) visit(m.host)
  return hash.digest('hex').slice(0, 16)
}

function run(cmd: string, args: string[]): void {
  const result = spawnSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  if (result.status !== 0) {
    throw new RunnerError(
      'AGENT_UNAVAILABLE',
      `${cmd} ${args.join(' ')} failed: ${(result.stderr || result.error?.message || '').trim()}`,
    )
  }
}

function isMountPoint(path: string): boolean {
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
  return mounts.split('\n').some((line) => line.split(' ')[4] === path)
}

/**
 * Compiles the agent bundle into the image's compile cache: the bundle is loaded from the image
 * with the agent's own flags and stops at its usage check (exit 2) before it starts anything.
 * Sandboxes bind the cache read-only, so only this trusted load ever writes it. A load that
 * fails leaves the cache empty; the agent then compiles as it would without one.
 */
function fillCompileCache(runtime: AgentRuntime, staging: string): void {
  const at = (guest: string): string => join(staging, guest.slice(GUEST_RUNTIME_DIR.length))
  const cache = join(staging, COMPILE_CACHE_DIR)
  mkdirSync(cache, { mode: 0o755 })
  spawnSync(at(runtime.node), [...AGENT_NODE_FLAGS, compileCacheFlag(cache), at(runtime.entry)], {
    stdio: 'ignore',
    env: {},
    timeout: 30_000,
  })
}

/** Builds (once) and mounts the runtime image; returns the runtime with its mounts on the image. */
export async function mountRuntimeImage(runtime: AgentRuntime, cacheDir: string): Promise<AgentRuntime> {
  const key = contentKey(runtime)
  const mountPoint = join(cacheDir, key)
  const onImage: AgentRuntime = {
    ...runtime,
    mounts: [
      ...runtime.mounts.map((m) => ({
        host: join(mountPoint, m.guest.slice(GUEST_RUNTIME_DIR.length)),
        guest: m.guest,
      })),
      { host: join(mountPoint, COMPILE_CACHE_DIR), guest: `${GUEST_RUNTIME_DIR}/${COMPILE_CACHE_DIR}` },
    ],
    compileCache: `${GUEST_RUNTIME_DIR}/${COMPILE_CACHE_DIR}`,
  }
  if (isMountPoint(mountPoint)) return onImage
  mkdirSync(cacheDir, { recursive: true, mode: 0o755 })
  const lock = join(cacheDir, `${key}.lock`)
  const deadline = Date.now() + 60_000
  for (;;) {
    try {
      mkdirSync(lock)
      break
    } catch {
      if (isMountPoint(mountPoint)) return onImage
      if (Date.now() > deadline) rmSync(lock, { recursive: true, force: true })
      await new Promise((r) => setTimeout(r, 50))
    }
  }
  try {
    if (isMountPoint(mountPoint)) return onImage
    const image = join(cacheDir, `${key}.img`)
    if (!existsSync(image)) {
      const temp = `${image}.${process.pid}`
      const bytes = runtime.mounts.reduce((n, m) => n + treeBytes(m.host), 0)
      const fd = openSync(temp, 'w', 0o644)
      try {
        ftruncateSync(fd, Math.ceil(bytes * 1.25) + 64 * 1024 * 1024)
      } finally {
        closeSync(fd)
      }
      run('mkfs.ext4', ['-q', '-F', '-m', '0', '-E', 'lazy_itable_init=1,lazy_journal_init=1', temp])
      const staging = `${mountPoint}.staging`
      mkdirSync(staging, { recursive: true })
      run('mount', ['-o', 'loop', temp, staging])
      try {
        for (const m of runtime.mounts) {
          cpSync(m.host, join(staging, m.guest.slice(GUEST_RUNTIME_DIR.length)), {
            recursive: true,
            dereference: true,
          })
        }
        fillCompileCache(runtime, staging)
      } finally {
        run('umount', [staging])
        rmSync(staging, { recursive: true, force: true })
      }
      renameSync(temp, image)
    }
    mkdirSync(mountPoint, { recursive: true, mode: 0o755 })
    run('mount', ['-o', 'loop,ro,nodev,nosuid', image, mountPoint])
    return onImage
  } finally {
    rmSync(lock, { recursive: true, force: true })
  }
}
