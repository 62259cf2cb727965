// The bare reference of the product's two hops: a WebSocket client → a WebSocket server process
// (bare-relay.ts) → a Unix socket → a process holding bash (bare-bash-holder.ts), with the same
// `ws` library and the same end-marker idea as bash over pipes (a nonce and `$?` after each
// command). No auth, no schemas, no state: what any WebSocket-to-bash service pays for its two
// hops, and so the reference for `shell.run` latency, pipelined throughput, the runner's memory
// (the relay is a bare Node holding a WebSocket) and start-up.
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createInterface } from 'node:readline'
import { WebSocket } from 'ws'

interface Pending {
  resolve: (code: number) => void
  reject: (error: Error) => void
}

/** The relay and holder processes and one WebSocket to the relay. */
export class BareTwoHop implements AsyncDisposable {
  readonly #relay: ChildProcess
  readonly #ws: WebSocket
  readonly #nonce = randomBytes(12).toString('hex')
  readonly #pending: Pending[] = []
  #tail = ''
  /** Output bytes received (markers included). */
  bytesOut = 0
  /** The relay's pid: a bare Node process holding a WebSocket server (the runner's counterpart). */
  readonly relayPid: number
  /** The holder's pid: a bare Node process holding bash (the agent's counterpart). */
  readonly holderPid: number

  private constructor(relay: ChildProcess, ws: WebSocket, holderPid: number) {
    this.#relay = relay
    this.#ws = ws
    this.relayPid = relay.pid ?? -1
    this.holderPid = holderPid
    ws.on('message', (data: Buffer) => this.#onData(data))
    ws.once('close', () => {
      for (const p of this.#pending.splice(0)) p.reject(new Error('bare relay closed'))
    })
  }

  /** Starts both processes and connects; resolves once bash answered a first command. */
  static async start(): Promise<BareTwoHop> {
    const relay = spawn(
      process.execPath,
      [...process.execArgv, new URL('./bare-relay.ts', import.meta.url).pathname],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    )
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: relay.stdout! }).once('line', resolve)
      relay.once('exit', (code) => reject(new Error(`bare relay exited with ${code}`)))
    })
    const match = /^port (\d+) holder (\d+)$/.exec(line)
    if (!match) throw new Error(`bare relay said "${line}"`)
    const ws = new WebSocket(`ws://127.0.0.1:${match[1]}`, { perMessageDeflate: false })
    await new Promise((resolve, reject) => {
      ws.once('open', resolve)
      ws.once('error', reject)
    })
    const bare = new BareTwoHop(relay, ws, Number(match[2]))
    await bare.run('true')
    return bare
  }

  #onData(chunk: Buffer): void {
    this.bytesOut += chunk.length
    this.#tail += chunk.toString('latin1')
    const tag = `\u0001${this.#nonce} `
    let at = this.#tail.indexOf(tag)
    while (at !== -1) {
      const end = this.#tail.indexOf('\n', at)
      if (end === -1) break
      const code = Number(this.#tail.slice(at + tag.length, end))
      this.#tail = this.#tail.slice(end + 1)
      this.#pending.shift()?.resolve(code)
      at = this.#tail.indexOf(tag)
    }
    if (at === -1 && this.#tail.length > 256) this.#tail = this.#tail.slice(-128)
  }

  /** Runs one command line; resolves with its exit code. */
  run(command: string): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      this.#pending.push({ resolve, reject })
      this.#ws.send(`${command} </dev/null\nprintf '\\001%s %d\\n' ${this.#nonce} $?\n`)
    })
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#ws.close()
    if (this.#relay.exitCode !== null || this.#relay.signalCode !== null) return
    const exited = new Promise((resolve) => this.#relay.once('exit', resolve))
    this.#relay.stdin?.end()
    await exited
  }
}
