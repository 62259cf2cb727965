import { ERROR_SUGGESTIONS } from '@conch/protocol'
import type { ErrorCode } from './error-code.ts'
import type { ErrorDetails } from './error-details.ts'

// The SDK's error classes. `ConchError` carries the protocol `code`; a subclass exists only
// where callers branch on it. `errorFromWire` (error-from-wire.ts) picks the class for a code.
// The constructor is the one place that adds advice: the protocol's suggestion for the code,
// appended to the message once (docs/PROTOCOL.md, "Errors"). Runner and agent messages say
// what happened; they carry no generic advice of their own.

/**
 * Facts an error carries besides its message.
 *
 * @example
 * ```ts
 * throw new ConchError('FILE_NOT_FOUND', 'no /workspace/a.txt', { cause: err, details: { path: '/workspace/a.txt' } })
 * ```
 */
export interface ConchErrorOptions<C extends ErrorCode = ErrorCode> {
  /** Facts for the caller, typed by the code (`earliestOffset` for OUTPUT_LOST). */
  details?: Partial<ErrorDetails[C]> | undefined
  /** The error that caused this one (ES2022 `cause`). */
  cause?: unknown
  /** HTTP status, when the error came from a REST answer. */
  status?: number | undefined
}

/**
 * Base class of every error the SDK throws. Branch on `code` (a protocol `ErrorCode`) or on
 * the subclass.
 *
 * @example
 * ```ts
 * try {
 *   await sb.files.read('/workspace/missing.txt')
 * } catch (err) {
 *   if (err instanceof ConchError && err.code === 'FILE_NOT_FOUND') console.log('no file yet')
 *   else throw err
 * }
 * ```
 */
export class ConchError<C extends ErrorCode = ErrorCode> extends Error {
  /** Machine-readable code from the protocol. */
  readonly code: C
  /** HTTP status, when the error came from a REST answer. */
  readonly status: number | undefined
  /** Facts for the caller, typed by the code. */
  readonly details: Partial<ErrorDetails[C]>
  /** What to do: the code's suggestion, which also ends `message`. */
  readonly suggestion: string

  constructor(code: C, message: string, options: ConchErrorOptions<C> = {}) {
    const suggestion = ERROR_SUGGESTIONS[code]
    super(
      `${message.replace(TRAILING_PUNCTUATION, '')}; ${suggestion}`,
      options.cause === undefined ? undefined : { cause: options.cause },
    )
    this.name = 'ConchError'
    this.code = code
    this.status = options.status
    this.details = options.details ?? {}
    this.suggestion = suggestion
  }
}

const TRAILING_PUNCTUATION = /[\s.;]+$/

/**
 * The shell's bash ended (`exit`, `exec`, or killed): the pending run and every later run on
 * this shell fail with it. Open a new shell to continue.
 *
 * @example
 * ```ts
 * try {
 *   await sh.run('exit 3')
 * } catch (err) {
 *   if (err instanceof ShellClosedError) console.log(err.exitCode) // 3
 * }
 * ```
 */
export class ShellClosedError extends ConchError<'SHELL_CLOSED'> {
  /** bash's exit status, when it exited. */
  readonly exitCode: number | null
  /** The signal that killed bash, when one did. */
  readonly signal: string | null

  constructor(
    message: string,
    closed: { exitCode: number | null; signal: string | null },
    options: ConchErrorOptions<'SHELL_CLOSED'> = {},
  ) {
    super('SHELL_CLOSED', message, options)
    this.name = 'ShellClosedError'
    this.exitCode = closed.exitCode
    this.signal = closed.signal
  }
}

/**
 * The sandbox does not exist (never did, was destroyed, or its idle timeout ended it).
 *
 * @example
 * ```ts
 * const sb = await Sandbox.connect(id, { url, apiKey }).catch((err) => {
 *   if (err instanceof SandboxNotFoundError) return Sandbox.create({ url, apiKey })
 *   throw err
 * })
 * ```
 */
export class SandboxNotFoundError extends ConchError<'SANDBOX_NOT_FOUND'> {
  constructor(message: string, options: ConchErrorOptions<'SANDBOX_NOT_FOUND'> = {}) {
    super('SANDBOX_NOT_FOUND', message, options)
    this.name = 'SandboxNotFoundError'
  }
}

/**
 * The session does not exist in this sandbox (deleted, or never created).
 *
 * @example
 * ```ts
 * const sh = await sb.reattachShell('build').catch((err) => {
 *   if (err instanceof SessionNotFoundError) return sb.shell()
 *   throw err
 * })
 * ```
 */
