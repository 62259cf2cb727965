// Port relay benchmark: an HTTP server inside a sandbox, requested directly on its loopback port
// and through the runner's relay (`/v1/sandboxes/:id/ports/:port/…`), in the same run.
//
//   pnpm --filter @conch/runner bench      (writes bench/results/ports.json at the repo root)
//
// The runner is the real CLI in its own process with the local driver, so the server's port is
// also reachable directly from here: that direct request is the reference every figure is a
// ratio to. Latency is sequential small GETs on keep-alive connections (p50, p99); throughput is
// one large download and one large upload.
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { Agent, request } from 'node:http'
import { loadavg, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { generateApiKey } from '../src/credentials.ts'

const HERE = dirname(fileURLToPath(import.meta.url))
const REPO = join(HERE, '..', '..', '..')
const REQUESTS = Number(process.env.BENCH_PORT_REQUESTS ?? 1000)
const BYTES = Number(process.env.BENCH_PORT_BYTES ?? 256 * 1024 * 1024)

const SERVER = `
const http = require('node:http')
const chunk = Buffer.alloc(1024 * 1024, 97)
http.createServer((req, res) => {
  if (req.url.startsWith('/big')) {
    let left = Number(new URL(req.url, 'http://x').searchParams.get('bytes'))
    res.writeHead(200, { 'content-length': left })
    const more = () => {
      while (left > 0) {
        const n = Math.min(left, chunk.length)
        left -= n
        if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return res.once('drain', more)
      }
      res.end()
    }
    return more()
  }
  let n = 0
  req.on('data', (c) => { n += c.length })
  req.on('end', () => res.end(String(n)))
}).listen(0, '127.0.0.1', function () { console.log('PORT=' + this.address().port) })
`

function percentile(samples: readonly number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
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
      '--drivers',
      'local',
      '--unsafe-local',
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

interface Target {
  port: number
  prefix: string
  headers: Record<string, string>
}

function send(agent: Agent, target: Target, method: string, path: string, body?: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: target.port,
      method,
      path: `${target.prefix}${path}`,
      agent,
      headers: { ...target.headers, ...(body ? { 'content-length': String(body.length) } : {}) },
    })
    req.on('response', (res) => {
      let bytes = 0
      res.on('data', (c: Buffer) => {
        bytes += c.length
      })
      res.on('end', () => resolve(bytes))
    })
    req.on('error', reject)
    if (body) {
      // The upload is written in 1 MiB pieces so it streams rather than copies.
      let at = 0
      const more = (): void => {
        while (at < body.length) {
          const piece = body.subarray(at, at + 1024 * 1024)
          at += piece.length
          if (!req.write(piece)) {
            req.once('drain', more)
            return
          }
        }
        req.end()
      }
      more()
    } else req.end()
  })
}

async function measure(
  target: Target,
): Promise<{ p50: number; p99: number; downMBps: number; upMBps: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  for (let i = 0; i < 50; i++) await send(agent, target, 'GET', '/small')
  const samples: number[] = []
  for (let i = 0; i < REQUESTS; i++) {
    const t = performance.now()
    await send(agent, target, 'GET', '/small')
    samples.push(performance.now() - t)
  }
  let t = performance.now()
  const got = await send(agent, target, 'GET', `/big?bytes=${BYTES}`)
  const downMs = performance.now() - t
  if (got !== BYTES) throw new Error(`download got ${got} of ${BYTES} bytes`)
  const body = Buffer.alloc(BYTES, 98)
  t = performance.now()
  await send(agent, target, 'POST', '/upload', body)
  const upMs = performance.now() - t
  agent.destroy()
  const r = (x: number): number => Math.round(x * 1000) / 1000
  const mb = BYTES / (1024 * 1024)
  return {
    p50: r(percentile(samples, 50)),
    p99: r(percentile(samples, 99)),
    downMBps: r(mb / (downMs / 1000)),
    upMBps: r(mb / (upMs / 1000)),
  }
}

async function main(): Promise<void> {
  const stateDir = mkdtempSync(join(tmpdir(), 'conch-port-bench-'))
  const apiKey = generateApiKey()
  const { url, child } = await startRunner(stateDir, apiKey)
  const auth = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }
  try {
    const created = (await (
      await fetch(`${url}/v1/sandboxes`, { method: 'POST', headers: auth, body: '{}' })
    ).json()) as { id: string }
    const id = created.id
    await fetch(`${url}/v1/sandboxes/${id}/files?path=/workspace/server.js`, {
      method: 'PUT',
      headers: { authorization: auth.authorization },
      body: SERVER,
    })
    const proc = (await (
      await fetch(`${url}/v1/sandboxes/${id}/processes`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ command: 'exec node server.js' }),
      })
    ).json()) as { id: string }
    let port = 0
    while (port === 0) {
      const out = (await (
        await fetch(`${url}/v1/sandboxes/${id}/processes/${proc.id}/output`, { headers: auth })
      ).json()) as { stdout: string }
      port = Number(/PORT=(\d+)/.exec(out.stdout)?.[1] ?? 0)
      if (port === 0) await new Promise((resolve) => setTimeout(resolve, 50))
    }
    const runnerPort = Number(new URL(url).port)
    const direct = await measure({ port, prefix: '', headers: {} })
    const relayed = await measure({
      port: runnerPort,
      prefix: `/v1/sandboxes/${id}/ports/${port}`,
      headers: { authorization: auth.authorization },
    })
    const ratio = (a: number, b: number): number => Math.round((a / b) * 100) / 100
    const result = {
      date: new Date().toISOString(),
      loadavg: loadavg().map((l) => Math.round(l * 100) / 100),
      requests: REQUESTS,
      bytes: BYTES,
      direct,
      relayed,
      ratios: {
        p50: ratio(relayed.p50, direct.p50),
        p99: ratio(relayed.p99, direct.p99),
        downloadThroughput: ratio(relayed.downMBps, direct.downMBps),
        uploadThroughput: ratio(relayed.upMBps, direct.upMBps),
      },
    }
    console.log(JSON.stringify(result, null, 2))
    const out = join(REPO, 'bench', 'results', 'ports.json')
    mkdirSync(dirname(out), { recursive: true })
    writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`)
  } finally {
    child.kill('SIGTERM')
    await new Promise((resolve) => child.once('exit', resolve))
    rmSync(stateDir, { recursive: true, force: true })
  }
}

await main()
