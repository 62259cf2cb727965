// The stdio the agent gives its children so they can open it by path as in a terminal: real
// pipes for the stdout and stderr of every shell, exec and background process, and a file for
// an exec's stdin.
//
// Node gives a child's `'pipe'` stdio as a Unix stream socket (libuv's socketpair), and a socket
// cannot be opened by path: `echo hi > /dev/stderr`, `tee /dev/stdout` or a program that opens
// `/dev/stdout` failed with "No such device or address" where a terminal or a shell pipeline
// works. Node cannot make an anonymous pipe, so the agent makes named ones: `mkfifo` (one
// process for a batch, ahead of need) in a directory of its own (0700, under the temp root),
// then for each child opens the read end (non-blocking, the agent's) and the write end
// (blocking, as a command expects its stdout) and unlinks the name before the child exists. So
// no other process ever sees the name of a pipe in use, and the stock cannot be reached by
// path by the code the agent serves. Opening `/dev/stdout` reopens the pipe's inode, so the
// sandbox user's group may write it (mode 0620, group the sandbox's); nobody but the agent may
// read it, so no process of the sandbox can open another's output pipe and take its bytes.
//
// A stdin is not a FIFO: one reopened for reading waits for a writer, so `cat /dev/stdin` after
// the agent ended an exec's stdin would hang. An exec's stdin bytes go into a file instead (in
// the same directory, mode 0640 with the sandbox user's group, unlinked before the child
// exists), read from its start by each open as bash's here-strings are; a run's stdin is a file
// or a FIFO the agent holds (run-stdin-pipe.ts); a shell's own stdin, its command channel,
// stays Node's socket, which nothing in the sandbox can open.
//
// Where no FIFO or file can be had (`mkfifo` missing or failing, the temp root full), the child
// gets Node's socket as before and the agent logs it once: it loses `/dev/stdout` or
// `/dev/stdin`, never a byte.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import {
  chownSync,
  closeSync,
  constants,
  fchownSync,
  mkdtempSync,
  openSync,
  rmSync,
  writeSync,
} from 'node:fs'
import { Socket } from 'node:net'
import { join } from 'node:path'
import type { Logger } from './logger.ts'
import type { Spawn } from './spawner.ts'

/** Owner (the agent) reads and writes; the group (the sandbox user's, when set) only writes. */
const MODE = '0620'
/** FIFOs one `mkfifo` makes: starting a process costs the agent's loop about a millisecond. */
const BATCH = 64
/** A batch is made in the background when the stock falls below this. */
const LOW_WATER = 16

/** The two ends of one pipe. */
export interface PipeEnds {
  /** The agent's end, non-blocking. */
  read: number
  /** The child's end, blocking. */
  write: number
}

/** A stock of named pipes, and the stdin files, in a directory of the agent's own. */
export class ChildStdio {
  readonly #dir: string
  readonly #logger: Logger
  /** The sandbox user's group, given each pipe so its commands can reopen their stdout. */
  readonly #gid: number | undefined
  readonly #stock: string[] = []
  #made = 0
  /** The `mkfifo` making a batch in the background, if one is. */
  #refilling: ChildProcess | null = null
  #warned = false
  #disposed = false

  /**
   * Makes the directory under `tempRoot` and the first batch, in the background; `gid` is the
   * sandbox user's group when commands run as another user than the agent.
   */
  constructor(tempRoot: string, logger: Logger, gid?: number) {
    this.#dir = mkdtempSync(join(tempRoot, 'conch-pipes-'))
    this.#logger = logger
    this.#gid = gid
    this.#refill()
  }

