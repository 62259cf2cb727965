import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  BEARER_SUBPROTOCOL_PREFIX,
  ClientFrame,
  ERROR_STATUS,
  type ErrorCode,
  encodeOutputFrame,
  PROTOCOL_VERSION,
  ServerFrame,
  SHELL_SUBPROTOCOL,
} from '@conch/protocol'
import { WebSocketServer } from 'ws'
import { type Client, defaultScript, type FakeScript, FakeSession, type LogEntry } from './fake-session.ts'

// A small runner that speaks the real wire protocol over real sockets: REST for sessions and
// the shell WebSocket with offsets, replay, eviction and FIFO runs. Every frame it sends is
// parsed with the protocol's `ServerFrame` schema first, so the SDK is tested against frames
// the protocol allows. Commands are handled by a script the test provides; each session, its log
// and its run queue, and the default script are in fake-session.ts.

const decodeStdin = (frame: { stdin?: string | undefined; stdinEncoding?: string | undefined }) =>
  frame.stdin === undefined
    ? undefined
    : frame.stdinEncoding === 'base64'
      ? Buffer.from(frame.stdin, 'base64').toString('utf8')
      : frame.stdin

/** The fake runner; dispose it to close every socket. */
export class FakeRunner {
  readonly apiKey = 'conch_test_key'
  readonly sandboxId = 'sb_fake0000001'
  readonly sessions = new Map<string, FakeSession>()
  script: FakeScript = defaultScript
  /** While true, the runner sends nothing and answers no pings (a hung network path). */
  silent = false
  /** Announce `binary_output` and send output as binary frames (a runner that has it). */
  binaryOutput = false
  /** Put a run's start inside its exit when nothing came between them, for a client that asked (`start_in_exit`). */
  startInExit = false
  /** Exits sent with their run's start inside (`startOffset`). */
  foldedExits = 0
  /** When set, the next shell_run is swallowed and the socket torn down (lost in flight). */
  loseNextRun = false
  /** Connections accepted, for reconnect assertions. */
  connections = 0
  /** Query strings of the shell connections, in order. */
  readonly shellUrls: string[] = []
  /** The `type` of every frame clients sent, in order. */
  readonly clientFrameTypes: string[] = []
  url = ''
  readonly #server = createServer((req, res) => void this.#rest(req, res))
  readonly #wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) => (protocols.has(SHELL_SUBPROTOCOL) ? SHELL_SUBPROTOCOL : false),
  })
  #sessionSeq = 0

  static async start(): Promise<FakeRunner> {
    const runner = new FakeRunner()
    runner.#server.on('upgrade', (req, socket, head) => runner.#upgrade(req, socket, head))
    runner.#server.listen(0, '127.0.0.1')
    await once(runner.#server, 'listening')
    runner.url = `http://127.0.0.1:${(runner.#server.address() as AddressInfo).port}`
    return runner
  }

  session(id: string): FakeSession {
    const s = this.sessions.get(id)
    if (!s) throw new Error(`no fake session ${id}`)
    return s
  }

  /** Kills every client socket without a closing handshake, as a network failure would. */
  dropClients(): void {
    for (const s of this.sessions.values()) {
      for (const c of s.clients) c.ws.terminate()
      s.clients.clear()
    }
  }

  send(client: Client, frame: unknown): void {
    const parsed = ServerFrame.safeParse(frame)
    if (!parsed.success) throw new Error(`fake runner built an invalid frame: ${JSON.stringify(frame)}`)
    if (this.silent || client.ws.readyState !== 1) return
    client.ws.send(JSON.stringify(frame))
  }

  /** Sends text as is, valid or not, to every client of every session. */
  sendRaw(text: string): void {
    for (const s of this.sessions.values()) for (const c of s.clients) c.ws.send(text)
  }

  /**
   * Writes bytes straight onto every client's TCP socket, under the WebSocket framing: a runner
   * that breaks the WebSocket protocol itself (hostile-runner tests). `ws` keeps the socket in a
   * private field; this is test-only.
   */
  sendRawBytes(bytes: Uint8Array): void {
    for (const c of this.#wss.clients)
      (c as unknown as { _socket: { write(b: Uint8Array): void } })._socket.write(bytes)
  }

  /** Sends a raw binary message to every client (hostile-runner tests). */
  sendBinary(data: Uint8Array): void {
    for (const c of this.#wss.clients) c.send(data)
  }

  sendEntry(client: Client, e: LogEntry): void {
    const held = client.heldStart
    if (held) {
      client.heldStart = null
      if (e.kind === 'exit' && e.id === held.id) {
        const { kind: _, ...rest } = e
        this.foldedExits++
        this.send(client, { type: 'shell_exit', ...rest, startOffset: held.offset })
        return
      }
      this.send(client, { type: 'shell_start', ...held })
    }
    if (e.kind === 'start' && this.startInExit && client.foldsStarts) {
      const start = { id: e.id, offset: e.offset }
      client.heldStart = start
      // A start with nothing after it in this turn goes alone, as the runner's end of tick sends it.
      setImmediate(() => {
        if (client.heldStart !== start) return
        client.heldStart = null
        this.send(client, { type: 'shell_start', ...start })
      })
      return
    }
    if ((e.kind === 'out' || e.kind === 'err') && this.binaryOutput) {
      if (this.silent || client.ws.readyState !== 1) return
      client.ws.send(encodeOutputFrame(e.kind === 'out' ? 'stdout' : 'stderr', e.id, e.offset, e.bytes))
      return
    }
    if (e.kind === 'start') this.send(client, { type: 'shell_start', id: e.id, offset: e.offset })
    else if (e.kind === 'exit') {
      const { kind: _, ...rest } = e
      this.send(client, { type: 'shell_exit', ...rest })
    } else {
      const data =
        client.encoding === 'base64'
          ? Buffer.from(e.bytes).toString('base64')
          : Buffer.from(e.bytes).toString()
      this.send(client, {
        type: e.kind === 'out' ? 'shell_out' : 'shell_err',
        id: e.id,
        data,
        offset: e.offset,
      })
    }
  }

  #authorized(header: string | undefined, protocols: string | undefined): boolean {
    if (header === `Bearer ${this.apiKey}`) return true
    const list = (protocols ?? '').split(',').map((p) => p.trim())
    return list.includes(BEARER_SUBPROTOCOL_PREFIX + this.apiKey)
  }

  #upgrade(req: IncomingMessage, socket: import('node:stream').Duplex, head: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://x')
    if (!this.#authorized(req.headers.authorization, req.headers['sec-websocket-protocol'])) {
      socket.end('HTTP/1.1 401 Unauthorized\r\n\r\n')
      return
    }
    const session = this.sessions.get(url.searchParams.get('sessionId') ?? '')
    if (!session) {
      socket.end('HTTP/1.1 404 Not Found\r\n\r\n')
      return
    }
    this.#wss.handleUpgrade(req, socket, head, (ws) => {
      this.connections++
      this.shellUrls.push(url.search)
      const encoding = url.searchParams.get('encoding') === 'base64' ? 'base64' : 'utf8'
      const client: Client = { ws, encoding, live: false }
      ws.on('message', (data) => this.#onClientFrame(session, client, String(data)))
      ws.on('close', () => session.clients.delete(client))
      this.send(client, {
        type: 'hello',
        protocolVersion: PROTOCOL_VERSION,
        capabilities: [
          'shell',
          'reattach',
          'interrupt',
          'base64',
          'heartbeat',
          'pipelining',
          ...(this.binaryOutput ? (['binary_output'] as const) : []),
        ],
      })
      const requested = url.searchParams.get('offset')
      let from = requested === null ? session.offset : Number(requested)
      this.send(client, {
        type: 'shell_ready',
        sessionId: session.id,
        offset: from,
        encoding,
        running: session.running,
      })
      if (from < session.earliest) {
        this.send(client, {
          type: 'error',
          id: null,
          code: 'OUTPUT_LOST',
          message: `offset ${from} was evicted; earliest kept is ${session.earliest}`,
          details: { earliestOffset: session.earliest },
        })
        from = session.earliest
      }
      for (const e of session.log) if (e.offset >= from) this.sendEntry(client, e)
      this.send(client, { type: 'scrollback_end', offset: session.offset })
      client.live = true
      session.clients.add(client)
      if (session.closed) this.send(client, { type: 'shell_closed', ...session.closed })
    })
  }

  #onClientFrame(session: FakeSession, client: Client, text: string): void {
    if (this.silent) return
    const parsed = ClientFrame.safeParse(JSON.parse(text))
    if (!parsed.success) {
      this.send(client, { type: 'error', id: null, code: 'INVALID_FRAME', message: parsed.error.message })
      return
    }
    const frame = parsed.data
    this.clientFrameTypes.push(frame.type)
    switch (frame.type) {
      case 'shell_run':
        if (this.loseNextRun) {
          this.loseNextRun = false
          this.dropClients()
          return
        }
        if (session.closed) {
          this.send(client, { type: 'error', id: frame.id, code: 'SHELL_CLOSED', message: 'shell closed' })
          return
        }
        session.enqueue(frame.id, frame.command, decodeStdin(frame))
        return
      case 'shell_interrupt':
        session.interrupt?.()
        return
      case 'ping':
        this.send(client, { type: 'pong', ...(frame.t === undefined ? {} : { t: frame.t }) })
        return
      case 'hello':
        client.foldsStarts = frame.capabilities?.includes('start_in_exit') === true
        return
      case 'pong':
      case 'ack':
        return
    }
  }

  async #rest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const fail = (code: ErrorCode, message: string) => {
      res.writeHead(ERROR_STATUS[code], { 'content-type': 'application/json' })
      res.end(JSON.stringify({ error: { code, message } }))
    }
    const ok = (body: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify(body))
    }
    let raw = ''
    for await (const chunk of req) raw += String(chunk)
    if (!this.#authorized(req.headers.authorization, undefined)) return fail('UNAUTHORIZED', 'bad API key')
    const url = new URL(req.url ?? '/', 'http://x')
    const parts = url.pathname.split('/').filter(Boolean)
    // /v1/sandboxes/:id/...
    if (parts[0] !== 'v1' || parts[1] !== 'sandboxes') return fail('NOT_FOUND', `no route ${url.pathname}`)
    if (parts.length === 2) return fail('NOT_FOUND', 'the fake runner has one sandbox')
    if (parts[2] !== this.sandboxId) return fail('SANDBOX_NOT_FOUND', `sandbox ${parts[2]} not found`)
    if (parts.length === 3 && req.method === 'GET') {
      return ok({
        id: this.sandboxId,
        status: 'running',
        driver: 'fake',
        isolation: 'none',
        description: 'a fake',
        workdir: '/workspace',
        limits: {},
        metadata: {},
        createdAt: 1,
        deadReason: null,
      })
    }
    if (parts[3] === 'hang') return // never answers
    if (parts[3] !== 'sessions') return fail('NOT_FOUND', `no route ${url.pathname}`)
    if (parts.length === 4 && req.method === 'POST') {
      const body = JSON.parse(raw || '{}') as { id?: string }
      const id = body.id ?? `s${++this.#sessionSeq}`
      if (this.sessions.has(id)) return fail('SESSION_EXISTS', `session ${id} exists`)
      const s = new FakeSession(id, this)
      this.sessions.set(id, s)
      return ok(s.info())
    }
    const session = this.sessions.get(parts[4] ?? '')
    if (!session)
      return fail('SESSION_NOT_FOUND', `session ${parts[4]} not found in sandbox ${this.sandboxId}`)
    if (parts.length === 5 && req.method === 'GET') return ok(session.info())
    if (parts.length === 5 && req.method === 'DELETE') {
      this.sessions.delete(session.id)
      return ok({ ok: true })
    }
    if (parts[5] === 'interrupt') {
      session.interrupt?.()
      return ok({ ok: true })
    }
    return fail('NOT_FOUND', `no route ${url.pathname}`)
  }

  async [Symbol.asyncDispose](): Promise<void> {
    for (const c of this.#wss.clients) c.terminate()
    this.#server.closeAllConnections()
    this.#server.close()
    await once(this.#server, 'close').catch(() => {})
  }
}
