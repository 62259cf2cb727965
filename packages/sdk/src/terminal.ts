// A terminal from the SDK: a program on a pty inside the sandbox, attached over a WebSocket.
//
// Model: the terminal lives in the sandbox; this object is one client of it. Output arrives as
// binary messages carrying their byte offset; the client remembers the offset after the last
// byte it saw, and when its socket drops (not by `detach` or `close`) it reconnects from there,
// so nothing is missed or repeated; output older than the runner's scrollback is reported as
// OUTPUT_LOST. Input goes out on the same socket; resize and signals go over REST, so they
// never wait behind input the program is not reading yet. Several clients may attach to one
// terminal at once (`sb.attachTerminal(id)`), and all see the same screen.
import { ConchError } from './conch-error.ts'
import { errorFromWire } from './error-from-wire.ts'
import type { HttpClient } from './http-client.ts'
import { okBody, terminalInfo } from './rest-shapes.ts'
import type { WebSocketConstructor, WebSocketLike } from './web-socket-like.ts'

/** The terminal socket's subprotocol. */
const TERMINAL_SUBPROTOCOL = 'conch.terminal.v1'
/** Binary output header: the offset as two big-endian u32 halves. */
const HEADER_BYTES = 8
/** Output kept for the first `onData` listener. */
const EARLY_MAX_BYTES = 1_048_576
/** Reconnect attempts after an unexpected drop, with a growing pause. */
const MAX_RECONNECTS = 8

/**
 * A terminal as the runner reports it.
 *
 * @example
 * ```ts
 * for (const t of await sb.listTerminals()) console.log(t.id, t.command.join(' '), t.exitCode)
 * ```
 */
export interface TerminalInfo {
  /** Terminal id (`t_...`). */
  id: string
  /** The program and its arguments. */
  command: string[]
  /** Columns. */
  cols: number
  /** Rows. */
  rows: number
  /** The program's pid inside the sandbox. */
  pid: number
  /** When it started (ms since the epoch). */
  createdAt: number
  /** Offset after the last output byte. */
  endOffset: number
  /** Smallest offset the scrollback still holds. */
  startOffset: number
  /** Exit code once the program ended (128+n for signal n), else null. */
  exitCode: number | null
  /** The signal that ended it, else null. */
  signal: string | null
}

/** What `sb.terminal()` opens. */
export interface TerminalOptions {
  /** Columns (default 80; 2–1000). */
  cols?: number
  /** Rows (default 24; 1–500). */
  rows?: number
  /** Variables added to the sandbox's environment (TERM is xterm-256color unless set). */
  env?: Record<string, string>
  /** Working directory (default /workspace). */
  cwd?: string
  /** Program and arguments instead of an interactive login bash. */
  command?: string[]
}

/** How a terminal's program ended. */
export interface TerminalExit {
  /** Exit code (128+n for signal n), or null when unknown. */
  code: number | null
  /** The signal that ended it, if one did. */
  signal: string | null
}

/** A signal for `term.signal()`. */
export type TerminalSignalName =
  | 'SIGINT'
  | 'SIGTERM'
  | 'SIGKILL'
  | 'SIGHUP'
  | 'SIGQUIT'
  | 'SIGTSTP'
  | 'SIGCONT'

/** What a Terminal is built from (by `Sandbox`). */
export interface TerminalDeps {
  /** REST client. */
  http: HttpClient
  /** `/v1/sandboxes/:id`. */
  path: string
  /** The runner's base URL. */
  baseUrl: string
  /** API key or sandbox token. */
  secret: string
  /** WebSocket constructor. */
  WebSocket: WebSocketConstructor
}

/** A socket that can also send binary messages (every real WebSocket can). */
type BinarySocket = WebSocketLike & { send(data: string | Uint8Array): void }

/**
 * A terminal in the sandbox, attached. Read the screen with `onData`, type with `write`.
 *
 * @example
 * ```ts
 * await using term = await sb.terminal({ cols: 100, rows: 30 })
 * term.onData((bytes) => process.stdout.write(bytes))
 * term.write('cd /tmp; pwd\r')
 * await term.resize(120, 40)
 * term.write('exit\r')
 * console.log(await term.exited) // { code: 0, signal: null }
 * ```
 */