  /** A new pipe, or null when none can be made (the caller then uses a socket). */
  open(): PipeEnds | null {
    if (this.#disposed) return null
    if (this.#stock.length === 0) this.#makeNow()
    if (this.#stock.length < LOW_WATER) this.#refill()
    const path = this.#stock.pop()
    if (path === undefined) return null
    let read = -1
    try {
      if (this.#gid !== undefined) chownSync(path, process.getuid?.() ?? 0, this.#gid)
      read = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK)
      // A reader is open, so this open returns at once; the child's end stays blocking.
      const write = openSync(path, constants.O_WRONLY)
      return { read, write }
    } catch (err) {
      if (read !== -1) closeSync(read)
      this.#warn(`could not open a pipe: ${(err as Error).message}`)
      return null
    } finally {
      rmSync(path, { force: true })
    }
  }

  /**
   * An open file holding `bytes`, for a child's stdin (the caller closes it once the child has
   * it), or null when none can be written (the caller then writes them into a socket).
   */
  stdinFile(bytes: Uint8Array): number | null {
    if (this.#disposed) return null
    const path = join(this.#dir, `stdin${this.#made++}`)
    try {
      const writer = openSync(path, 'wx', 0o640)
      try {
        for (let at = 0; at < bytes.length; ) at += writeSync(writer, bytes, at)
        if (this.#gid !== undefined) fchownSync(writer, process.getuid?.() ?? 0, this.#gid)
      } finally {
        closeSync(writer)
      }
      return openSync(path, constants.O_RDONLY)
    } catch (err) {
      this.#warn(`could not write a stdin file: ${(err as Error).message}`)
      return null
    } finally {
      rmSync(path, { force: true })
    }
  }

  /** Removes the directory and the stock (the agent is stopping), once a batch under way is done. */
  dispose(): void {
    this.#disposed = true
    this.#stock.length = 0
    if (this.#refilling === null) this.#removeDir()
    else this.#refilling.kill('SIGKILL')
  }

  #removeDir(): void {
    try {
      rmSync(this.#dir, { recursive: true, force: true })
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message }, 'could not remove the pipes directory')
    }
  }

  #names(): string[] {
    return Array.from({ length: BATCH }, () => join(this.#dir, `p${this.#made++}`))
  }

  /** Makes a batch now: the stock ran out before the background batch came. */
  #makeNow(): void {
    const names = this.#names()
    const made = spawnSync('mkfifo', ['-m', MODE, ...names], { stdio: 'ignore' })
    if (made.status === 0) this.#stock.push(...names)
    else this.#failed(names, made.error?.message ?? `mkfifo exited with ${made.status}`)
  }

  #refill(): void {
    if (this.#refilling !== null) return
    const names = this.#names()
    const child = spawn('mkfifo', ['-m', MODE, ...names], { stdio: 'ignore' })
    this.#refilling = child
    // 'close' follows 'exit', and also a spawn that failed ('error').
    child.on('error', () => {})
    child.on('close', (code) => {
      this.#refilling = null
      if (this.#disposed) this.#removeDir()
      else if (code === 0) this.#stock.push(...names)
      else this.#failed(names, `mkfifo exited with ${code}`)
    })
  }

  /** Removes what a failed batch may have made and says so once. */
  #failed(names: readonly string[], why: string): void {
    for (const name of names) rmSync(name, { force: true })
    this.#warn(`could not make pipes (${why})`)
  }

  #warn(why: string): void {
    if (this.#warned) return
    this.#warned = true
    this.#logger.warn(
      { err: why },
      'children get sockets for their stdio: /dev/stdout and /dev/stdin will not open',
    )
  }
}

/** `child.emit('close')` is held until `streams` have closed, as Node does for its own stdio. */
function closeAfter(child: ChildProcess, streams: readonly Socket[]): void {
  let open = streams.length
  let held: unknown[] | null = null
  const emit = child.emit.bind(child)
  child.emit = (event: string | symbol, ...args: unknown[]): boolean => {
    if (event !== 'close' || open === 0) return emit(event, ...args)
    held = args
    return true
  }
  for (const stream of streams) {
    stream.once('close', () => {
      open -= 1
      if (open === 0 && held !== null) emit('close', ...held)
    })
  }
}

/**
 * A spawn whose children get real pipes where stdout or stderr is asked as `'pipe'`:
 * `child.stdout` and `child.stderr` are then the agent's read ends, and `'close'` comes once
 * they are closed, as for Node's own. The write ends are closed in the agent once the child
 * has them, so the read ends see the end of output when the child and its descendants are done.
 */
export function childStdioSpawn(base: Spawn, pipes: ChildStdio): Spawn {
  return (command, args, options) => {
    const stdio = options.stdio
    if (!Array.isArray(stdio) || (stdio[1] !== 'pipe' && stdio[2] !== 'pipe'))
      return base(command, args, options)
    const ends: Array<PipeEnds | null> = [null, null, null]
    for (const slot of [1, 2]) if (stdio[slot] === 'pipe') ends[slot] = pipes.open()
    let child: ChildProcess
    try {
      child = base(command, args, {
        ...options,
        stdio: stdio.map((slot, i) => ends[i]?.write ?? slot),
      })
    } catch (err) {
      for (const end of ends) if (end) closeSync(end.read)
      throw err
    } finally {
      for (const end of ends) if (end) closeSync(end.write)
    }
    const streams: Socket[] = []
    for (const slot of [1, 2] as const) {
      const end = ends[slot]
      if (!end) continue
      const socket = new Socket({ fd: end.read, readable: true, writable: false })
      streams.push(socket)
      child.stdio[slot] = socket
      if (slot === 1) child.stdout = socket
      else child.stderr = socket
    }
    closeAfter(child, streams)
    return child
  }
}
