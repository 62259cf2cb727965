// A TCP connection inside the sandbox, relayed on one link channel.
//
// The agent dials 127.0.0.1:<port> (then ::1) from inside the sandbox's network namespace, so
// the runner reaches a sandbox server without the sandbox having any interface but loopback.
// Server → runner bytes are channel `data` under the runner's credit: when credit runs out the
// socket is paused, and the server's writes block in its kernel buffer. Runner → server bytes
// arrive as uploads; each chunk is written to the socket, and only once the socket has taken it
// (drained) does the agent grant the runner `credit` for that many bytes. So a server that never
// reads holds at most one window in the agent and nothing grows. The server closing ends the
// channel; the runner closing the channel destroys the socket.
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

/** Relays `socket` on `channel` until either side ends; returns at once. */
export function relaySocket(socket: Socket, channel: AgentChannel, clock: Clock): void {
  const started = clock.now()
  let offset = 0
  const finish = (frame: ChannelEndFrame): void => {
    channel.end(frame)
    socket.destroy()
  }
  socket.on('data', (chunk: Buffer) => {
    for (let at = 0; at < chunk.length; at += LIMITS.maxDataChunkBytes) {
      const piece = chunk.subarray(at, at + LIMITS.maxDataChunkBytes)
      if (!channel.data(offset, piece)) socket.pause()
      offset += piece.length
    }
  })
  channel.onResume(() => socket.resume())
  socket.on('end', () =>
    finish({ type: 'end', exitCode: null, timedOut: false, durationMs: clock.now() - started }),
  )
  socket.on('error', (error: NodeJS.ErrnoException) =>
    finish({
      type: 'error',
      error: { code: 'CONNECTION_LOST', message: `the sandbox server's connection failed: ${error.code}` },
    }),
  )
  socket.on('close', () =>
    finish({ type: 'end', exitCode: null, timedOut: false, durationMs: clock.now() - started }),
  )
  channel.onClose(() => socket.destroy())
  void pumpUploads(socket, channel)
}

async function pumpUploads(socket: Socket, channel: AgentChannel): Promise<void> {
  for await (const chunk of channel.uploads()) {
    if (socket.destroyed) return
    if (!socket.write(chunk)) {
      const open = await new Promise<boolean>((resolve) => {
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
      if (!open) return
    }
    channel.release(chunk.byteLength)
  }
  if (!socket.destroyed) socket.end()
}