export class Terminal {
  /** Terminal id; attach to it from elsewhere with `sb.attachTerminal(id)`. */
  readonly id: string
  /** Resolves when the program ends. */
  readonly exited: Promise<TerminalExit>
  readonly #deps: TerminalDeps
  #info: TerminalInfo
  #socket: BinarySocket | null = null
  #offset: number
  #done = false
  #reconnects = 0
  readonly #listeners = new Set<(bytes: Uint8Array) => void>()
  /** Output that arrived before the first `onData` listener (the replay right after attach). */
  #early: Uint8Array[] | null = []
  #earlyBytes = 0
  #resolveExit!: (exit: TerminalExit) => void
  #error: ConchError | null = null

  /** Use `sb.terminal()` or `sb.attachTerminal()`. */
  constructor(deps: TerminalDeps, info: TerminalInfo, offset: number) {
    this.#deps = deps
    this.#info = info
    this.id = info.id
    this.#offset = offset
    this.exited = new Promise((resolve) => {
      this.#resolveExit = resolve
    })
  }

  /** The terminal as last reported (size, pid, exit). */
  get info(): TerminalInfo {
    return this.#info
  }

  /** Offset after the last output byte this client received; reattach from it to miss nothing. */
  get offset(): number {
    return this.#offset
  }

  /** Calls `fn` with every chunk of output (the raw bytes the program wrote, escape sequences and all). */
  onData(fn: (bytes: Uint8Array) => void): () => void {
    this.#listeners.add(fn)
    const early = this.#early
    this.#early = null
    for (const chunk of early ?? []) fn(chunk)
    return () => this.#listeners.delete(fn)
  }

  /** Types into the terminal: a string is sent as UTF-8 (`'\r'` is Enter, `'\x03'` Ctrl-C). */
  write(data: string | Uint8Array): void {
    const socket = this.#socket
    if (this.#done || !socket || socket.readyState !== 1) {
      throw new ConchError(
        'BAD_REQUEST',
        `terminal ${this.id} is not attached (closed, exited or reconnecting)`,
      )
    }
    socket.send(typeof data === 'string' ? new TextEncoder().encode(data) : data)
  }

