import { mkdtempSync, rmSync } from 'node:fs'
import { createConnection, createServer, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connectLinkSocket } from '../src/link-socket.ts'

/** Two connected ends of a real Unix socket, and a cleanup. */
export interface SocketPair {
  /** The connecting end. */
  a: Socket
  /** The accepted end. */
  b: Socket
  /** Destroys both ends and removes the socket file. */
  close: () => void
}

/**
 * Connects two sockets through a Unix socket in a fresh temp directory. With `slabReads` the
 * connecting end is made by `connectLinkSocket`, as the runner's is, and reads into slabs.
 */
export async function socketPair(options: { slabReads?: boolean } = {}): Promise<SocketPair> {
  const dir = mkdtempSync(join(tmpdir(), 'conch-link-'))
  const path = join(dir, 'link.sock')
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(path, resolve))
  const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve))
  const a = options.slabReads ? connectLinkSocket(path) : createConnection(path)
  await new Promise<void>((resolve) => a.once('connect', resolve))
  const b = await accepted
  server.close()
  return {
    a,
    b,
    close: () => {
      a.destroy()
      b.destroy()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
