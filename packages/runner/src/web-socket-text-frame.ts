// A server → client WebSocket text message as one unfragmented frame (RFC 6455 section 5.2):
// FIN set, opcode 1 (text), no extensions (the shell socket negotiates none), unmasked (a
// server never masks), then the payload length in 7, 7+16 or 7+64 bits. The shell socket writes
// its JSON frames this way itself, straight onto the socket under the WebSocket, which costs
// one buffer and one socket write per message where `ws.send` takes an options object, a
// second length scan and two writes.
import { Buffer } from 'node:buffer'

/** Longest header: 2 bytes, then a 64-bit length. */
const MAX_HEAD = 10

/** Strings up to this many UTF-16 units are encoded into one buffer with their header. */
const SMALL_TEXT = 1024

/**
 * The bytes of a text frame holding `text` (one chunk for short text, header and text else).
 * The buffer is allocated at its exact size, as the link's frame heads are (frame-codec.ts):
 * small buffers come from Node's shared 8 KiB pool, and reserving the worst case (3 bytes per
 * UTF-16 unit) would use it up three times as fast.
 */
export function textFrame(text: string): Buffer | [Buffer, string] {
  const n = Buffer.byteLength(text, 'utf8')
  if (text.length > SMALL_TEXT) return [textFrameHead(n), text]
  const head = n < 126 ? 2 : 4
  const buffer = Buffer.allocUnsafe(head + n)
  writeHead(buffer, 0, n)
  buffer.write(text, head, 'utf8')
  return buffer
}

/**
 * The bytes of one text frame per string of `texts`, back to back in one buffer: a tick's
 * messages leave in one socket write, one allocation and one encoding pass per string.
 */
export function textFrames(texts: readonly string[]): Buffer {
  const lengths = new Array<number>(texts.length)
  let total = 0
  for (let i = 0; i < texts.length; i++) {
    const n = Buffer.byteLength(texts[i]!, 'utf8')
    lengths[i] = n
    total += headBytes(n) + n
  }
  const buffer = Buffer.allocUnsafe(total)
  let at = 0
  for (let i = 0; i < texts.length; i++) {
    const n = lengths[i]!
    writeHead(buffer, at, n)
    at += headBytes(n)
    at += buffer.write(texts[i]!, at, 'utf8')
  }
  return buffer
}

function headBytes(length: number): number {
  return length < 126 ? 2 : length < 65536 ? 4 : MAX_HEAD
}

/** The header of a text frame whose payload is `length` bytes. */
export function textFrameHead(length: number): Buffer {
  const head = Buffer.allocUnsafe(headBytes(length))
  writeHead(head, 0, length)
  return head
}

function writeHead(buffer: Buffer, at: number, length: number): void {
  buffer[at] = 0x81
  if (length < 126) {
    buffer[at + 1] = length
  } else if (length < 65536) {
    buffer[at + 1] = 126
    buffer.writeUInt16BE(length, at + 2)
  } else {
    buffer[at + 1] = 127
    buffer.writeUInt32BE(Math.floor(length / 2 ** 32), at + 2)
    buffer.writeUInt32BE(length >>> 0, at + 6)
  }
}
