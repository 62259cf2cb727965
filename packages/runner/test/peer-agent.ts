// A small agent peer for runner tests that must not depend on the real agent: a real Unix-socket
// server speaking the real agent frames, with sessions whose runs are `bash -c` (no state kept
// between runs) and an output log per session for replay. Paired with `PeerDriver`, a
// SandboxDriver that "starts" this peer in-process — the fake sits at the VM boundary.
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { connect, createServer, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Duplex } from 'node:stream'
import { encodeFrame, FrameDecoder } from '@conch/link'
import { type AgentFrame, LINK_VERSION, type WireError } from '@conch/protocol'
import { linkProof } from '@conch/protocol/link-proof'
import {
  type DriverSandbox,
  type Liveness,
  linkSecretOf,
  type SandboxDriver,
  type SandboxSpec,
} from '../src/drivers/sandbox-driver.ts'

interface Session {
  id: string
  log: { stream: 'stdout' | 'stderr'; run: string | null; offset: number; bytes: Buffer }[]
  offset: number
  channels: Set<number>
  queue: Promise<void>
  running: string | null
}

/** The peer agent of one sandbox. */
export class PeerAgent {
  readonly server: Server
  readonly path: string
  readonly root: string
  readonly #secret: string
  readonly sessions = new Map<string, Session>()
  socket: Socket | null = null
  /** Errors to answer calls of a method with, as a hostile agent would send them. */
  readonly failures = new Map<string, unknown>()

  constructor(path: string, root: string, secret: string) {
    this.path = path
    this.root = root
    this.#secret = secret
    this.server = createServer((socket) => this.#serve(socket))
  }

  listen(): Promise<void> {
    return new Promise((resolve) => this.server.listen(this.path, resolve))
  }

  close(): Promise<void> {
    this.socket?.destroy()
    return new Promise((resolve) => this.server.close(() => resolve()))
  }

  #send(header: AgentFrame, payload?: Uint8Array): void {
    this.socket?.write(encodeFrame(header, payload))
  }

  #serve(socket: Socket): void {
    this.socket?.destroy()
    this.socket = socket
    const decoder = new FrameDecoder()
    socket.on('error', () => {})
    socket.on('data', (chunk) => {
      for (const r of decoder.push(chunk)) {
        if (!r.ok) continue
        const f = r.frame.header as {
          type: string
          id: number
          method: string
          params: Record<string, never>
        }
        if (f.type === 'hello') {
          this.#send({
            type: 'hello',
            linkVersion: LINK_VERSION,
            agentVersion: 'peer',
            pid: process.pid,
            startedAt: 1,
            nonce: '0'.repeat(64),
            proof: linkProof(this.#secret, 'agent', String((f as unknown as { nonce: string }).nonce)),
          })
        } else if (f.type === 'call') {
          try {
            const result = this.#call(f.method, f.params)
            this.#send({ type: 'result', id: f.id, result })
          } catch (error) {
            this.#send({ type: 'fail', id: f.id, error: error as WireError })
          }
        } else if (f.type === 'close') {
          for (const s of this.sessions.values()) s.channels.delete((f as unknown as { ch: number }).ch)
        } else if (f.type === 'ping') {
          this.#send({ type: 'pong', n: (f as unknown as { n: number }).n })
        }
      }
    })
  }

  #info(s: Session) {
    return {
      id: s.id,
      status: 'open',
      cwd: this.root,
      commandTimeoutMs: 30_000,
      cleanEnv: false,
      pid: 1,
      createdAt: 1,
      offset: s.offset,
      running: s.running,
      queued: 0,
      closed: null,
    }
  }

  #session(id: string, create: boolean): Session {
    let s = this.sessions.get(id)
    if (!s && (create || id === 'default')) {
      s = { id, log: [], offset: 0, channels: new Set(), queue: Promise.resolve(), running: null }
      this.sessions.set(id, s)
    }
    if (!s) throw { code: 'SESSION_NOT_FOUND', message: `no session ${id}` }
    return s
  }

  #call(method: string, p: Record<string, unknown>): unknown {
    if (this.failures.has(method)) throw this.failures.get(method)
    switch (method) {
      case 'session.create': {
        const id = String(p.id ?? `s${this.sessions.size + 1}`)
        if (this.sessions.has(id)) throw { code: 'SESSION_EXISTS', message: `session ${id} exists` }
        return this.#info(this.#session(id, true))
      }
      case 'session.list':
        return { sessions: [...this.sessions.values()].map((s) => this.#info(s)) }
      case 'session.attach': {
        const s = this.#session(String(p.sessionId), false)
        const ch = Number(p.ch)
        const from = p.offset === undefined ? s.offset : Number(p.offset)
        const earliest = s.log[0]?.offset ?? s.offset
        if (from < earliest) {
          throw { code: 'OUTPUT_LOST', message: 'evicted', details: { earliestOffset: earliest } }
        }
        queueMicrotask(() => {
          for (const e of s.log) {
            if (e.offset + e.bytes.byteLength <= from) continue
            const cut = Math.max(0, from - e.offset)
            this.#send(
              { type: output(e.stream), ch, id: e.run, offset: e.offset + cut },
              e.bytes.subarray(cut),
            )
          }
          this.#send({ type: 'scrollback_end', ch, offset: s.offset })
          s.channels.add(ch)
        })
        return this.#info(s)
      }
      case 'session.run': {
        const s = this.#session(String(p.sessionId), true)
        const run = String(p.id)
        s.queue = s.queue.then(() => this.#exec(s, run, String(p.command)))
        return {}
      }
      case 'session.interrupt':
        return {}
      default:
        throw { code: 'BAD_REQUEST', message: `peer does not implement ${method}` }
    }
  }

  #exec(s: Session, run: string, command: string): Promise<void> {
    return new Promise((resolve) => {
      const started = Date.now()
      s.running = run
      for (const ch of s.channels) this.#send({ type: 'shell_start', ch, id: run, offset: s.offset })
      const child = spawn('bash', ['-c', command], { cwd: this.root, stdio: ['ignore', 'pipe', 'pipe'] })
      const emit = (stream: 'stdout' | 'stderr') => (bytes: Buffer) => {
        s.log.push({ stream, run, offset: s.offset, bytes })
        for (const ch of s.channels)
          this.#send({ type: output(stream), ch, id: run, offset: s.offset }, bytes)
        s.offset += bytes.byteLength
      }
      child.stdout.on('data', emit('stdout'))
      child.stderr.on('data', emit('stderr'))
      child.on('close', (code) => {
        s.running = null
        for (const ch of s.channels) {
          this.#send({
            type: 'shell_exit',
            ch,
            id: run,
            code: code ?? 1,
            timedOut: false,
            durationMs: Date.now() - started,
            offset: s.offset,
          })
        }
        resolve()
      })
    })
  }
}

