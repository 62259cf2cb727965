// A Unix socket for one end of the link whose reads go into slabs (see slab-reader.ts). The end
// that opens the connection (the runner) creates its socket here; an endpoint built on such a
// socket decodes frames in place instead of from Node's per-read buffers. Any other stream
// (an accepted socket, an SSH channel) works as before, through `FrameDecoder`.
import { connect, type Socket } from 'node:net'
import { SlabReader } from './slab-reader.ts'

const readers = new WeakMap<Socket, SlabReader>()

/**
 * Opens a connection to the Unix socket at `path`, reading into slabs. Until an endpoint takes
 * the socket over, the first read waits in the slab and reading pauses, so a peer cannot make
 * the unattached socket hold more than one read.
 */
export function connectLinkSocket(path: string): Socket {
  const reader = new SlabReader()
  const socket = connect({
    path,
    onread: {
      buffer: () => reader.room(),
      callback: (n: number) => {
        reader.wrote(n)
        // False pauses reading until the endpoint attaches (it resumes the socket).
        return reader.attached
      },
    },
  })
  readers.set(socket, reader)
  return socket
}

/** The slab reader of a socket made by `connectLinkSocket`, or undefined for any other stream. */
export function slabReaderOf(stream: object): SlabReader | undefined {
  return readers.get(stream as Socket)
}
