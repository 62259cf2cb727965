// Interactive stdin for one shell run: a FIFO the run's command reads as its stdin, fed by the
// client while the run is in flight (`session.stdin`), ended by the client (EOF) or when the
// run ends. The agent holds the FIFO open read-write, so opening it never blocks either side,
// and closing the agent's end is the command's EOF. A command that waits on input that never
// comes is stopped by the run's timeout like any other. Input the command has not read yet is
// held in the pipe and, past its 64 KiB, in the agent up to `MAX_PENDING_STDIN_BYTES`; more is
// refused, so a client cannot grow the agent's memory by writing to a command that never reads.
import { spawnSync } from 'node:child_process'
import { chownSync, constants, openSync, readdirSync, readlinkSync, rmSync } from 'node:fs'
import { Socket } from 'node:net'
import { join } from 'node:path'
import { AgentError } from './agent-error.ts'

/** Input the agent holds for a run beyond what the pipe holds. */
export const MAX_PENDING_STDIN_BYTES = 1_048_576

/** One run's stdin pipe. */
export class RunStdinPipe {
  /** The FIFO's path, for the run's `<` redirect. */
  readonly path: string
  readonly #runId: string
  readonly #socket: Socket
  readonly #readerPid: number | undefined
  #ended = false
  #closed = false

  /**
   * Makes the FIFO in `dir` (readable by `gid` when given) and opens the agent's end.
   * `readerPid` is the process that opens it for the command (bash, for `. cmd <fifo`).
   */
  constructor(dir: string, runId: string, gid: number | undefined, readerPid?: number) {
    this.#runId = runId
    this.#readerPid = readerPid
    this.path = join(dir, 'stdin-pipe')
    rmSync(this.path, { force: true })
    const made = spawnSync('mkfifo', ['-m', gid === undefined ? '0600' : '0640', this.path], {
      stdio: 'ignore',
    })
    if (made.status !== 0) {
      throw new AgentError(
        'INTERNAL',
        `could not make a stdin pipe for run ${runId} (mkfifo failed); run it with stdin data instead`,
      )
    }
    if (gid !== undefined) chownSync(this.path, process.getuid?.() ?? 0, gid)
    const fd = openSync(this.path, constants.O_RDWR | constants.O_NONBLOCK)
    this.#socket = new Socket({ fd, readable: false, writable: true })
    this.#socket.on('error', () => {})
  }

  /** Writes input; BAD_REQUEST after `end`, RATE_LIMITED while too much is unread. */
  write(bytes: Uint8Array): void {
    if (this.#ended) {
      throw new AgentError(
        'BAD_REQUEST',
        `stdin of run ${this.#runId} was already ended; start a new run to send more input`,
      )
    }
    if (this.#socket.writableLength + bytes.byteLength > MAX_PENDING_STDIN_BYTES) {
      throw new AgentError(
        'RATE_LIMITED',
        `run ${this.#runId} has ${this.#socket.writableLength} bytes of stdin it has not read yet; wait for it to read before writing more`,
        {
          details: { limit: MAX_PENDING_STDIN_BYTES, value: this.#socket.writableLength + bytes.byteLength },
        },
      )
    }
    this.#socket.write(bytes)
  }

  /**
   * Ends the input: the command reads EOF once it has read what was written. The agent's end
   * closes only once the reader has the FIFO open: closed earlier, the reader's open would
   * wait for a writer that never comes.
   */
  end(): void {
    if (this.#ended) return
    this.#ended = true
    const finish = (): void => {
      if (this.#closed) return
      if (this.#readerHasIt()) this.#socket.end()
      else setTimeout(finish, 10).unref()
    }
    finish()
  }

  /** Whether the reader process has the FIFO open (true when it cannot be told). */
  #readerHasIt(): boolean {
    if (this.#readerPid === undefined) return true
    try {
      const dir = `/proc/${this.#readerPid}/fd`
      return readdirSync(dir).some((fd) => {
        try {
          return readlinkSync(`${dir}/${fd}`) === this.path
        } catch {
          return false
        }
      })
    } catch {
      return true
    }
  }

  /** The run ended: drop unread input and remove the FIFO. */
  close(): void {
    this.#ended = true
    this.#closed = true
    this.#socket.destroy()
    rmSync(this.path, { force: true })
  }
}
