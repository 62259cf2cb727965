// The agent's runtime (the Node binary and the agent bundle) on a read-only ext4 image of its
// own, so a sandbox binds it from a filesystem whose paths name nothing of the host:
// `/proc/self/mountinfo` inside shows `/node` on a loop device, not the checkout's path.
// One image per runtime content (keyed by the files' paths, sizes and mtimes), built once and
// shared by every sandbox of every runner on the host. In the cache dir, per key:
//   <key>.img    the image file;          <key>/      its mount point (`mount -o loop`: autoclear);
//   <key>.used   its use stamp (mtime);   <key>.lock  the lock dir builders and sweepers take.
// Lifecycle: a driver calls `acquire` before every sandbox start that binds the image. It touches
// the stamp and, when the image is mounted, is done (no lock); otherwise it takes the key's lock,
// builds the image if its file is missing and mounts it. A process refreshes the stamps of the
// images it acquired every minute while it lives. A sweep (runtime-image-sweep.ts) releases an
// image whose stamp is older than IMAGE_IDLE_MS: lazy unmount (live sandboxes keep their binds,
// and the loop device goes with the last of them), file deleted. Sweeps run when a process first
// acquires from a cache dir (a runner's start), after it builds a new key (an upgrade), and
// every ten minutes; each spares the keys its own process holds.
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  closeSync,
  cpSync,
  ftruncateSync,
  lutimesSync,
  mkdirSync,
  openSync,
  readdirSync,
  renameSync,
  rmdirSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import { AGENT_NODE_FLAGS, compileCacheFlag } from '@conch/protocol'
import { RunnerError } from '../runner-error.ts'
import { type AgentRuntime, GUEST_RUNTIME_DIR } from './agent-runtime.ts'
import { entryAt, isMountPoint, sweepRuntimeImages, tryLock } from './runtime-image-sweep.ts'

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

/** Builds the image file of `runtime` at `image` (a temp file renamed into place when whole). */
function buildImage(runtime: AgentRuntime, image: string, staging: string, lock: string): void {
  const temp = `${image}.${process.pid}`
  const bytes = runtime.mounts.reduce((n, m) => n + treeBytes(m.host), 0)
  const fd = openSync(temp, 'w', 0o644)
  try {
    ftruncateSync(fd, Math.ceil(bytes * 1.25) + 64 * 1024 * 1024)
  } finally {
    closeSync(fd)
  }
  run('mkfs.ext4', ['-q', '-F', '-m', '0', '-E', 'lazy_itable_init=1,lazy_journal_init=1', temp])
  mkdirSync(staging, { recursive: true })
  run('mount', ['-o', 'loop', temp, staging])
  try {
    // A fresh lock mtime tells sweepers and waiters that this builder is alive.
    touch(lock)
    for (const m of runtime.mounts) {
      cpSync(m.host, join(staging, m.guest.slice(GUEST_RUNTIME_DIR.length)), {
        recursive: true,
        dereference: true,
      })
    }
    touch(lock)
    fillCompileCache(runtime, staging)
  } finally {
    run('umount', [staging])
    rmdirSync(staging)
  }
  renameSync(temp, image)
}

/** Sets `path`'s times to now without following a symlink; false when it is not there. */
function touch(path: string): boolean {
  const now = new Date()
  try {
    lutimesSync(path, now, now)
    return true
  } catch {
    return false
  }
}

/** The stamps this process holds, by cache dir, refreshed every minute while the process lives. */
const held = new Map<string, Set<string>>()
let heartbeat: NodeJS.Timeout | undefined
let ticks = 0

/** Stamps are refreshed this often (ms), well inside IMAGE_IDLE_MS. */
const HEARTBEAT_MS = 60_000

/** Every this many heartbeats the process sweeps the cache dirs it uses. */
const SWEEP_EVERY_TICKS = 10

/** Sweeps `cacheDir` soon, sparing the keys this process holds; never fails its caller. */
function sweepSoon(cacheDir: string): void {
  setTimeout(() => {
    sweepRuntimeImages(cacheDir, {}, [...(held.get(cacheDir) ?? [])]).catch(() => {})
  }, 1_000).unref()
}

