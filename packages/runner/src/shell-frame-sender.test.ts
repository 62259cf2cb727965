// The shell socket's sender frames text messages itself and writes them onto the socket under
// the WebSocket, beside what ws writes there (binary messages, pings). A strict client (ws,
// which checks every header bit, length and UTF-8) must read every message whole, in the order
// sent, across each length encoding of the frame header.
import { once } from 'node:events'
import { createServer, type Server } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { ShellFrameSender } from './shell-frame-sender.ts'

let server: Server | undefined
afterEach(() => {
  server?.closeAllConnections()
  server?.close()
  server = undefined
})

/** A server whose one connection gets a sender over the upgraded socket, as the runner does; and a ws client. */
async function connected(awaiting: boolean) {
  const wss = new WebSocketServer({ noServer: true })
  const flushed: number[] = []
  const writes: unknown[] = []
  let serverWs: WebSocket | undefined
  server = createServer()
  const sender = new Promise<ShellFrameSender>((resolve) => {
    server!.on('upgrade', (request, socket, head) => {
      const write = socket.write.bind(socket) as (...args: unknown[]) => boolean
      socket.write = ((...args: unknown[]) => {
        writes.push(args[0])
        return write(...args)
      }) as typeof socket.write
      wss.handleUpgrade(request, socket, head, (ws) => {
        serverWs = ws
        resolve(
          new ShellFrameSender({
            ws,
            socket: socket as Socket,
            onError: () => {},
            awaitingFlush: () => awaiting,
            onFlushed: () => flushed.push(1),
          }),
        )
      })
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`)
  const received: { text: string | null; binary: Buffer | null }[] = []
  const errors: Error[] = []
  client.on('message', (data, isBinary) =>
    received.push(isBinary ? { text: null, binary: data as Buffer } : { text: String(data), binary: null }),
  )
  client.on('error', (e) => errors.push(e))
  await once(client, 'open')
  const ready = await sender
  writes.length = 0
  return { sender: ready, ws: serverWs!, client, received, errors, flushed, writes }
}

/** Texts at each boundary of the header's length encoding, in ASCII and multi-byte UTF-8. */
const TEXTS = [
  '',
  'x',
  'a'.repeat(125),
  'a'.repeat(126),
  `${'é'.repeat(62)}a`,
  '中'.repeat(42),
  '😀'.repeat(256),
  '中'.repeat(1024),
  '中'.repeat(1025),
  'b'.repeat(65_535),
  'b'.repeat(65_536),
  '😀'.repeat(70_000),
  'c'.repeat(300_000),
]

describe('ShellFrameSender', () => {
  for (const awaiting of [false, true]) {
    it(`delivers text frames of every length whole and in order between ws's own messages${awaiting ? ', reporting each write' : ''}`, async () => {
      const { sender, client, received, errors, flushed } = await connected(awaiting)
      let n = 0
      for (const text of TEXTS) {
        sender.sendData(text)
        sender.sendData(Buffer.from([n++, 255]))
        sender.send({ type: 'pong', t: n })
      }
      await vi.waitFor(() => expect(received.length).toBeGreaterThanOrEqual(TEXTS.length * 3), {
        timeout: 10_000,
        interval: 5,
      })
      expect(errors).toEqual([])
      expect(received).toHaveLength(TEXTS.length * 3)
      for (let i = 0; i < TEXTS.length; i++) {
        expect(received[3 * i]!.text).toBe(TEXTS[i])
        expect(received[3 * i + 1]!.binary).toEqual(Buffer.from([i, 255]))
        expect(JSON.parse(received[3 * i + 2]!.text!)).toEqual({ type: 'pong', t: i + 1 })
      }
      if (awaiting) expect(flushed).toHaveLength(TEXTS.length * 3)
      client.close()
    })
  }

  it("writes a tick's text frames in one socket write, whole and in order", async () => {
    const { sender, client, received, errors, writes } = await connected(false)
    for (let i = 0; i < 200; i++) sender.send({ type: 'pong', t: i })
    sender.sendData('中'.repeat(30_000))
    await vi.waitFor(() => expect(received).toHaveLength(201), { timeout: 10_000, interval: 5 })
    expect(errors).toEqual([])
    expect(writes).toHaveLength(1)
    expect(received.slice(0, 200).map((m) => JSON.parse(m.text!).t)).toEqual([...Array(200).keys()])
    expect(received[200]!.text).toBe('中'.repeat(30_000))
    client.close()
  })

  it('puts the text sent before a close ahead of the close frame once flushed', async () => {
    const { sender, ws, client, received, errors } = await connected(false)
    sender.send({ type: 'pong', t: 1 })
    sender.flush()
    ws.close(4401, 'UNAUTHORIZED')
    const [code, reason] = await once(client, 'close')
    expect([code, String(reason)]).toEqual([4401, 'UNAUTHORIZED'])
    expect(received.map((m) => m.text)).toEqual([JSON.stringify({ type: 'pong', t: 1 })])
    expect(errors).toEqual([])
  })

  it('never writes held text after a close frame ws wrote first', async () => {
    const { sender, ws, client, received, errors } = await connected(false)
    sender.send({ type: 'pong', t: 1 })
    ws.close(1000, 'bye')
    const [code] = await once(client, 'close')
    expect(code).toBe(1000)
    expect(received).toEqual([])
    expect(errors).toEqual([])
  })

  it('sends nothing once the socket is closing', async () => {
    const { sender, client, received } = await connected(false)
    sender.sendData('before')
    const closed = once(client, 'close')
    client.close()
    await closed
    sender.sendData('after')
    expect(received.map((m) => m.text)).toEqual(['before'])
  })
})
