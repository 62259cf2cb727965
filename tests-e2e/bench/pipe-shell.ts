// The reference line of the benchmark: a bare Node client talking to one bash over pipes,
// with the same end-marker idea conch uses (print a nonce and `$?` after each command). It has
// no framing guarantees, no timeouts, no scrollback and no network: it is the floor that the
// full stack is compared against.

import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'

interface Pending {
  resolve: (code: number) => void
  reject: (error: Error) => void
}

/** One bash on pipes; `run` resolves with the exit code when the end marker arrives. */
export class PipeShell implements AsyncDisposable {
  readonly #bash: ChildProcessWithoutNullStreams
  readonly #nonce = randomBytes(12).toString('hex')
  readonly #pending: Pending[] = []
  #buffer = ''
  /** Bytes of stdout received, markers excluded only approximately (for MB/s). */
  bytesOut = 0

  constructor() {
    this.#bash = spawn('bash', ['--noprofile', '--norc'], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp' },
    })
    this.#bash.stdout.on('data', (chunk: Buffer) => this.#onData(chunk))
    this.#bash.stderr.resume()
    this.#bash.once('exit', () => {
      for (const p of this.#pending.splice(0)) p.reject(new Error('bash exited'))
    })
  }

  /** The bash pid. */
  get pid(): number {
    return this.#bash.pid ?? -1
  }

  #onData(chunk: Buffer): void {
    this.bytesOut += chunk.length
    // Keep only a tail long enough to hold a marker line; big outputs never accumulate.
    this.#buffer += chunk.toString('latin1')
    const tag = `\u0001${this.#nonce} `
    let at = this.#buffer.indexOf(tag)
    while (at !== -1) {
      const end = this.#buffer.indexOf('\n', at)
      if (end === -1) break
      const code = Number(this.#buffer.slice(at + tag.length, end))
      this.#buffer = this.#buffer.slice(end + 1)
      this.#pending.shift()?.resolve(code)
      at = this.#buffer.indexOf(tag)
    }
    if (at === -1 && this.#buffer.length > 256) this.#buffer = this.#buffer.slice(-128)
  }

  /** Runs one command line in the shell. */
  run(command: string): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      this.#pending.push({ resolve, reject })
      this.#bash.stdin.write(`${command} </dev/null\nprintf '\\001%s %d\\n' ${this.#nonce} $?\n`)
    })
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#bash.exitCode !== null || this.#bash.signalCode !== null) return
    const exited = new Promise((resolve) => this.#bash.once('exit', resolve))
    this.#bash.stdin.end()
    this.#bash.kill('SIGKILL')
    await exited
  }
}
