// A TCP connection inside the sandbox, relayed on one link channel.
//
// The agent dials 127.0.0.1:<port> (then ::1) from inside the sandbox's network namespace, so
// the runner reaches a sandbox server without the sandbox having any interface but loopback.
// Server → runner bytes are channel `data` under the runner's credit: when credit runs out the
// socket is paused, and the server's writes block in its kernel buffer. Runner → server bytes
// arrive as uploads; each chunk is written to the socket, and only once the socket has taken it
// (drained) does the agent grant the runner `credit` for that many bytes. So a server that never
// reads holds at most one window in the agent and nothing grows.
//
// Closing, as TCP does it: the runner's `end` half-closes the socket once every byte queued
// before it is written (the server reads them, then EOF). The runner's `close` ends the socket
// the same way, discarding what the server still sends, and destroys it after a bounded linger
// when the server does not take the rest. The link's loss (its connection closing) resets the
// connection at once. The server closing (EOF or error) ends the channel.
import { connect, type Socket } from 'node:net'
import { LIMITS } from '@conch/protocol/zod-free'
import type { AgentChannel, ChannelEndFrame } from './agent-channel.ts'
import { AgentError } from './agent-error.ts'
import type { Clock } from './clock.ts'

/** Loopback addresses tried in order: a server may listen on IPv4, IPv6 or both. */
const LOOPBACKS = ['127.0.0.1', '::1'] as const

/** Connects to `port` on the sandbox's loopback; PORT_NOT_LISTENING when nothing accepts. */
export async function dialLoopback(port: number): Promise<Socket> {
  let lastError: NodeJS.ErrnoException | undefined
  for (const host of LOOPBACKS) {
    try {
      return await new Promise<Socket>((resolve, reject) => {
        const socket = connect({ host, port, noDelay: true })
        socket.once('connect', () => {
          socket.off('error', reject)
          resolve(socket)
        })
        socket.once('error', reject)
      })
    } catch (error) {
      lastError = error as NodeJS.ErrnoException
    }
  }
  throw new AgentError(
    'PORT_NOT_LISTENING',
    `nothing listens on port ${port} inside the sandbox (${lastError?.code ?? 'refused'})`,
    { details: { port } },
  )
}

/** How long a connection the runner closed may take to deliver its last bytes before it is reset. */
export const TCP_LINGER_MS = 10_000

/** Relays `socket` on `channel` until either side ends; returns at once. */
export function relaySocket(
  socket: Socket,
  channel: AgentChannel,
  clock: Clock,
  lingerMs: number = TCP_LINGER_MS,
): void {
  const started = clock.now()
  let offset = 0
  /** True once this end sent the channel's terminal frame (the server closed). */
  let ended = false
  let lingerTimer: unknown
  const finish = (frame: ChannelEndFrame): void => {
    ended = true
    channel.end(frame)
  }
  const endFrame = (): ChannelEndFrame => ({
    type: 'end',
    exitCode: null,
    timedOut: false,
    durationMs: clock.now() - started,
  })
  /** Lets the socket write what it holds and close; resets it if that takes longer than `lingerMs`. */
  const linger = (): void => {
    if (lingerTimer !== undefined || socket.destroyed) return
    lingerTimer = clock.setTimer(lingerMs, () => {
      if (!socket.destroyed) socket.resetAndDestroy()
    })
    // Nobody reads the server's bytes any more; drop them so a server blocked writing can read.
    socket.resume()
  }
  socket.on('data', (chunk: Buffer) => {
    if (channel.done) return
    for (let at = 0; at < chunk.length; at += LIMITS.maxDataChunkBytes) {
      const piece = chunk.subarray(at, at + LIMITS.maxDataChunkBytes)
      if (!channel.data(offset, piece)) socket.pause()
      offset += piece.length
    }
  })
  channel.onResume(() => socket.resume())
  // The server's EOF; the socket ends its own side once its writes are out (allowHalfOpen off).
  socket.on('end', () => {
    finish(endFrame())
    linger()
  })
  socket.on('error', (error: NodeJS.ErrnoException) =>
    finish({
      type: 'error',
      error: { code: 'CONNECTION_LOST', message: `the sandbox server's connection failed: ${error.code}` },
    }),
  )
  socket.on('close', () => {
    if (lingerTimer !== undefined) clock.clearTimer(lingerTimer)
    finish(endFrame())
  })
  channel.onClose(() => {
    if (ended) return
    // The runner closed: the upload pump writes what arrived before and ends the socket.
    if (channel.endedByPeer) linger()
    // The link is gone: reset, as a peer that vanished does.
    else if (!socket.destroyed) socket.resetAndDestroy()
  })
  void pumpUploads(socket, channel)
}

/** Writes the runner's uploads to `socket` in order, granting credit as it takes them; then ends it. */
async function pumpUploads(socket: Socket, channel: AgentChannel): Promise<void> {
  const open = (): boolean => !socket.destroyed && !socket.writableEnded
  for await (const chunk of channel.uploads()) {
    if (!open()) return
    if (!socket.write(chunk)) {
      const drained = await new Promise<boolean>((resolve) => {
        const onDrain = (): void => {
          socket.off('close', onClose)
          resolve(true)
        }
        const onClose = (): void => {
          socket.off('drain', onDrain)
          resolve(false)
        }
        socket.once('drain', onDrain)
        socket.once('close', onClose)
      })
      if (!drained) return
    }
    channel.release(chunk.byteLength)
  }
  // The runner's `end` or `close`: a half-close after every queued byte (`end` flushes first).
  if (open()) socket.end()
}
