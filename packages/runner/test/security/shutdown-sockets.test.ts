// Attack on the runner's shutdown: sockets that would hold it open. The HTTP server's close
// waits for every socket, upgraded ones included, so a relayed port WebSocket (which nothing
// else ends) held a shutdown open for as long as it stayed open, and a shell socket whose
// client stopped reading held it for ws's 30 s close timeout. A shutdown must end both; the
// test's timeout is what fails when one holds it.
import { connect, type Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { WebSocket } from 'ws'
import { portUrl, startSandboxServer } from '../ports/port-fixture.ts'
import { baseUrl, createSandbox, startRunner } from '../runner-fixture.ts'

/** Sends a WebSocket upgrade by hand, reads the runner's 101, then stops reading for good. */
function upgradeThenStopReading(
  base: string,
  path: string,
  headers: Record<string, string>,
): Promise<Socket> {
  const url = new URL(base)
  const lines = [
    `GET ${path} HTTP/1.1`,
    `host: ${url.host}`,
    'connection: Upgrade',
    'upgrade: websocket',
    'sec-websocket-version: 13',
    'sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==',
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ]
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname)
    let head = ''
    socket.on('error', reject)
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      socket.removeAllListeners('data')
      socket.pause()
      if (head.startsWith('HTTP/1.1 101')) resolve(socket)
      else reject(new Error(`upgrade refused: ${head.split('\r\n')[0]}`))
    })
    socket.write(`${lines.join('\r\n')}\r\n\r\n`)
  })
}

describe('attack: hold the runner open at shutdown', () => {
  it('ends a relayed port WebSocket and a shell socket whose client stopped reading', async () => {
    const runner = await startRunner({ listen: true })
    try {
      const id = await createSandbox(runner)
      const { port } = await startSandboxServer(runner, id)
      const echo = new WebSocket(portUrl(runner, id, port, '/ws').replace('http', 'ws'), {
        headers: runner.auth,
      })
      await new Promise<void>((resolve, reject) => {
        echo.once('open', () => resolve())
        echo.once('error', reject)
      })
      const echoClosed = new Promise<void>((resolve) => echo.once('close', () => resolve()))
      echo.on('error', () => {})
      const stalled = await upgradeThenStopReading(baseUrl(runner.app), `/v1/sandboxes/${id}/shell`, {
        'sec-websocket-protocol': 'conch.v1',
        authorization: runner.auth.authorization,
      })
      stalled.on('error', () => {})
      const stalledClosed = new Promise<void>((resolve) => stalled.once('close', () => resolve()))

      await runner[Symbol.asyncDispose]()
      await echoClosed
      // Reading again, the stalled client finds its connection ended by the runner.
      stalled.resume()
      await stalledClosed
      expect(runner.app.server.listening).toBe(false)
    } finally {
      await runner[Symbol.asyncDispose]()
    }
  })
})
