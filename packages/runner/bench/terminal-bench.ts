// Terminal benchmark: keystroke echo round trip and output throughput through a terminal
// (WebSocket → runner → agent → node-pty), each as a ratio to a bare node-pty in this process
// measured in the same run, interleaved round by round so a noisy neighbour slows both sides.
//
//   pnpm --filter @conch/runner bench      (writes bench/results/terminal.json at the repo root)
//
// Echo: the program is `cat` on a raw, non-echoing tty, so every byte typed comes straight back
// (what a full-screen program or readline does); one byte is sent and its echo awaited, N times.
// Throughput: `head -c` of /dev/zero on a raw tty, from the key that starts it to the last byte.
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { loadavg, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { BEARER_SUBPROTOCOL_PREFIX, TERMINAL_SUBPROTOCOL } from '@conch/protocol'
import { WebSocket } from 'ws'
import { generateApiKey } from '../src/credentials.ts'

const HERE = dirname(fileURLToPath(import.meta.url))
const REPO = join(HERE, '..', '..', '..')
const KEYS = Number(process.env.BENCH_TERMINAL_KEYS ?? 500)
const BYTES = Number(process.env.BENCH_TERMINAL_BYTES ?? 64 * 1024 * 1024)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const ECHO = ['bash', '-c', 'stty raw -echo; exec cat']
// Waits for one key before it writes, so the clock starts with the reader attached.
const FLOOD = ['bash', '-c', `stty raw -echo; head -c 1 >/dev/null; exec head -c ${BYTES} /dev/zero`]

interface Pty {
  onData(fn: (d: Buffer | string) => void): void
  write(d: string): void
  kill(): void
}
const nodePty = createRequire(import.meta.url)('node-pty') as {
  spawn(file: string, args: string[], o: Record<string, unknown>): Pty
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** A byte source that types one key at a time and waits for its echo. */
interface EchoTarget {
  type(key: string): void
  onBytes(fn: (n: number) => void): void
}

async function echoP50(target: EchoTarget): Promise<number> {
  let pending: (() => void) | null = null
  target.onBytes(() => {
    const p = pending
    pending = null
    p?.()
  })
  const samples: number[] = []
  for (let i = 0; i < KEYS + 20; i++) {
    const start = performance.now()
    await new Promise<void>((resolve) => {
      pending = resolve
      target.type('a')
    })
    if (i >= 20) samples.push(performance.now() - start)
  }
  return median(samples)
}

function barePty(command: string[]): { pty: Pty; ready: Promise<void> } {
  const [file, ...args] = command
  const pty = nodePty.spawn(file!, args, { cols: 80, rows: 24, encoding: null })
  return { pty, ready: new Promise((r) => setTimeout(r, 200)) }
}

async function bareEcho(): Promise<number> {
  const { pty, ready } = barePty(ECHO)
  await ready
  let listener: (n: number) => void = () => {}
  pty.onData((d) => listener(d.length))
  const p50 = await echoP50({ type: (k) => pty.write(k), onBytes: (fn) => (listener = fn) })
  pty.kill()
  return p50
}

async function bareThroughput(): Promise<number> {
  const { pty, ready } = barePty(FLOOD)
  await ready
  let got = 0
  const start = performance.now()
  pty.write('g')
  await new Promise<void>((resolve) =>
    pty.onData((d) => {
      got += d.length
      if (got >= BYTES) resolve()
    }),
  )
  return BYTES / 1048576 / ((performance.now() - start) / 1000)
}

async function startRunner(stateDir: string, apiKey: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    [
      '--conditions=source',
      join(HERE, '..', 'src', 'main.ts'),
      'runner',
      '--port',
      '0',
      '--state-dir',
      stateDir,
      '--log-level',
      'error',
    ],
    { env: { ...process.env, CONCH_API_KEY: apiKey }, stdio: ['ignore', 'pipe', 'inherit'] },
  )
  const url = await new Promise<string>((resolve, reject) => {
    let out = ''
    child.stdout?.on('data', (d) => {
      out += d
      const m = /listening on (http:\/\/[\d.:]+)/.exec(out)
      if (m) resolve(m[1]!)
    })
    child.once('exit', (code) => reject(new Error(`runner exited with ${code}`)))
  })
  return { url, child }
}

/** Opens a terminal running `command` and attaches a socket to it. */
async function terminalSocket(url: string, sandbox: string, key: string, command: string[]) {
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
  const res = await fetch(`${url}/v1/sandboxes/${sandbox}/terminals`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ command }),
  })
  const { id } = (await res.json()) as { id: string }
  const ws = new WebSocket(
    `${url.replace('http', 'ws')}/v1/sandboxes/${sandbox}/terminals/${id}/socket?offset=0`,
    [TERMINAL_SUBPROTOCOL, `${BEARER_SUBPROTOCOL_PREFIX}${key}`],
    { perMessageDeflate: false },
  )
  let listener: (n: number) => void = () => {}
  let messages = 0
  ws.on('message', (data, isBinary) => {
    if (!isBinary) return
    messages += 1
    listener((data as Buffer).length - 8)
  })
  await new Promise<void>((resolve) => ws.once('message', () => resolve()))
  return {
    ws,
    id,
    /** Binary output messages received so far. */
    messages: () => messages,
    onBytes: (fn: (n: number) => void) => {
      listener = fn
    },
    close: async () => {
      ws.close()
      await fetch(`${url}/v1/sandboxes/${sandbox}/terminals/${id}`, { method: 'DELETE', headers })
    },
  }
}

