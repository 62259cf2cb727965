// Resolves a path inside the workspace one opened directory at a time, so code in the sandbox
// cannot lead the agent out of it, not even by swapping a directory for a symlink mid-request.
//
// Model: the walk holds an open fd for the root and for every directory it has entered. Each
// next component is opened through `/proc/self/fd/<fd>/<name>` with O_NOFOLLOW: the kernel
// resolves that from the held directory (Node has no openat), and refuses a symlink there. A
// symlink met on the way is read once and its target spliced into the remaining components:
// relative targets continue from the directory that holds the link, absolute ones restart at
// the root when they name the workspace, and a `..` that would leave the root, or an absolute
// target elsewhere, is PATH_OUTSIDE_SANDBOX. Nothing is resolved twice, so there is no window
// between a check and a use. The final component goes to the caller's `final` with the fd of
// its directory; `final` acts on it without following a symlink, or returns FOLLOW to have
// the walk follow it under the same rules. The walk's own calls are synchronous: each is one
// short syscall on a directory, cheaper than a trip through libuv's thread pool.
import {
  closeSync,
  existsSync,
  constants as fsc,
  lstatSync,
  mkdirSync,
  openSync,
  readlinkSync,
} from 'node:fs'
import { WORKSPACE_PATH } from '@conch/protocol/zod-free'
import { AgentError } from './agent-error.ts'
import { outsideError } from './workspace-paths.ts'

/** Returned by a walk's `final` to follow the symlink it found in the final component. */
export const FOLLOW: unique symbol = Symbol('follow')

/** Opens a directory without following a symlink in its last component. */
export const DIR_FLAGS = fsc.O_RDONLY | fsc.O_DIRECTORY | fsc.O_NOFOLLOW

/** Most symlinks one walk follows, as the kernel's own limit. */
const MAX_SYMLINKS = 40
/** Most times a walk re-creates a directory that vanishes between its mkdir and its open. */
const MAX_CREATE_RETRIES = 8

/** Acts on the final component: `name` inside the open `dir`, or `''` for `dir` itself. */
export type FinalStep<T> = (dir: number, name: string) => Promise<T | typeof FOLLOW>

/** One step of a walk. */
type Step<T> =
  | { kind: 'done'; result: T }
  | { kind: 'dir'; dir: number }
  | { kind: 'link'; target: string }
  | { kind: 'again' }
  | { kind: 'create'; err: unknown }

/** How a walk treats missing directories on the way to the final component. */
export interface WalkOptions {
  /** Creates a missing directory and hands its open fd here (to fchown it); without it, a missing one is FILE_NOT_FOUND. */
  onCreateDir?: (dir: number) => void
}

/** The path through which the kernel opens `name` inside the directory open as `dir`. */
export function at(dir: number, name: string): string {
  return name === '' ? `/proc/self/fd/${dir}` : `/proc/self/fd/${dir}/${name}`
}

/** Whether a failed no-follow open hit a symlink: FOLLOW if so, else rethrows `err`. */
export function followIfLink(dir: number, name: string, err: unknown): typeof FOLLOW {
  const errno = errnoOf(err)
  if (errno === 'ELOOP') return FOLLOW
  if (errno === 'ENOTDIR' && lstatSync(at(dir, name)).isSymbolicLink()) return FOLLOW
  throw err
}

/** The errno name of a Node fs error, or `''`. */
export function errnoOf(err: unknown): string {
  return typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : ''
}

/** Walks sandbox path components from one workspace root through held directory fds. */
export class WorkspaceWalker {
  readonly #root: string
  readonly #aliases: string[]

  /** Walks below `root`; an absolute symlink target that starts with one of `aliases` (or /workspace) means the root. */
  constructor(root: string, aliases: readonly string[] = []) {
    if (!existsSync('/proc/self/fd'))
      throw new Error('the agent needs /proc mounted: the files API opens paths through /proc/self/fd')
    this.#root = root
    this.#aliases = [...new Set([WORKSPACE_PATH, root, ...aliases])].map((a) => a.replace(/\/+$/, ''))
  }

