// How a relayed TCP connection (`tcp.connect`) closes, against real sockets: a sandbox server
// that reads until EOF and answers with the byte count and a hash. The runner's `end` and its
// `close` deliver every byte sent before them (then EOF); the link's loss resets the connection;
// a server that never reads does not keep a closed connection alive past the linger.
import { createHash, randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createServer, type Server, type Socket } from 'node:net'
import { LIMITS } from '@conch/protocol'
import { describe, expect, vi } from 'vitest'
import type { AgentClient, Received } from './agent-client.ts'
import { servedAgentTest } from './served-agent.ts'

const test = servedAgentTest()
const shortLinger = servedAgentTest({ tcpLingerMs: 50 })

const CH = 7
const UPLOAD_BYTES = 8 * 1024 * 1024

/** What the sandbox server saw on its one connection. */
interface Seen {
  bytes: number
  sha: string
  eof: boolean
  error: string | null
}

/** A server on 127.0.0.1 that hashes what it reads until EOF, then replies `<count> <sha256>`. */
async function countingServer(): Promise<{ server: Server; port: number; seen: Promise<Seen> }> {
  let report: (seen: Seen) => void = () => {}
  const seen = new Promise<Seen>((resolve) => {
    report = resolve
  })
  const server = createServer((socket) => {
    const hash = createHash('sha256')
    let bytes = 0
    socket.on('data', (chunk: Buffer) => {
      bytes += chunk.length
      hash.update(chunk)
    })
    socket.on('end', () => {
      const sha = hash.digest('hex')
      socket.end(`${bytes} ${sha}`)
      report({ bytes, sha, eof: true, error: null })
    })
    socket.on('error', (error: NodeJS.ErrnoException) =>
      report({ bytes, sha: '', eof: false, error: error.code ?? 'error' }),
    )
  })
  return { server, port: await listen(server), seen }
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  return address.port
}

/** The runner's end of one TCP channel, speaking the raw link: uploads under the agent's credit. */
class RelayedTcp {
  sent = 0
  acked = 0
  readonly replies: Buffer[] = []
  terminal: Received | undefined
  readonly #wakers = new Set<() => void>()

  readonly client: AgentClient

  constructor(client: AgentClient) {
    this.client = client
    client.onFrame = (frame) => {
      if (!('ch' in frame) || frame.ch !== CH) return true
      if (frame.type === 'credit') this.acked += frame.bytes
      else if (frame.type === 'data') {
        this.replies.push(Buffer.from(frame.payload))
        client.send({ type: 'credit', ch: CH, bytes: frame.payload.byteLength })
      } else if (frame.type === 'end' || frame.type === 'error') this.terminal = frame
      this.#wake()
      return false
    }
  }

  static async open(client: AgentClient, port: number): Promise<RelayedTcp> {
    const tcp = new RelayedTcp(client)
    await client.call('tcp.connect', { port, ch: CH })
    return tcp
  }

  /** Sends `bytes` as `data` frames, never more than the window ahead of the agent's credit. */
  async upload(bytes: Buffer): Promise<void> {
    for (let at = 0; at < bytes.length; at += LIMITS.maxDataChunkBytes) {
      const chunk = bytes.subarray(at, at + LIMITS.maxDataChunkBytes)
      await this.until(() => this.sent + chunk.length - this.acked <= LIMITS.channelWindowBytes)
      this.client.send({ type: 'data', ch: CH }, chunk)
      this.sent += chunk.length
      this.#wake()
    }
  }

  #wake(): void {
    for (const wake of [...this.#wakers]) wake()
  }

  /** Resolves once `done()` holds, checked after every frame and every send. */
  until(done: () => boolean): Promise<void> {
    if (done()) return Promise.resolve()
    return new Promise((resolve) => {
      const check = (): void => {
        if (!done()) return
        this.#wakers.delete(check)
        resolve()
      }
      this.#wakers.add(check)
    })
  }
}

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex')

/** Whether /proc/net/tcp{,6} still lists a connection between local ports `a` and `b`. */
function connectionListed(a: number, b: number): boolean {
  const ports = new Set([`${hex(a)}:${hex(b)}`, `${hex(b)}:${hex(a)}`])
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const [, local, remote] = line.trim().split(/\s+/)
      if (local && remote && ports.has(`${local.split(':')[1]}:${remote.split(':')[1]}`)) return true
    }
  }
  return false
}
const hex = (port: number): string => port.toString(16).toUpperCase().padStart(4, '0')