async function main(): Promise<void> {
  const stateDir = mkdtempSync(join(tmpdir(), 'conch-term-bench-'))
  const apiKey = generateApiKey()
  const { url, child } = await startRunner(stateDir, apiKey)
  const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }
  try {
    const created = await fetch(`${url}/v1/sandboxes`, { method: 'POST', headers, body: '{}' })
    const sandbox = ((await created.json()) as { id: string }).id
    const rounds: {
      bareEchoMs: number
      echoMs: number
      bareMiBps: number
      MiBps: number
      messagesPerMiB: number
    }[] = []
    for (let round = 0; round < ROUNDS; round++) {
      const bareEchoMs = await bareEcho()
      const echo = await terminalSocket(url, sandbox, apiKey, ECHO)
      await new Promise((r) => setTimeout(r, 200))
      const echoMs = await echoP50({
        type: (k) => echo.ws.send(Buffer.from(k)),
        onBytes: (fn) => echo.onBytes(fn),
      })
      await echo.close()
      const bareMiBps = await bareThroughput()
      const flood = await terminalSocket(url, sandbox, apiKey, FLOOD)
      await new Promise((r) => setTimeout(r, 200))
      let got = 0
      const start = performance.now()
      flood.ws.send(Buffer.from('g'))
      await new Promise<void>((resolve) =>
        flood.onBytes((n) => {
          got += n
          if (got >= BYTES) resolve()
        }),
      )
      const MiBps = BYTES / 1048576 / ((performance.now() - start) / 1000)
      const messagesPerMiB = flood.messages() / (BYTES / 1048576)
      await flood.close()
      rounds.push({ bareEchoMs, echoMs, bareMiBps, MiBps, messagesPerMiB })
    }
    const r = (x: number) => Math.round(x * 1000) / 1000
    const result = {
      node: process.version,
      load: loadavg()[0],
      rounds: ROUNDS,
      keystrokes: KEYS,
      bytes: BYTES,
      echoP50Ms: r(median(rounds.map((x) => x.echoMs))),
      bareEchoP50Ms: r(median(rounds.map((x) => x.bareEchoMs))),
      echoRatioToBare: r(median(rounds.map((x) => x.echoMs / x.bareEchoMs))),
      throughputMiBps: r(median(rounds.map((x) => x.MiBps))),
      bareThroughputMiBps: r(median(rounds.map((x) => x.bareMiBps))),
      throughputRatioToBare: r(median(rounds.map((x) => x.MiBps / x.bareMiBps))),
      outputMessagesPerMiB: r(median(rounds.map((x) => x.messagesPerMiB))),
    }
    console.log(
      `\nterminal benchmark (${ROUNDS} rounds, ${process.version}, load ${loadavg()[0]!.toFixed(1)})\n`,
    )
    console.log(
      `  keystroke echo p50   ${result.echoP50Ms} ms  (bare node-pty ${result.bareEchoP50Ms} ms, ratio ${result.echoRatioToBare})`,
    )
    console.log(
      `  output throughput    ${result.throughputMiBps} MiB/s  (bare node-pty ${result.bareThroughputMiBps} MiB/s, ratio ${result.throughputRatioToBare}; ${result.outputMessagesPerMiB} messages per MiB)`,
    )
    const out = join(REPO, 'bench', 'results', 'terminal.json')
    mkdirSync(dirname(out), { recursive: true })
    writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`)
    console.log(`\nwrote ${out.slice(REPO.length + 1)}`)
    await fetch(`${url}/v1/sandboxes/${sandbox}`, { method: 'DELETE', headers })
  } finally {
    child.kill('SIGTERM')
    await new Promise((r) => child.once('exit', r))
    rmSync(stateDir, { recursive: true, force: true })
  }
}

await main()