  /** Walks `components` (of the caller's `label` path) and returns what `final` makes of the last one. */
  async walk<T>(
    label: string,
    components: readonly string[],
    options: WalkOptions,
    final: FinalStep<T>,
  ): Promise<T> {
    const stack: number[] = [openSync(this.#root, fsc.O_RDONLY | fsc.O_DIRECTORY)]
    const queue = [...components]
    let links = 0
    let creates = 0
    try {
      for (;;) {
        const dir = stack[stack.length - 1] as number
        const name = queue.shift()
        if (name === undefined) {
          const result = await final(dir, '')
          if (result === FOLLOW) throw new Error('a walk cannot follow the directory it stands in')
          return result
        }
        if (name === '' || name === '.') continue
        if (name === '..') {
          if (stack.length === 1) throw outsideError(label, 'a ".." above the workspace root')
          closeSync(stack.pop() as number)
          continue
        }
        const step = queue.length === 0 ? await this.#last(dir, name, final) : this.#enter(dir, name, options)
        if (step.kind === 'done') return step.result
        if (step.kind === 'dir') {
          stack.push(step.dir)
          continue
        }
        if (step.kind === 'create') {
          if (++creates > MAX_CREATE_RETRIES) throw step.err
          queue.unshift(name)
          continue
        }
        if (++links > MAX_SYMLINKS) throw tooManyLinks(label)
        if (step.kind === 'again') {
          queue.unshift(name)
          continue
        }
        const target = step.target
        if (target.startsWith('/')) {
          const rest = this.#belowRoot(target)
          if (rest === undefined) throw outsideError(label, `a symlink to "${target.slice(0, 200)}"`)
          while (stack.length > 1) closeSync(stack.pop() as number)
          queue.unshift(...rest)
        } else {
          queue.unshift(...target.split('/'))
        }
      }
    } finally {
      for (const fd of stack) closeSync(fd)
    }
  }

  /** The final component: what `final` makes of it, or the target of the symlink it asks to follow. */
  async #last<T>(dir: number, name: string, final: FinalStep<T>): Promise<Step<T>> {
    const result = await final(dir, name)
    if (result !== FOLLOW) return { kind: 'done', result }
    const target = readLinkAt(dir, name)
    // No longer a symlink: replaced since `final` looked; the walk looks again.
    return target === undefined ? { kind: 'again' } : { kind: 'link', target }
  }

  /** A directory on the way: opened without following, or the symlink found there, or created. */
  #enter(dir: number, name: string, options: WalkOptions): Step<never> {
    try {
      return { kind: 'dir', dir: openSync(at(dir, name), DIR_FLAGS) }
    } catch (err) {
      const errno = errnoOf(err)
      if (errno === 'ENOENT' && options.onCreateDir !== undefined) {
        const made = this.#createDir(dir, name, options.onCreateDir)
        return made === undefined ? { kind: 'create', err } : { kind: 'dir', dir: made }
      }
      if (errno !== 'ENOTDIR' && errno !== 'ELOOP') throw err
      const target = readLinkAt(dir, name)
      if (target === undefined) throw err
      return { kind: 'link', target }
    }
  }

  /** Makes `name` in `dir` and opens it; undefined when it vanished before the open (the walk retries). */
  #createDir(dir: number, name: string, onCreateDir: (dir: number) => void): number | undefined {
    try {
      mkdirSync(at(dir, name))
    } catch (err) {
      // Made by someone else meanwhile: the retry opens it like any existing directory.
      if (errnoOf(err) === 'EEXIST') return undefined
      throw err
    }
    let made: number
    try {
      made = openSync(at(dir, name), DIR_FLAGS)
    } catch {
      return undefined
    }
    try {
      onCreateDir(made)
    } catch (err) {
      closeSync(made)
      throw err
    }
    return made
  }

  /** The components below the root of an absolute symlink target, or undefined when it is outside. */
  #belowRoot(target: string): string[] | undefined {
    for (const alias of this.#aliases) {
      if (target === alias) return []
      if (target.startsWith(`${alias}/`)) return target.slice(alias.length + 1).split('/')
    }
    return undefined
  }
}

/** The target of the symlink `name` in `dir`, or undefined when it is not a symlink. */
function readLinkAt(dir: number, name: string): string | undefined {
  try {
    return readlinkSync(at(dir, name))
  } catch (err) {
    if (errnoOf(err) === 'EINVAL') return undefined
    throw err
  }
}

function tooManyLinks(label: string): AgentError {
  const path = label.slice(0, 200)
  return new AgentError(
    'BAD_REQUEST',
    `path "${path}" leads through more than ${MAX_SYMLINKS} symlinks (a loop?); fix the links or name the file directly`,
    { details: { path } },
  )
}
