import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import { API_KEY_PREFIX, SANDBOX_TOKEN_PREFIX } from '@conch/protocol'

/** A new API key: `conch_` plus 32 random bytes, base64url. */
export function generateApiKey(): string {
  return `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`
}

/** A new sandbox-scoped token secret: `cst_` plus 32 random bytes, base64url. */
export function generateToken(): string {
  return `${SANDBOX_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`
}

/** A random id with a prefix, from [A-Za-z0-9]. */
export function randomId(prefix: string, length = 16): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
  const bytes = randomBytes(length)
  let out = prefix
  for (const b of bytes) out += alphabet[b % alphabet.length]
  return out
}

/** SHA-256 of a secret, hex; the only form in which secrets are stored. */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex')
}

/** Compares two hex hashes in constant time. */
export function hashesEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex')
  const y = Buffer.from(b, 'hex')
  return x.byteLength === y.byteLength && x.byteLength > 0 && timingSafeEqual(x, y)
}

/** Whether `secret` hashes to one of `hashes`; compares every entry in constant time. */
export function matchesAnyHash(secret: string, hashes: readonly string[]): boolean {
  const h = hashSecret(secret)
  let found = false
  for (const candidate of hashes) found = hashesEqual(h, candidate) || found
  return found
}
