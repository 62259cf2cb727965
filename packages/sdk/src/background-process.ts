import { ShapeError } from '@conch/protocol/json-shape'
import { decodeBase64 } from './base64.ts'
import { ConchError } from './conch-error.ts'
import { errorFromWire } from './error-from-wire.ts'
import type { HttpClient } from './http-client.ts'
import { ndjsonLines } from './ndjson-lines.ts'
import type { ProcessInfo } from './resource-info.ts'
import { execEvent, processInfo, processOutput } from './rest-shapes.ts'
import { DEADLINE_SLACK_MS } from './run-budget.ts'

/** The longest single wait request; `wait()` repeats it until the process ends or its own budget runs out. */
const WAIT_SLICE_MS = 60_000

/**
 * Output of a background process since the previous poll.
 *
 * @example
 * ```ts
 * const { stdout, stderr, status } = await proc.output()
 * ```
 */
export interface ProcessOutputChunk {
  /** stdout text since the previous poll (whole characters). */
  stdout: string
  /** stderr text since the previous poll. */
  stderr: string
  /** Status at the time of the poll. */
  status: ProcessInfo['status']
  /** Log offset after this output: pass it as `since` to read only what follows. */
  nextOffset: number
}

/**
 * One event of a process stream: output in arrival order, then one `exit`.
 *
 * @example
 * ```ts
 * for await (const ev of proc.stream()) {
 *   if (ev.type === 'exit') console.log('exited', ev.exitCode)
 *   else console.log(ev.type, ev.data)
 * }
 * ```
 */
export type ProcessEvent =
  | { type: 'stdout'; data: string }
  | { type: 'stderr'; data: string }
  | { type: 'exit'; exitCode: number }

/**
 * A background process in the sandbox (a server, a watcher). It runs outside every shell and
 * keeps running when its starter disconnects.
 *
 * @example
 * ```ts
 * const server = await sb.startProcess('python3 -m http.server 8000', { cwd: '/workspace' })
 * const { stderr } = await server.output() // what it printed since the last poll
 * await server.kill()
 * const info = await server.wait() // info.status === 'killed'
 * ```
 */
export class BackgroundProcess {
  /** Process id within the sandbox. */
  readonly id: string
  /** What the runner last reported about the process. */
  info: ProcessInfo
  readonly #http: HttpClient
  readonly #path: string
  #since = 0
  readonly #out = new TextDecoder()
  readonly #err = new TextDecoder()

  /** @internal */
  constructor(http: HttpClient, sandboxPath: string, info: ProcessInfo) {
    this.id = info.id
    this.info = info
    this.#http = http
    this.#path = `${sandboxPath}/processes/${encodeURIComponent(info.id)}`
  }

  /** OS process id inside the sandbox. */
  get pid(): number {
    return this.info.pid
  }

  /**
   * Output written since the previous call (the first call returns everything still kept), or
   * since the log offset `since` (a `nextOffset` of an earlier chunk), e.g. from another process.
   *
   * @example
   * ```ts
   * const { stdout, status, nextOffset } = await proc.output()
   * const later = await proc.output({ since: nextOffset })
   * ```
   */
  async output(options: { since?: number } = {}): Promise<ProcessOutputChunk> {
    const since = options.since ?? this.#since
    const chunk = await this.#http.json('GET', `${this.#path}/output`, processOutput, {
      query: { since, encoding: 'base64' },
    })
    this.#since = chunk.nextOffset
    const text = (decoder: InstanceType<typeof TextDecoder>, data: string) =>
      chunk.encoding === 'base64' ? decoder.decode(decodeBase64(data), { stream: true }) : data
    return {
      stdout: text(this.#out, chunk.stdout),
      stderr: text(this.#err, chunk.stderr),
      status: chunk.status,
      nextOffset: chunk.nextOffset,
    }
  }

  /**
   * Live output from the start of what is kept, then an `exit` event when the process ends.
   *
   * @example
   * ```ts
   * for await (const ev of proc.stream()) if (ev.type !== 'exit') console.log(ev.data)
   * ```
   */
  async *stream(options: { signal?: AbortSignal } = {}): AsyncGenerator<ProcessEvent> {
    const response = await this.#http.open(
      'GET',
      `${this.#path}/stream`,
      { query: { since: 0, encoding: 'base64' }, signal: options.signal },
      'application/x-ndjson',
    )
    if (!response.body) return
    const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() }
    for await (const line of ndjsonLines(response.body)) {
      let event: ReturnType<typeof execEvent>
      try {
        event = execEvent(line, '')
      } catch (err) {
        if (err instanceof ShapeError) {
          throw new ConchError(
            'INTERNAL',
            `process ${this.id} stream sent an unexpected event (${err.message})`,
          )
        }
        throw err
      }
      if (event.type === 'error')
        throw errorFromWire({ code: event.code, message: `process ${this.id}: ${event.message}` })
      if (event.type === 'exit') {
        yield { type: 'exit', exitCode: event.exitCode }
        return
      }
      const data = decoders[event.type].decode(decodeBase64(event.data), { stream: true })
      if (data) yield { type: event.type, data }
    }
  }

  /** Sends SIGTERM (or `signal`) to the process tree; SIGKILL follows after 3 s. */
  async kill(signal?: 'SIGTERM' | 'SIGKILL' | 'SIGINT' | 'SIGHUP'): Promise<ProcessInfo> {
    this.info = await this.#http.json('POST', `${this.#path}/kill`, processInfo, {
      json: signal ? { signal } : {},
      // A process that ended answers with its info; a running one gets the same signal again.
      idempotent: true,
    })
    return this.info
  }

  /**
   * Waits until the process ends, or until `timeoutMs` passes (then it resolves with the
   * process still `running`).
   *
   * @example
   * ```ts
   * const { exitCode } = await proc.wait({ timeoutMs: 30_000 })
   * ```
   */
  async wait(options: { timeoutMs?: number } = {}): Promise<ProcessInfo> {
    const until = options.timeoutMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + options.timeoutMs
    while (true) {
      const slice = Math.max(1, Math.min(WAIT_SLICE_MS, until - Date.now()))
      this.info = await this.#http.json('POST', `${this.#path}/wait`, processInfo, {
        json: { timeoutMs: Math.ceil(slice) },
        timeoutMs: slice + DEADLINE_SLACK_MS,
        // Waiting changes nothing.
        idempotent: true,
      })
      if (this.info.status !== 'running' || Date.now() >= until) return this.info
    }
  }

  /** Fetches the current state. */
  async refresh(): Promise<ProcessInfo> {
    this.info = await this.#http.json('GET', this.#path, processInfo)
    return this.info
  }
}
