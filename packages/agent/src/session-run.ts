// One run of a session's shell: what the caller asks for, what it gets back, and the record
// the session keeps of it while it is queued, written ahead and running, including its sync line.
import type { AgentParams, HistoryEntry, StreamName } from '@conch/protocol'
import { AgentError } from './agent-error.ts'
import { CappedBytes } from './capped-bytes.ts'

/** One command for a session. */
export interface RunRequest {
  /** Run id, unique among the session's runs in flight. */
  runId: string
  /** Command text; CRLF line endings become LF. */
  command: string
  /** Timeout in ms (already clamped by the caller); the session default when absent. */
  timeoutMs?: number
  /** Bytes for the command's stdin; /dev/null when absent. */
  stdin?: Buffer
  /** stdin is a pipe the client writes while the run is in flight (`session.stdin`). */
  stdinPipe?: boolean
  /** Cap per stream of the buffered result. */
  outputCapBytes?: number
  /** Internal runs (state queries) are kept out of the output log and the history. */
  internal?: boolean
}

/**
 * The run a `session.run` call asks for, keeping at most `outputCapBytes` per stream of its
 * result (0 for a streamed run, whose result is dropped; absent: the session's default).
 */
export function runRequest(p: AgentParams<'session.run'>, outputCapBytes: number | undefined): RunRequest {
  const req: RunRequest = { runId: p.id, command: p.command }
  if (p.timeoutMs !== undefined) req.timeoutMs = p.timeoutMs
  if (p.stdin !== undefined) req.stdin = Buffer.from(p.stdin, 'base64')
  if (p.stdinPipe === true) req.stdinPipe = true
  if (outputCapBytes !== undefined) req.outputCapBytes = outputCapBytes
  return req
}

/** The buffered result of one run. */
export interface RunOutcome {
  /** Run id. */
  runId: string
  /** `$?` of the command. */
  exitCode: number
  /** Whether the timeout stopped it. */
  timedOut: boolean
  /** Whether an interrupt stopped it. */
  interrupted: boolean
  /** Whether the sandbox's memory limit killed it. */
  oomKilled: boolean
  /** stdout, up to the cap. */
  stdout: Buffer
  /** stderr, up to the cap. */
  stderr: Buffer
  /** Total stdout bytes. */
  stdoutBytes: number
  /** Total stderr bytes. */
  stderrBytes: number
  /** Whether either stream was cut. */
  truncated: boolean
  /** Wall time from sending the command to its end. */
  durationMs: number
  /** Log offset at its start. */
  startOffset: number
  /** Log offset after its last byte. */
  endOffset: number
}

/**
 * The sync line written after a run's SIGINT. It belongs to the run while the run is active;
 * if the run ends before both of its markers arrive, the session keeps waiting for it before
 * the next run may start.
 */
export interface SyncLine {
  /** The sync nonce that counts. */
  nonce: string
  /** Which streams have shown its marker. */
  seen: Record<StreamName, boolean>
  /** Older sync nonces, consumed if they ever appear. */
  stale: string[]
  /** Fresh sync lines written for it, once its run had ended, so far. */
  resyncs: number
}

/** A run that was queued and may be running: its request, its promise, and its progress in the shell. */
export interface Run {
  req: RunRequest
  command: string
  resolve: (outcome: RunOutcome) => void
  reject: (err: Error) => void
  nonce: string
  /** The run's sync line, once an interrupt or timeout has written one. */
  sync: SyncLine | null
  /** SIGINTs sent to bash's process group for this run. */
  sigints: number
  done: Record<StreamName, boolean>
  exitCode: number | null
  out: Record<StreamName, CappedBytes>
  startedAtMs: number
  startTicks: number
  startOffset: number
  timer: unknown
  timedOut: boolean
  interrupted: boolean
  stopping: boolean
  history: HistoryEntry | null
  wake: (() => void) | null
  /** Slot of the write-ahead window its line uses (command and stdin files). */
  slot: number
  /** Whether it is the session's active run (its start is recorded; output goes to it). */
  activated: boolean
  /** An interrupt held its command file before bash reached its line. */
  held: boolean
  /** The nonce its held body prints, once an interrupt held its line. */
  heldNonce: string
  /** The held body's stdout marker arrived: its line ran nothing. */
  heldSeen: boolean
  /** Output that arrived after the previous run's marker but before it became active. */
  early: Record<StreamName, Buffer[]> | null
  /** Bytes its command and stdin files take. */
  fileBytes: number
}

/** A queued run's record: nothing sent yet, each stream capped at `cap` bytes. */
export function newRun(
  req: RunRequest,
  cap: number,
  resolve: (outcome: RunOutcome) => void,
  reject: (err: Error) => void,
): Run {
  return {
    req,
    command: req.command.replaceAll('\r\n', '\n'),
    resolve,
    reject,
    nonce: '',
    sync: null,
    sigints: 0,
    done: { stdout: false, stderr: false },
    exitCode: null,
    out: { stdout: new CappedBytes(cap), stderr: new CappedBytes(cap) },
    startedAtMs: 0,
    startTicks: 0,
    startOffset: 0,
    timer: null,
    timedOut: false,
    interrupted: false,
    stopping: false,
    history: null,
    wake: null,
    slot: 0,
    activated: false,
    held: false,
    heldNonce: '',
    heldSeen: false,
    early: null,
    fileBytes: Buffer.byteLength(req.command) + (req.stdin?.length ?? 0),
  }
}

/**
 * Why session `sessionId` refuses `req`, or null: a NUL byte, a command over `maxBytes`, or
 * an id already among `inFlight`.
 */
export function checkRunRequest(
  sessionId: string,
  req: RunRequest,
  maxBytes: number,
  inFlight: ReadonlySet<string>,
): AgentError | null {
  if (req.command.includes('\0')) {
    return new AgentError(
      'INVALID_COMMAND',
      `run "${req.runId}" in session "${sessionId}": the command contains a NUL byte, which bash cannot read`,
    )
  }
  const bytes = Buffer.byteLength(req.command)
  if (bytes > maxBytes) {
    return new AgentError(
      'COMMAND_TOO_LARGE',
      `run "${req.runId}" in session "${sessionId}": the command is ${bytes} bytes, over the ${maxBytes}-byte limit`,
      { details: { limit: maxBytes, value: bytes } },
    )
  }
  if (inFlight.has(req.runId)) {
    return new AgentError(
      'BAD_REQUEST',
      `run id "${req.runId}" is already in flight in session "${sessionId}"; use a new id for each run.`,
    )
  }
  return null
}

/** The buffered result of a finished run. */
export function outcomeOf(
  run: Run,
  exitCode: number,
  oomKilled: boolean,
  durationMs: number,
  endOffset: number,
): RunOutcome {
  const { stdout, stderr } = run.out
  return {
    runId: run.req.runId,
    exitCode,
    timedOut: run.timedOut,
    interrupted: run.interrupted,
    oomKilled,
    stdout: stdout.bytes(),
    stderr: stderr.bytes(),
    stdoutBytes: stdout.totalBytes,
    stderrBytes: stderr.totalBytes,
    truncated: stdout.truncated || stderr.truncated,
    durationMs,
    startOffset: run.startOffset,
    endOffset,
  }
}