export class SessionNotFoundError extends ConchError<'SESSION_NOT_FOUND'> {
  constructor(message: string, options: ConchErrorOptions<'SESSION_NOT_FOUND'> = {}) {
    super('SESSION_NOT_FOUND', message, options)
    this.name = 'SessionNotFoundError'
  }
}

/**
 * The API key or token is missing, wrong, expired, or scoped to another sandbox
 * (`UNAUTHORIZED` or `FORBIDDEN`).
 *
 * @example
 * ```ts
 * try {
 *   await Sandbox.list({ url, apiKey: 'wrong' })
 * } catch (err) {
 *   if (err instanceof AuthError) console.log('check CONCH_API_KEY')
 * }
 * ```
 */
export class AuthError extends ConchError<'UNAUTHORIZED' | 'FORBIDDEN'> {
  constructor(
    code: 'UNAUTHORIZED' | 'FORBIDDEN',
    message: string,
    options: ConchErrorOptions<'UNAUTHORIZED' | 'FORBIDDEN'> = {},
  ) {
    super(code, message, options)
    this.name = 'AuthError'
  }
}

/** The codes of a limit that was hit. */
type RateLimitCode =
  | 'RATE_LIMITED'
  | 'TOO_MANY_SANDBOXES'
  | 'TOO_MANY_SESSIONS'
  | 'TOO_MANY_PROCESSES'
  | 'TOO_MANY_TERMINALS'
  | 'TOO_MANY_EXPOSED_PORTS'
  | 'TOO_MANY_CONNECTIONS'

/**
 * A limit was hit: too many queued runs, sandboxes, sessions or processes. Retry later or
 * free some.
 *
 * @example
 * ```ts
 * try {
 *   await sb.shell()
 * } catch (err) {
 *   if (err instanceof RateLimitError) await sb.deleteSession('old')
 * }
 * ```
 */
export class RateLimitError extends ConchError<RateLimitCode> {
  constructor(code: RateLimitCode, message: string, options: ConchErrorOptions<RateLimitCode> = {}) {
    super(code, message, options)
    this.name = 'RateLimitError'
  }
}

/**
 * Output this client had not seen was evicted from the session's bounded scrollback while it
 * was disconnected, so the run's result cannot be exact. The shell itself is fine.
 *
 * @example
 * ```ts
 * const r = await sh.run('make').catch((err) => {
 *   if (err instanceof OutputLostError) return sh.run('make') // run it again
 *   throw err
 * })
 * ```
 */
export class OutputLostError extends ConchError<'OUTPUT_LOST'> {
  /** The oldest offset the runner still keeps, when it said. */
  readonly earliestOffset: number | undefined

  constructor(message: string, options: ConchErrorOptions<'OUTPUT_LOST'> = {}) {
    super('OUTPUT_LOST', message, options)
    this.name = 'OutputLostError'
    this.earliestOffset = this.details.earliestOffset
  }
}

/** The codes of a connection that failed. */
type ConnectionCode = 'CONNECTION_LOST' | 'AGENT_UNAVAILABLE' | 'RUNNER_UNAVAILABLE'

/**
 * The runner could not be reached, or the connection dropped and did not come back within
 * the reconnect budget (`CONNECTION_LOST`, `AGENT_UNAVAILABLE`, `RUNNER_UNAVAILABLE`).
 *
 * @example
 * ```ts
 * try {
 *   await sh.run('true')
 * } catch (err) {
 *   if (err instanceof ConnectionError) sh = await sb.reattachShell(sh.sessionId)
 * }
 * ```
 */
export class ConnectionError extends ConchError<ConnectionCode> {
  constructor(message: string, options: ConchErrorOptions<ConnectionCode> & { code?: ConnectionCode } = {}) {
    super(options.code ?? 'CONNECTION_LOST', message, options)
    this.name = 'ConnectionError'
  }
}

/**
 * A call did not get an answer in time: the client-side deadline passed (the runner is silent
 * or overloaded), or the runner reported `DEADLINE_EXCEEDED`.
 *
 * @example
 * ```ts
 * const sb = await Sandbox.create({ url, apiKey, requestTimeoutMs: 5_000 })
 * await sb.files.list('/workspace').catch((err) => {
 *   if (err instanceof DeadlineError) console.log('runner is slow:', err.message)
 * })
 * ```
 */
export class DeadlineError extends ConchError<'DEADLINE_EXCEEDED'> {
  constructor(message: string, options: ConchErrorOptions<'DEADLINE_EXCEEDED'> = {}) {
    super('DEADLINE_EXCEEDED', message, options)
    this.name = 'DeadlineError'
  }
}
