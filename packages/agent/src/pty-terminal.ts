// One terminal: a program on a pseudo-terminal (node-pty), its output kept in an output log.
//
// Model: the program's output is one byte stream; each chunk is appended to the terminal's
// `OutputLog` as `stdout` with no run, so clients replay it by byte offset and get OUTPUT_LOST
// for evicted bytes, exactly like a shell's scrollback (and within the agent's shared
// scrollback budget). When an attached channel runs out of credit the log reports pressure and
// the terminal stops reading the pty, whose kernel buffer then blocks the program: a slow
// client slows the program, and memory stays bounded. When the program exits, a `closed`
// record ends the log; the terminal keeps its scrollback until it is closed.
//
// Size: the last resize a client sent is the size the program sees. bash's readline reads the
// size and writes it back (TIOCGWINSZ, then TIOCSWINSZ) each time it prepares to read a line,
// so a resize that lands between the two is undone on the program's side, while the kernel
// still holds the new size on ours, where sending it again changes nothing. So after a resize
// the terminal writes the size again on the program's side (`/dev/pts/N`, where an equal size
// is a no-op without SIGWINCH): at once, which also lets a client mend a stale size by sending
// it again, and then before each output chunk for a second, and before the first chunk however
// late it comes. readline always draws its prompt right after writing the size back.
import { closeSync, constants as fsConstants, fstatSync, openSync, writeFileSync } from 'node:fs'
import { constants } from 'node:os'
import type { TerminalInfo } from '@conch/protocol'
import type { Clock } from './clock.ts'
import type { Logger } from './logger.ts'
import { OutputLog } from './output-log.ts'
import { PtyInput } from './pty-input.ts'
import type { Pty, PtyProcess } from './pty-loader.ts'
import type { ScrollbackBudget } from './scrollback-budget.ts'
import type { SandboxUser } from './spawner.ts'

/** What a terminal is started with. */
export interface PtyTerminalOptions {
  /** Terminal id. */
  id: string
  /** Program and arguments. */
  command: string[]
  /** Size. */
  cols: number
  /** Size. */
  rows: number
  /** Working directory on the agent's side. */
  cwd: string
  /** The whole environment. */
  env: Record<string, string>
  /** node-pty. */
  pty: Pty
  /** The user the program runs as. */
  user?: SandboxUser
  /** cgroup.procs files the program is moved into at once. */
  workCgroups: readonly string[]
  /** Bytes of scrollback. */
  scrollbackBytes: number
  /** The agent's shared scrollback budget. */
  budget?: ScrollbackBudget
  /** Time. */
  clock: Clock
  /** Logging. */
  logger: Logger
}

/** Time between SIGHUP and SIGKILL when a terminal is closed. */
const CLOSE_GRACE_MS = 1_000

/** How long after a resize output chunks still make the terminal write the size again. */
const SIZE_HOLD_MS = 1_000

/** Where a terminal holds its size after a resize (see the top of the file). */
interface SizeHold {
  /** Monotonic time until which each output chunk writes the size again. */
  until: number
  /** Whether an output chunk came since the resize; the first one always writes it. */
  seenOutput: boolean
}

/** A program on a pty with a replayable output log. */
export class PtyTerminal {
  /** Terminal id. */
  readonly id: string
  /** Its output. */
  readonly log: OutputLog
  readonly #pty: PtyProcess
  readonly #input: PtyInput
  readonly #setWindowSize: Pty['setWindowSize']
  readonly #clock: Clock
  #sizeHold: SizeHold | null = null
  readonly #command: string[]
  readonly #createdAt: number
  #cols: number
  #rows: number
  #exit: { code: number; signal: string | null } | null = null
  readonly #exitListeners = new Set<() => void>()

