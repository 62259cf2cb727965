// Writes frames of the runner link to the socket.
//
// The bytes are exactly those of the protocol's `encodeFrame(header, payload)`:
// `u32be length · u32be headerLength · JSON header · payload`. The length prefix and the header
// are encoded into one small Buffer, and a payload goes to the socket as a chunk of its own
// inside a cork, so an output chunk leaves in one writev without being copied into a frame.
import type { Socket } from 'node:net'

/** The length prefix and JSON header of a frame whose payload has `payloadBytes` bytes. */
export function encodeFrameHead(header: unknown, payloadBytes: number): Buffer {
  const json = JSON.stringify(header)
  // A UTF-16 code unit takes at most 3 UTF-8 bytes.
  const head = Buffer.allocUnsafe(8 + json.length * 3)
  const headerBytes = head.write(json, 8)
  head.writeUInt32BE(4 + headerBytes + payloadBytes, 0)
  head.writeUInt32BE(headerBytes, 4)
  return head.subarray(0, 8 + headerBytes)
}

/**
 * Writes one frame. Returns false when the socket is gone or bytes the kernel has not yet
 * taken fill its buffer (`writableHighWaterMark`), so producers pause until `drain`; a frame
 * written through at once leaves the buffer empty and returns true, whatever its size.
 */
export function writeFrame(socket: Socket, header: unknown, payload?: Uint8Array): boolean {
  if (socket.destroyed) return false
  const size = payload?.byteLength ?? 0
  const head = encodeFrameHead(header, size)
  if (payload !== undefined && size > 0) {
    socket.cork()
    socket.write(head)
    socket.write(payload)
    socket.uncork()
  } else {
    socket.write(head)
  }
  return !socket.destroyed && socket.writableLength < socket.writableHighWaterMark
}
