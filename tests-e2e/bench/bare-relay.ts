// The first hop of the bare reference: a WebSocket server (the `ws` library the runner uses)
// that forwards every message to a Unix socket and every chunk from it back as a binary
// message, one socket per WebSocket. No auth, no schemas, no state; backpressure only as much as
// the bytes need (the socket pauses while the WebSocket has too much unsent). It starts the
// bash holder (bare-bash-holder.ts) as its child, prints `port <n>` once both listen, and ends
// with its stdin.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createConnection } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { WebSocketServer } from 'ws'

/** Unsent WebSocket bytes above which the Unix socket is paused. */
const HIGH_WATER = 1024 * 1024

const dir = mkdtempSync(join(tmpdir(), 'conch-bare-'))
const path = join(dir, 'bash.sock')
const holder = spawn(
  process.execPath,
  [...process.execArgv, new URL('./bare-bash-holder.ts', import.meta.url).pathname, path],
  { stdio: ['pipe', 'pipe', 'inherit'] },
)
await new Promise<void>((resolve, reject) => {
  createInterface({ input: holder.stdout! }).once('line', () => resolve())
  holder.once('exit', (code) => reject(new Error(`bash holder exited with ${code}`)))
})

const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false })
wss.on('connection', (ws) => {
  const socket = createConnection(path)
  ws.on('message', (data) => socket.write(data as Buffer))
  socket.on('data', (chunk) => {
    ws.send(chunk, () => {
      if (socket.isPaused() && ws.bufferedAmount < HIGH_WATER) socket.resume()
    })
    if (ws.bufferedAmount >= HIGH_WATER) socket.pause()
  })
  ws.once('close', () => socket.destroy())
  socket.once('close', () => ws.close())
})
await new Promise<void>((resolve) => wss.once('listening', () => resolve()))
const address = wss.address()
if (address === null || typeof address === 'string') throw new Error('the relay listens on TCP')
process.stdout.write(`port ${address.port} holder ${holder.pid}\n`)

process.stdin.resume()
process.stdin.once('end', () => {
  holder.stdin?.end()
  holder.kill('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
  process.exit(0)
})