/** Marks `key` as held by this process: its stamp is refreshed until the process ends. */
function hold(cacheDir: string, key: string): void {
  let keys = held.get(cacheDir)
  if (!keys) {
    keys = new Set()
    held.set(cacheDir, keys)
    // The first image a process uses from a cache dir: the runner's start sweeps what is left.
    sweepSoon(cacheDir)
  }
  keys.add(key)
  if (heartbeat) return
  heartbeat = setInterval(() => {
    ticks++
    for (const [dir, keys] of held) {
      for (const k of keys) touch(join(dir, `${k}.used`))
      if (ticks % SWEEP_EVERY_TICKS === 0) sweepSoon(dir)
    }
  }, HEARTBEAT_MS).unref()
}

/** Refuses an entry of an image's name that is of the wrong kind (a symlink, a dir for a file). */
function expectKind(path: string, kind: 'file' | 'dir'): void {
  const entry = entryAt(path)
  if (!entry || (kind === 'file' ? entry.isFile() : entry.isDirectory())) return
  throw new RunnerError(
    'AGENT_UNAVAILABLE',
    `${path} should be a ${kind === 'file' ? 'regular file' : 'directory'} of the runtime image cache but is not; remove it and try again`,
  )
}

/**
 * The agent's runtime image for one runtime content: built once per host, mounted under the
 * cache dir and released by a sweep (runtime-image-sweep.ts) once no runner wants it.
 */
export class RuntimeImage {
  /** The content key: the image's name in the cache dir. */
  readonly key: string
  readonly #cacheDir: string
  readonly #runtime: AgentRuntime
  readonly #onImage: AgentRuntime

  /** Computes the key of `runtime`'s files; nothing is built or mounted until `acquire`. */
  constructor(runtime: AgentRuntime, cacheDir: string) {
    this.key = contentKey(runtime)
    this.#cacheDir = cacheDir
    this.#runtime = runtime
    const mountPoint = join(cacheDir, this.key)
    this.#onImage = {
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
  }

  /** Whether the mount point holds another filesystem than the cache dir (two lstats, not a mountinfo read). */
  #mounted(): boolean {
    const mountPoint = entryAt(join(this.#cacheDir, this.key))
    return mountPoint?.isDirectory() === true && mountPoint.dev !== entryAt(this.#cacheDir)?.dev
  }

  /**
   * Makes sure the image is mounted and marks it used now; returns the runtime with its mounts
   * on the image. Call it before every sandbox start that binds the image: a sweep releases no
   * image within IMAGE_IDLE_MS of its last acquire, and one that raced this acquire made it mount again.
   */
  async acquire(): Promise<AgentRuntime> {
    const at = (suffix: string): string => join(this.#cacheDir, `${this.key}${suffix}`)
    // Touching the stamp before looking at the mount: a sweep renames the stamp before it
    // unmounts, and keeps an image whose stamp it finds young after the rename.
    if (entryAt(at('.used'))?.isFile() && touch(at('.used')) && this.#mounted()) {
      hold(this.#cacheDir, this.key)
      return this.#onImage
    }
    mkdirSync(this.#cacheDir, { recursive: true, mode: 0o755 })
    const lock = at('.lock')
    while (!tryLock(lock)) await new Promise((r) => setTimeout(r, 50))
    let built = false
    try {
      expectKind(at('.used'), 'file')
      expectKind(at('.img'), 'file')
      expectKind(at(''), 'dir')
      writeFileSync(at('.used'), '', { mode: 0o644 })
      if (!isMountPoint(at(''))) {
        if (!entryAt(at('.img'))) {
          buildImage(this.#runtime, at('.img'), at('.staging'), lock)
          built = true
        }
        mkdirSync(at(''), { recursive: true, mode: 0o755 })
        run('mount', ['-o', 'loop,ro,nodev,nosuid', at('.img'), at('')])
      }
    } finally {
      rmdirSync(lock)
    }
    hold(this.#cacheDir, this.key)
    // A new image usually means a new runner version: the old one's images may be unwanted now.
    if (built) sweepSoon(this.#cacheDir)
    return this.#onImage
  }
}

/** Builds (once) and mounts the runtime image; returns the runtime with its mounts on the image. */
export async function mountRuntimeImage(runtime: AgentRuntime, cacheDir: string): Promise<AgentRuntime> {
  return new RuntimeImage(runtime, cacheDir).acquire()
}
