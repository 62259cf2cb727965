// The agent's part of a snapshot: every open shell's state and the background processes, out
// of a sandbox (`snapshot.capture`) and back into a fresh one (`snapshot.restore`).
//
// Model: capturing a shell is an internal run (queued behind the session's runs, kept out of
// its log and history, `$?` left as it was) that prints the state as records
// (`shell-state-capture.ts`); the history and `$?` come from the session itself. Restoring
// creates each session with its captured id and options, then runs the restore script
// (`shell-state-restore.ts`) in it as an internal run and loads its history. Paths under the
// workspace are written as `/workspace/...` in the state, so they map onto the restored
// sandbox's root. Background processes are listed and, when the caller asks, started again:
// they restart, they do not continue.
import type { RestoredSession, SandboxShellState, ShellState, SnapshotProcess } from '@conch/protocol'
import { WORKSPACE_PATH } from '@conch/protocol/zod-free'
import { AgentError } from './agent-error.ts'
import type { BackgroundProcesses } from './background-processes.ts'
import type { BashSession } from './bash-session.ts'
import { captureNonce, captureScript, parseCapture } from './shell-state-capture.ts'
import { restoreScript } from './shell-state-restore.ts'

/** What the capture and the restore need from the sessions. */
export interface ShellSessions {
  /** Every session, open or closed, in creation order. */
  all(): BashSession[]
  /** Starts a new shell with these options. */
  create(options: { id: string; commandTimeoutMs: number; cleanEnv: boolean }): Promise<BashSession>
}

/** Time a state query may take in one shell. */
const STATE_RUN_TIMEOUT_MS = 30_000
/** How long a capture waits for a session's runs ahead of it before it gives up on that session. */
export const CAPTURE_WAIT_MS = 10_000

/** Captures and restores the sandbox's shells and processes. */
export class SandboxState {
  readonly #sessions: ShellSessions
  readonly #processes: BackgroundProcesses
  readonly #root: string
  readonly #captureWaitMs: number
  #runs = 0

  /** Works on these sessions and processes, in the workspace at `root`. */
  constructor(
    sessions: ShellSessions,
    processes: BackgroundProcesses,
    root: string,
    captureWaitMs: number = CAPTURE_WAIT_MS,
  ) {
    this.#sessions = sessions
    this.#processes = processes
    this.#root = root
    this.#captureWaitMs = captureWaitMs
  }

  /** Every open shell's state and every known background process. */
  async capture(): Promise<SandboxShellState> {
    const open = this.#sessions.all().filter((s) => s.closedInfo === null)
    const sessions = await Promise.all(open.map((s) => this.#captureShell(s)))
    const processes: SnapshotProcess[] = this.#processes.startRequests().map((p) => ({
      command: p.command,
      cwd: this.#toWorkspaceView(p.cwd),
      env: p.env,
      running: p.running,
    }))
    return { sessions, processes }
  }

  /**
   * Creates every captured session (keeping its id) in this fresh sandbox and puts its state
   * back; with `restartProcesses`, starts again each process that was running.
   */
  async restore(state: SandboxShellState, restartProcesses: boolean): Promise<RestoredSession[]> {
    const restored: RestoredSession[] = []
    for (const shell of state.sessions) restored.push(await this.#restoreShell(shell))
    if (restartProcesses) {
      for (const p of state.processes.filter((p) => p.running)) {
        this.#processes.start({ command: p.command, cwd: this.#toSandboxView(p.cwd), env: p.env })
      }
    }
    return restored
  }

  async #captureShell(session: BashSession): Promise<ShellState> {
    const nonce = captureNonce()
    const query = this.#internal(session, captureScript(nonce))
    let timer: ReturnType<typeof setTimeout> | undefined
    const busy = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const run = session.running
        reject(
          new AgentError(
            'SESSION_BUSY',
            `session "${session.id}" is still running ${run === null ? 'its queued runs' : `run "${run}"`} after ${this.#captureWaitMs / 1000} s, and a snapshot reads a shell between runs`,
            { details: { sessionId: session.id } },
          ),
        )
      }, this.#captureWaitMs)
    })
    query.catch(() => {})
    let out: Buffer
    try {
      out = await Promise.race([query, busy])
    } finally {
      clearTimeout(timer)
    }
    const captured = parseCapture(out, nonce)
    if (captured === null) {
      throw new AgentError(
        'SHELL_CLOSED',
        `session "${session.id}" did not report its state (its shell closed or ended the state query); snapshot again, or delete the session first`,
        {
          details: { sessionId: session.id, code: null, signal: null, reason: 'the state query ended early' },
        },
      )
    }
    return {
      id: session.id,
      commandTimeoutMs: session.commandTimeoutMs,
      cleanEnv: session.cleanEnv,
      cwd: this.#toWorkspaceView(captured.cwd),
      dirStack: captured.dirStack.map((d) => this.#toWorkspaceView(d)),
      umask: captured.umask,
      oldPwd: captured.oldPwd === null ? null : this.#toWorkspaceView(captured.oldPwd),
      variables: captured.variables,
      functions: captured.functions,
      aliases: captured.aliases,
      setOptions: captured.setOptions,
      shoptOptions: captured.shoptOptions,
      traps: captured.traps,
      history: session.history(),
      lastExitCode: session.lastExitCode,
    }
  }

  async #restoreShell(shell: ShellState): Promise<RestoredSession> {
    const existing = this.#sessions.all().find((s) => s.id === shell.id)
    const session =
      existing ??
      (await this.#sessions.create({
        id: shell.id,
        commandTimeoutMs: shell.commandTimeoutMs,
        cleanEnv: shell.cleanEnv,
      }))
    await session.ready
    // `$?` first: the restore script's internal run ends by returning it.
    session.restoreFromSnapshot(shell.history, shell.lastExitCode)
    const fresh = (await this.#internal(session, '\\builtin compgen -v')).toString().split('\n')
    const out = await this.#internal(
      session,
      restoreScript(shell, fresh, (p) => this.#toSandboxView(p)),
    )
    const problems = out
      .toString()
      .split('\n')
      .filter((line) => line.startsWith('problem: '))
      .map((line) => line.slice('problem: '.length))
    return { id: shell.id, problems }
  }

  /** Runs a state query in the shell and returns its stdout (stderr is the user's xtrace, if any). */
  async #internal(session: BashSession, command: string): Promise<Buffer> {
    this.#runs += 1
    const out = await session.run({
      runId: `__conch_state_${this.#runs}`,
      command,
      internal: true,
      timeoutMs: STATE_RUN_TIMEOUT_MS,
    })
    return out.stdout
  }

  /** A path in this sandbox as the snapshot writes it: under the root means under `/workspace`. */
  #toWorkspaceView(path: string): string {
    if (path === this.#root) return WORKSPACE_PATH
    if (path.startsWith(`${this.#root}/`)) return WORKSPACE_PATH + path.slice(this.#root.length)
    return path
  }

  /** A snapshot's path in this sandbox: `/workspace/...` lands under the root. */
  #toSandboxView(path: string): string {
    if (path === WORKSPACE_PATH) return this.#root
    if (path.startsWith(`${WORKSPACE_PATH}/`)) return this.#root + path.slice(WORKSPACE_PATH.length)
    return path
  }
}
