import type { SessionInfo } from '@conch/protocol'
import type { WebSocket } from 'ws'
import type { FakeRunner } from './fake-runner.ts'

// One fake bash of the fake runner (fake-runner.ts): its output log with offsets, its FIFO
// queue of runs, and the clients attached to it. Each run is handed to the runner's script;
// the default script understands a few words (`echo`, `err`, `code`, `exit`, `sleep`, `hang`,
// `bytes`).

/** What a command can do to the fake shell. */
export interface FakeIo {
  /** The run id. */
  id: string
  /** Writes stdout bytes as one frame. */
  out(data: string | Uint8Array): void
  /** Writes stderr bytes as one frame. */
  err(data: string | Uint8Array): void
  /** Resolves when the run is interrupted. */
  interrupted: Promise<void>
  /** Stdin data sent with the run. */
  stdin: string | undefined
}

/** The outcome of a command in the fake shell. */
export type FakeOutcome =
  | { code: number; timedOut?: boolean }
  | { close: { code: number | null; signal: string | null } }

/** Runs one command; never resolving models a hung agent. */
export type FakeScript = (
  command: string,
  io: FakeIo,
  session: FakeSession,
) => Promise<FakeOutcome> | FakeOutcome

/** One entry of a fake session's output log. */
export type LogEntry =
  | { kind: 'start'; id: string; offset: number }
  | { kind: 'out' | 'err'; id: string | null; bytes: Uint8Array; offset: number }
  | { kind: 'exit'; id: string; code: number; timedOut: boolean; durationMs: number; offset: number }

/** One shell WebSocket attached to a fake session. */
export interface Client {
  ws: WebSocket
  encoding: 'utf8' | 'base64'
  /** Frames held back while the runner is "silent". */
  live: boolean
  /** The client listed `start_in_exit`. */
  foldsStarts?: boolean
  /** A run start held for its exit (`start_in_exit`). */
  heldStart?: { id: string; offset: number } | null
}

/** One fake bash. */
export class FakeSession {
  readonly id: string
  readonly log: LogEntry[] = []
  offset = 0
  earliest = 0
  running: string | null = null
  readonly queue: { id: string; command: string; stdin: string | undefined }[] = []
  readonly clients = new Set<Client>()
  /** Every shell_run frame received, in order. */
  readonly received: string[] = []
  /** Largest number of runs waiting at once. */
  maxQueued = 0
  closed: { code: number | null; signal: string | null; reason: string } | null = null
  interrupt: (() => void) | null = null
  readonly #runner: FakeRunner

  constructor(id: string, runner: FakeRunner) {
    this.id = id
    this.#runner = runner
  }

  info(): SessionInfo {
    return {
      id: this.id,
      status: this.closed ? 'closed' : 'open',
      cwd: '/workspace',
      commandTimeoutMs: 30_000,
      cleanEnv: false,
      pid: this.closed ? null : 4242,
      createdAt: 1,
      offset: this.offset,
      running: this.running,
      queued: this.queue.length,
      closed: this.closed,
    }
  }

  /** Drops log entries before `offset` (scrollback eviction). */
  evict(offset: number): void {
    this.earliest = offset
  }

  append(entry: LogEntry): void {
    this.log.push(entry)
    for (const c of this.clients) if (c.live) this.#runner.sendEntry(c, entry)
  }

  enqueue(id: string, command: string, stdin: string | undefined): void {
    this.received.push(id)
    this.queue.push({ id, command, stdin })
    this.maxQueued = Math.max(this.maxQueued, this.queue.length)
    if (this.running === null) void this.#pump()
  }

  async #pump(): Promise<void> {
    while (this.queue.length > 0 && !this.closed) {
      const next = this.queue.shift()
      if (!next) break
      this.running = next.id
      this.append({ kind: 'start', id: next.id, offset: this.offset })
      const started = performance.now()
      let resolveInterrupt = () => {}
      const interrupted = new Promise<void>((r) => {
        resolveInterrupt = r
      })
      this.interrupt = resolveInterrupt
      const write = (kind: 'out' | 'err') => (data: string | Uint8Array) => {
        const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data
        this.append({ kind, id: next.id, bytes, offset: this.offset })
        this.offset += bytes.length
      }
      const outcome = await this.#runner.script(
        next.command,
        { id: next.id, out: write('out'), err: write('err'), interrupted, stdin: next.stdin },
        this,
      )
      this.interrupt = null
      this.running = null
      if ('close' in outcome) {
        this.closed = { ...outcome.close, reason: `exit ${outcome.close.code}` }
        for (const c of this.clients) {
          this.#runner.send(c, { type: 'shell_closed', ...this.closed })
        }
        return
      }
      this.append({
        kind: 'exit',
        id: next.id,
        code: outcome.code,
        timedOut: outcome.timedOut ?? false,
        durationMs: performance.now() - started,
        offset: this.offset,
      })
      await new Promise((r) => setImmediate(r))
    }
  }
}

/** The default script. */
export const defaultScript: FakeScript = async (command, io) => {
  const [word = '', ...rest] = command.split(' ')
  const arg = rest.join(' ')
  switch (word) {
    case 'true':
      return { code: 0 }
    case 'echo':
      io.out(`${arg}\n`)
      return { code: 0 }
    case 'err':
      io.err(`${arg}\n`)
      return { code: 1 }
    case 'code':
      return { code: Number(arg) }
    case 'cat':
      io.out(io.stdin ?? '')
      return { code: 0 }
    case 'bytes':
      io.out(Buffer.from(arg, 'hex'))
      return { code: 0 }
    case 'exit':
      return { close: { code: Number(arg), signal: null } }
    case 'sleep': {
      const timer = new Promise<'done'>((r) => setTimeout(() => r('done'), Number(arg)))
      const how = await Promise.race([timer, io.interrupted.then(() => 'int' as const)])
      return { code: how === 'int' ? 130 : 0 }
    }
    case 'hang':
      return new Promise<FakeOutcome>(() => {})
    default:
      io.err(`bash: ${word}: command not found\n`)
      return { code: 127 }
  }
}
