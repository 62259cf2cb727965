// Reads a child's output pipe into pooled buffers (read-buffer-pool.ts) instead of a fresh
// buffer per read.
//
// Node reads into caller memory only for a socket created with the `onread` option, and a
// child's output sockets are created by `child_process` or `childStdioSpawn`. So the pipe's socket is given the same
// three fields that option sets (found by their symbols' names) and its handle the first buffer.
// Node then calls back with each read and asks for the next buffer; `pause()` and `resume()`
// stop and restart the handle's reading as for any such socket. Where a Node version lacks any
// of these, nothing changes and the caller reads through `data` events as before.
//
// A read shorter than `COPY_BELOW_BYTES` (half a buffer: a line, a prompt) is handed on as a copy
// and its buffer read into again at once, so a quiet shell pins no 64 KiB buffer per line and a
// record never keeps more than twice its bytes (the log counts the whole buffer); a longer read is handed
// on as a view, under the buffer's lease, and the next read gets a free buffer if anyone kept it.
import type { Readable } from 'node:stream'
import type { ReadBufferPool, ReadLease } from './read-buffer-pool.ts'

/** Reads shorter than this are copied out of the pooled buffer. */
export const COPY_BELOW_BYTES = 32 * 1024

/** Fields of `net.Socket` that its `onread` option sets (Node 18 to 24). */
const ONREAD_FIELDS = ['kBuffer', 'kBufferCb', 'kBufferGen'] as const

/**
 * Makes `socket` (a child's stdout or stderr) read into buffers from `pool`, handing each read's
 * bytes to `onRead` (a view under the buffer's lease, or a copy). Returns false, changing
 * nothing, when this Node cannot.
 */
export function readPipeIntoPool(
  socket: Readable,
  pool: ReadBufferPool,
  onRead: (bytes: Buffer) => void,
): boolean {
  const symbols = Object.getOwnPropertySymbols(socket)
  const [kBuffer, kBufferCb, kBufferGen] = ONREAD_FIELDS.map((name) =>
    symbols.find((s) => s.description === name),
  )
  const handle = (socket as unknown as { _handle?: { useUserBuffer?: (buffer: Uint8Array) => void } })._handle
  if (kBuffer === undefined || kBufferCb === undefined || kBufferGen === undefined) return false
  if (typeof handle?.useUserBuffer !== 'function') return false
  const fields = socket as unknown as Record<symbol, unknown>
  if (fields[kBuffer] !== null && fields[kBuffer] !== undefined) return false
  let lease: ReadLease = pool.take()
  fields[kBuffer] = lease.bytes
  fields[kBufferCb] = (n: number): boolean => {
    if (n < COPY_BELOW_BYTES) {
      onRead(Buffer.from(lease.bytes.subarray(0, n)))
      return true
    }
    // The reader's own hold while the read is handed on: a holder that releases within the
    // call cannot return the buffer to the pool under the reader.
    lease.acquire()
    onRead(lease.bytes.subarray(0, n))
    lease.release()
    return true
  }
  fields[kBufferGen] = (): Buffer => {
    if (lease.refs > 0) {
      lease.lend()
      lease = pool.take()
    }
    return lease.bytes
  }
  handle.useUserBuffer(lease.bytes)
  return true
}