/** The link frame that carries a stream's output. */
function output(stream: 'stdout' | 'stderr'): 'shell_out' | 'shell_err' {
  return stream === 'stdout' ? 'shell_out' : 'shell_err'
}

/**
 * A driver whose sandboxes are PeerAgents in this process, in a temp dir of its own that
 * disposing it removes (`await using`, so a failing test removes it too).
 */
export class PeerDriver implements SandboxDriver, AsyncDisposable {
  readonly name = 'local'
  readonly isolation = 'none' as const
  readonly description = 'peer agent for tests'
  readonly peers = new Map<string, PeerAgent>()
  readonly #dir = mkdtempSync(join(tmpdir(), 'conch-peer-'))

  limitsProblem(limits: object): string | null {
    return Object.keys(limits).length === 0 ? null : 'the peer driver enforces no limits'
  }

  async create(spec: SandboxSpec): Promise<DriverSandbox> {
    const root = join(this.#dir, spec.id)
    mkdirSync(root, { recursive: true })
    return {
      id: spec.id,
      workdir: root,
      state: { socketPath: join(this.#dir, `${spec.id}.sock`), linkSecret: spec.linkSecret },
    }
  }

  async startAgent(sandbox: DriverSandbox): Promise<DriverSandbox> {
    const peer = new PeerAgent(String(sandbox.state.socketPath), sandbox.workdir, linkSecretOf(sandbox))
    await peer.listen()
    this.peers.set(sandbox.id, peer)
    return sandbox
  }

  connect(sandbox: DriverSandbox): Promise<Duplex> {
    return new Promise((resolve, reject) => {
      const s = connect(String(sandbox.state.socketPath), () => resolve(s))
      s.once('error', reject)
    })
  }

  async isAlive(sandbox: DriverSandbox): Promise<Liveness> {
    return this.peers.has(sandbox.id)
      ? { alive: true, reason: null }
      : { alive: false, reason: 'peer stopped' }
  }

  async stop(sandbox: DriverSandbox): Promise<void> {
    await this.peers.get(sandbox.id)?.close()
    this.peers.delete(sandbox.id)
  }

  async destroy(sandbox: DriverSandbox): Promise<void> {
    await this.stop(sandbox)
  }

  /** Closes every peer and removes the driver's dir. */
  async dispose(): Promise<void> {
    for (const peer of this.peers.values()) await peer.close()
    this.peers.clear()
    rmSync(this.#dir, { recursive: true, force: true })
  }

  /** `await using` disposes the driver. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose()
  }
}