  /** Starts the program; throws when node-pty cannot. */
  constructor(options: PtyTerminalOptions) {
    this.id = options.id
    this.#command = options.command
    this.#cols = options.cols
    this.#rows = options.rows
    this.#createdAt = options.clock.now()
    this.#clock = options.clock
    this.#setWindowSize = options.pty.setWindowSize
    this.log = new OutputLog(options.scrollbackBytes, (full) => this.#setPaused(full), options.budget, true)
    const [file, ...args] = options.command
    this.#pty = options.pty.spawn(file ?? 'bash', args, {
      name: options.env.TERM ?? 'xterm-256color',
      cols: options.cols,
      rows: options.rows,
      cwd: options.cwd,
      env: options.env,
      encoding: null,
      ...(options.user ? { uid: options.user.uid, gid: options.user.gid } : {}),
    })
    // The program is moved into the work cgroup before any input reaches it (input flows only
    // once `terminal.open` has answered), so nothing a client types runs outside it.
    for (const procs of options.workCgroups) {
      try {
        writeFileSync(procs, String(this.#pty.pid))
      } catch (error) {
        options.logger.warn(
          { err: error instanceof Error ? error.message : String(error) },
          'could not move a terminal into the work cgroup; killing it',
        )
        this.#pty.kill('SIGKILL')
      }
    }
    this.#input = new PtyInput(this.#pty.fd, options.clock)
    this.#pty.on('close', () => this.#input.close())
    this.#pty.onData((data) => {
      if (this.#sizeHold) this.#holdSize(this.#sizeHold)
      this.log.appendData('stdout', null, typeof data === 'string' ? Buffer.from(data) : data)
    })
    this.#pty.onExit(({ exitCode, signal }) => {
      const signalName = signal ? (signalNames.get(signal) ?? `SIG${signal}`) : null
      const code = signal ? 128 + signal : exitCode
      this.#exit = { code, signal: signalName }
      this.log.appendClosed({
        code,
        signal: signalName,
        reason: signalName ? `killed by ${signalName}` : `exit ${exitCode}`,
      })
      for (const fn of this.#exitListeners) fn()
      this.#exitListeners.clear()
    })
  }

  /** Whether the program is still running. */
  get running(): boolean {
    return this.#exit === null
  }

  /** The program's exit, once it ended. */
  get exit(): { code: number; signal: string | null } | null {
    return this.#exit
  }

  /** Calls `fn` once when the program ends (at once if it has). */
  onExit(fn: () => void): void {
    if (this.#exit) fn()
    else this.#exitListeners.add(fn)
  }

  /** The terminal as the protocol reports it. */
  info(): TerminalInfo {
    return {
      id: this.id,
      command: [...this.#command],
      cols: this.#cols,
      rows: this.#rows,
      pid: this.#pty.pid,
      createdAt: this.#createdAt,
      endOffset: this.log.endOffset,
      startOffset: this.log.startOffset,
      exitCode: this.#exit?.code ?? null,
      signal: this.#exit?.signal ?? null,
    }
  }

  /** Writes input bytes (dropped once the program ended); `onTaken` as in `PtyInput.write`. */
  write(bytes: Uint8Array, onTaken?: () => void): void {
    if (!this.running) {
      onTaken?.()
      return
    }
    this.#input.write(bytes, onTaken)
  }

  /** Sets the size (the program gets SIGWINCH), and holds it there against readline. */
  resize(cols: number, rows: number): void {
    this.#cols = cols
    this.#rows = rows
    if (!this.running) return
    this.#pty.resize(cols, rows)
    this.#writeSizeOnProgramSide()
    this.#sizeHold = { until: this.#clock.monotonicMs() + SIZE_HOLD_MS, seenOutput: false }
  }

  /** Sends a signal to the program. */
  signal(signal: string): void {
    if (!this.running) return
    try {
      process.kill(this.#pty.pid, signal)
    } catch {
      // it exited between the check and the signal
    }
  }

  /** Ends the program: SIGHUP to its process group (a closed tab), SIGKILL after a grace. */
  close(): void {
    // Attached channels stay until the program has exited, so each gets its `end`.
    if (this.running) {
      const pid = this.#pty.pid
      try {
        process.kill(-pid, 'SIGHUP')
      } catch {
        this.#pty.kill('SIGHUP')
      }
      const timer = setTimeout(() => {
        if (this.running) this.#pty.kill('SIGKILL')
      }, CLOSE_GRACE_MS)
      timer.unref()
      this.onExit(() => {
        clearTimeout(timer)
        this.log.release()
      })
      // Keep reading so the program is never blocked on a full pty while it exits.
      this.#pty.resume()
    } else {
      this.log.release()
    }
  }

  /** Before an output chunk: writes the size again while the hold lasts. */
  #holdSize(hold: SizeHold): void {
    if (hold.seenOutput && this.#clock.monotonicMs() > hold.until) {
      this.#sizeHold = null
      return
    }
    hold.seenOutput = true
    this.#writeSizeOnProgramSide()
  }

  /**
   * TIOCSWINSZ on the program's side of the pty. The path comes from node-pty, but the sandbox
   * may have mounted over it, so the open neither blocks nor takes a controlling tty, and only a
   * character device gets the size. Errors are dropped: the program may have closed its tty.
   */
  #writeSizeOnProgramSide(): void {
    let fd: number | undefined
    try {
      fd = openSync(this.#pty.ptsName, PROGRAM_SIDE_OPEN_FLAGS)
      if (fstatSync(fd).isCharacterDevice()) this.#setWindowSize(fd, this.#cols, this.#rows)
    } catch {
      // the tty is gone or is not a tty: nothing to hold
    } finally {
      if (fd !== undefined) closeSync(fd)
    }
  }

  #setPaused(full: boolean): void {
    if (full) this.#pty.pause()
    else this.#pty.resume()
  }
}

/** How the program's side of the pty is opened to write its size. */
const PROGRAM_SIDE_OPEN_FLAGS = fsConstants.O_RDWR | fsConstants.O_NOCTTY | fsConstants.O_NONBLOCK

/** Signal numbers to names, for exit reports. */
const signalNames: ReadonlyMap<number, string> = new Map(
  Object.entries(constants.signals).map(([name, n]) => [n, name]),
)