describe('closing a relayed TCP connection', () => {
  test("an 8 MiB upload ended at once reaches the server whole, and the server's answer comes back", async ({
    agent,
  }) => {
    const { server, port, seen } = await countingServer()
    try {
      const tcp = await RelayedTcp.open(await agent.connect(), port)
      const body = randomBytes(UPLOAD_BYTES)
      await tcp.upload(body)
      tcp.client.send({ type: 'end', ch: CH })
      await tcp.until(() => tcp.terminal !== undefined)
      expect(tcp.terminal?.type).toBe('end')
      expect(Buffer.concat(tcp.replies).toString()).toBe(`${UPLOAD_BYTES} ${sha256(body)}`)
      expect(await seen).toEqual({ bytes: UPLOAD_BYTES, sha: sha256(body), eof: true, error: null })
    } finally {
      server.close()
    }
  })

  test('a runner that sends and closes the channel at once loses nothing: the server reads it all, then EOF', async ({
    agent,
  }) => {
    const { server, port, seen } = await countingServer()
    try {
      const tcp = await RelayedTcp.open(await agent.connect(), port)
      const body = randomBytes(UPLOAD_BYTES)
      await tcp.upload(body)
      tcp.client.send({ type: 'close', ch: CH })
      expect(await seen).toEqual({ bytes: UPLOAD_BYTES, sha: sha256(body), eof: true, error: null })
    } finally {
      server.close()
    }
  })

  test('end then close at once (a stream finished and destroyed) also delivers every byte', async ({
    agent,
  }) => {
    const { server, port, seen } = await countingServer()
    try {
      const tcp = await RelayedTcp.open(await agent.connect(), port)
      const body = randomBytes(UPLOAD_BYTES)
      await tcp.upload(body)
      tcp.client.send({ type: 'end', ch: CH })
      tcp.client.send({ type: 'close', ch: CH })
      expect(await seen).toEqual({ bytes: UPLOAD_BYTES, sha: sha256(body), eof: true, error: null })
    } finally {
      server.close()
    }
  })

  test('the link dropping mid-upload resets the connection: the server sees ECONNRESET, never a clean EOF', async ({
    agent,
  }) => {
    const { server, port, seen } = await countingServer()
    try {
      const tcp = await RelayedTcp.open(await agent.connect(), port)
      await tcp.upload(randomBytes(2 * 1024 * 1024))
      tcp.client.close()
      const result = await seen
      expect(result.eof).toBe(false)
      expect(result.error).toBe('ECONNRESET')
    } finally {
      server.close()
    }
  })

  shortLinger(
    'a server that never reads does not keep a closed connection: it is reset after the linger',
    async ({ agent }) => {
      let accepted: (socket: Socket) => void = () => {}
      const connection = new Promise<Socket>((resolve) => {
        accepted = resolve
      })
      // Paused from the start: the server reads nothing, so the agent's writes back up.
      const server = createServer({ pauseOnConnect: true }, (socket) => {
        socket.on('error', () => {})
        accepted(socket)
      })
      const port = await listen(server)
      try {
        const tcp = await RelayedTcp.open(await agent.connect(), port)
        const socket = await connection
        const agentPort = socket.remotePort ?? 0
        // More than the kernel buffers (megabytes on loopback) and one window hold: the upload
        // stalls on credit.
        void tcp.upload(randomBytes(4 * UPLOAD_BYTES))
        await tcp.until(() => tcp.sent + LIMITS.maxDataChunkBytes - tcp.acked > LIMITS.channelWindowBytes)
        expect(connectionListed(port, agentPort)).toBe(true)
        tcp.client.send({ type: 'close', ch: CH })
        await vi.waitFor(() => expect(connectionListed(port, agentPort)).toBe(false), {
          timeout: 30_000,
          interval: 20,
        })
        socket.destroy()
      } finally {
        server.close()
      }
    },
  )
})
