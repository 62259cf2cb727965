// Binary output frames on the shell WebSocket (capability `binary_output`): a run's output as
// raw bytes in a binary WebSocket message instead of base64 inside JSON. One frame is
//
//   u8 kind · u16 idLength · u32 offsetHigh · u32 offsetLow · id (UTF-8, idLength bytes) · data
//
// big-endian. `kind` is 1 for stdout (`shell_out`) and 2 for stderr (`shell_err`); an
// idLength of 0 means output no run owns (`id: null`); `offset` is the log offset of the first
// byte of `data`, which runs to the end of the message. This module has no dependencies, so
// every runtime (the SDK in a browser included) decodes frames with the same code.
import type { ErrorCode } from './error-codes.ts'
import type { StreamName } from './primitives.ts'

/** The `kind` byte of each binary frame. */
export const OUTPUT_FRAME_KIND = { stdout: 1, stderr: 2 } as const

/** Bytes before the run id: kind, id length and offset. */
export const OUTPUT_FRAME_HEADER_BYTES = 11

/** Longest run id in UTF-8 bytes (128 characters of up to 4 bytes). */
export const MAX_OUTPUT_FRAME_ID_BYTES = 512

const TWO_32 = 2 ** 32
const encoder = new TextEncoder()
const decoder = new TextDecoder('utf-8', { fatal: true })

/** A decoded binary output frame. */
export interface OutputFrame {
  /** Which stream the bytes came from. */
  stream: StreamName
  /** The run they belong to; null for output between runs. */
  id: string | null
  /** Log offset of the first byte. */
  offset: number
  /** The bytes (a view into the message). */
  data: Uint8Array
}

/** The outcome of decoding one binary message; never throws. */
export type OutputFrameRead =
  | { ok: true; frame: OutputFrame }
  | { ok: false; code: Extract<ErrorCode, 'INVALID_FRAME' | 'UNKNOWN_FRAME_TYPE'>; message: string }

/** Encodes the header (and run id) of a frame whose data follows it; the caller appends `data`. */
export function encodeOutputHeader(stream: StreamName, id: string | null, offset: number): Uint8Array {
  const idBytes = id === null ? null : encoder.encode(id)
  const idLength = idBytes?.byteLength ?? 0
  const header = new Uint8Array(OUTPUT_FRAME_HEADER_BYTES + idLength)
  const view = new DataView(header.buffer)
  view.setUint8(0, OUTPUT_FRAME_KIND[stream])
  view.setUint16(1, idLength)
  view.setUint32(3, Math.floor(offset / TWO_32))
  view.setUint32(7, offset % TWO_32)
  if (idBytes) header.set(idBytes, OUTPUT_FRAME_HEADER_BYTES)
  return header
}

/** Encodes a whole frame into one buffer. */
export function encodeOutputFrame(
  stream: StreamName,
  id: string | null,
  offset: number,
  data: Uint8Array,
): Uint8Array {
  const header = encodeOutputHeader(stream, id, offset)
  const frame = new Uint8Array(header.byteLength + data.byteLength)
  frame.set(header)
  frame.set(data, header.byteLength)
  return frame
}

/** Decodes one binary message: a truncated header, an unknown kind or a bad id length is an error. */
export function decodeOutputFrame(bytes: Uint8Array): OutputFrameRead {
  if (bytes.byteLength < OUTPUT_FRAME_HEADER_BYTES) {
    return {
      ok: false,
      code: 'INVALID_FRAME',
      message: `a binary frame needs a ${OUTPUT_FRAME_HEADER_BYTES}-byte header; this one has ${bytes.byteLength} bytes`,
    }
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const kind = view.getUint8(0)
  const stream =
    kind === OUTPUT_FRAME_KIND.stdout ? 'stdout' : kind === OUTPUT_FRAME_KIND.stderr ? 'stderr' : null
  if (stream === null) {
    return {
      ok: false,
      code: 'UNKNOWN_FRAME_TYPE',
      message: `binary frame kind ${kind} is unknown; kinds are 1 (stdout) and 2 (stderr)`,
    }
  }
  const idLength = view.getUint16(1)
  if (idLength > MAX_OUTPUT_FRAME_ID_BYTES || OUTPUT_FRAME_HEADER_BYTES + idLength > bytes.byteLength) {
    return {
      ok: false,
      code: 'INVALID_FRAME',
      message: `binary frame run id length ${idLength} is over ${MAX_OUTPUT_FRAME_ID_BYTES} bytes or past the frame's end`,
    }
  }
  const offset = view.getUint32(3) * TWO_32 + view.getUint32(7)
  if (!Number.isSafeInteger(offset)) {
    return {
      ok: false,
      code: 'INVALID_FRAME',
      message: `binary frame offset ${offset} is not a safe integer`,
    }
  }
  let id: string | null = null
  if (idLength > 0) {
    try {
      id = decoder.decode(bytes.subarray(OUTPUT_FRAME_HEADER_BYTES, OUTPUT_FRAME_HEADER_BYTES + idLength))
    } catch {
      return { ok: false, code: 'INVALID_FRAME', message: 'binary frame run id is not valid UTF-8' }
    }
  }
  return {
    ok: true,
    frame: { stream, id, offset, data: bytes.subarray(OUTPUT_FRAME_HEADER_BYTES + idLength) },
  }
}
