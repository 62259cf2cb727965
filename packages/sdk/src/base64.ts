// Base64 both ways with the fastest primitive the runtime has: `Uint8Array.fromBase64`
// (newer engines), Node's `Buffer`, or `atob`/`btoa` (browsers, Deno, edge runtimes).

interface BufferLike {
  from(data: string, encoding: 'base64'): Uint8Array
  from(data: Uint8Array): Uint8Array & { toString(encoding: 'base64'): string }
}
interface Base64Statics {
  fromBase64?: (text: string) => Uint8Array
}

const nodeBuffer: BufferLike | undefined = (globalThis as { Buffer?: BufferLike }).Buffer
const fromBase64Native = (Uint8Array as Base64Statics).fromBase64

/** Decodes base64 text into bytes. */
export function decodeBase64(text: string): Uint8Array {
  if (fromBase64Native) return fromBase64Native(text)
  if (nodeBuffer) return nodeBuffer.from(text, 'base64')
  const binary = atob(text)
  const bytes = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
  return bytes
}

/** Encodes bytes as base64 text. */
export function encodeBase64(bytes: Uint8Array): string {
  if (nodeBuffer) return nodeBuffer.from(bytes).toString('base64')
  let binary = ''
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  }
  return btoa(binary)
}