  /** Sets the size; the program gets SIGWINCH. */
  async resize(cols: number, rows: number): Promise<TerminalInfo> {
    this.#info = await this.#deps.http.json('POST', `${this.#restPath}/resize`, terminalInfo, {
      json: { cols, rows },
    })
    return this.#info
  }

  /** Sends a signal to the program (type `'\x03'` for a Ctrl-C to the foreground job). */
  async signal(signal: TerminalSignalName): Promise<void> {
    await this.#deps.http.json('POST', `${this.#restPath}/signal`, okBody, { json: { signal } })
  }

  /** Ends the program (SIGHUP, then SIGKILL) and the terminal, for every client. */
  async close(): Promise<void> {
    this.detach()
    await this.#deps.http.json('DELETE', this.#restPath, okBody)
  }

  /** Closes this client's socket; the terminal goes on for others (reattach by id). */
  detach(): void {
    this.#done = true
    this.#socket?.close(1000, 'detached')
    this.#socket = null
  }

  /** Detaches. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.detach()
  }

  get #restPath(): string {
    return `${this.#deps.path}/terminals/${encodeURIComponent(this.id)}`
  }

  /** Opens the socket and resolves once the runner has attached it (`terminal_ready`). */
  connect(): Promise<void> {
    const base = this.#deps.baseUrl.replace(/^http/, 'ws').replace(/\/$/, '')
    const url = `${base}${this.#restPath}/socket?offset=${this.#offset}`
    const socket = new this.#deps.WebSocket(url, [
      TERMINAL_SUBPROTOCOL,
      `bearer.${this.#deps.secret}`,
    ]) as BinarySocket
    socket.binaryType = 'arraybuffer'
    this.#socket = socket
    return new Promise((resolve, reject) => {
      let ready = false
      socket.addEventListener('message', (event) => {
        const data = (event as { data: unknown }).data
        if (typeof data === 'string') {
          const frame = parseFrame(data)
          if (frame?.type === 'terminal_ready') {
            ready = true
            this.#reconnects = 0
            resolve()
          } else if (frame?.type === 'terminal_exit') {
            this.#done = true
            this.#resolveExit({
              code: typeof frame.code === 'number' ? frame.code : null,
              signal: typeof frame.signal === 'string' ? frame.signal : null,
            })
          } else if (frame?.type === 'error') {
            const error = errorFromWire({
              code: String(frame.code),
              message: String(frame.message),
              ...(isRecord(frame.details) ? { details: frame.details } : {}),
            })
            if (!ready) reject(error)
            else this.#error = error
          }
          return
        }
        const bytes = new Uint8Array(data instanceof ArrayBuffer ? data : (data as Uint8Array))
        if (bytes.byteLength < HEADER_BYTES) return
        const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
        const offset = view.getUint32(0) * 2 ** 32 + view.getUint32(4)
        const chunk = bytes.subarray(HEADER_BYTES)
        // A reconnect replays from the offset already seen: skip anything before it.
        const skip = Math.max(0, this.#offset - offset)
        if (skip >= chunk.byteLength) return
        this.#offset = offset + chunk.byteLength
        const fresh = chunk.subarray(skip)
        if (this.#early !== null) {
          // Held for the first listener, up to one scrollback's worth; older chunks give way.
          this.#early.push(fresh.slice())
          this.#earlyBytes += fresh.byteLength
          while (this.#earlyBytes > EARLY_MAX_BYTES && this.#early.length > 1)
            this.#earlyBytes -= this.#early.shift()?.byteLength ?? 0
          return
        }
        for (const fn of this.#listeners) fn(fresh)
      })
      // A failed upgrade (the sandbox is gone: 404) is reported by `close`; without a listener,
      // Node's `ws` would throw the error event out of the caller's process.
      socket.addEventListener('error', () => {})
      socket.addEventListener('close', () => {
        if (!ready) {
          reject(this.#error ?? new ConchError('CONNECTION_LOST', `could not attach to terminal ${this.id}`))
          return
        }
        if (this.#socket === socket) this.#socket = null
        if (!this.#done) void this.#reconnect()
      })
    })
  }

  async #reconnect(): Promise<void> {
    while (!this.#done && this.#reconnects < MAX_RECONNECTS) {
      this.#reconnects++
      await new Promise((r) => setTimeout(r, Math.min(100 * 2 ** this.#reconnects, 5_000)))
      if (this.#done) return
      try {
        await this.connect()
        return
      } catch (error) {
        // A browser's WebSocket hides why an upgrade failed: ask REST whether the terminal is
        // still there, so a deleted sandbox or terminal ends the loop with its own error.
        const cause = isLostConnection(error) ? await this.#whyGone() : error
        if (cause instanceof ConchError && !isLostConnection(cause)) {
          this.#fail(cause)
          return
        }
      }
    }
    if (!this.#done)
      this.#fail(new ConchError('CONNECTION_LOST', `lost terminal ${this.id} and could not reattach`))
  }

  /** The error the terminal's REST route answers with, or null while it is there. */
  async #whyGone(): Promise<unknown> {
    try {
      await this.#deps.http.json('GET', this.#restPath, terminalInfo)
      return null
    } catch (error) {
      return error
    }
  }

  #fail(error: ConchError): void {
    this.#done = true
    this.#error = error
    this.#resolveExit({ code: null, signal: null })
  }
}

/** Whether `error` says only that the connection went (worth another attempt). */
function isLostConnection(error: unknown): boolean {
  return (
    !(error instanceof ConchError) || error.code === 'CONNECTION_LOST' || error.code === 'AGENT_UNAVAILABLE'
  )
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function parseFrame(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text)
    return isRecord(value) ? value : null
  } catch {
    return null
  }
}
