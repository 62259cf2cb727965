// Host-key checking against an OpenSSH known_hosts file, strictly: a host whose key is not
// listed for its name (`host` on port 22, `[host]:port` otherwise; plain, comma lists and
// hashed `|1|salt|hash` entries) is refused before any authentication, and a key marked
// `@revoked` is refused even when listed. Wildcard patterns and `@cert-authority` lines are
// not honoured (they never match), which can only refuse more.
import { createHmac } from 'node:crypto'
import { readFileSync } from 'node:fs'

/** The name known_hosts lists a host under. */
export function knownHostsName(address: string, port: number): string {
  return port === 22 ? address : `[${address}]:${port}`
}

/** Whether one host field (comma list, possibly hashed) names `name`. */
function fieldNames(field: string, name: string): boolean {
  if (field.startsWith('|1|')) {
    const [, , salt, hash] = field.split('|')
    if (!salt || !hash) return false
    return createHmac('sha1', Buffer.from(salt, 'base64')).update(name).digest('base64') === hash
  }
  return field.split(',').some((pattern) => pattern === name)
}

/** The verdict on a presented host key. */
export type HostKeyVerdict = 'trusted' | 'unknown' | 'mismatch' | 'revoked'

/** Checks `key` (the SSH wire blob) presented by `name` against known_hosts `text`. */
export function checkHostKey(text: string, name: string, key: Buffer): HostKeyVerdict {
  const presented = key.toString('base64')
  let listed = false
  let trusted = false
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (line === '' || line.startsWith('#')) continue
    const parts = line.split(/\s+/)
    const marker = parts[0]?.startsWith('@') ? parts.shift() : undefined
    const [hosts, , blob] = parts
    if (!hosts || !blob || !fieldNames(hosts, name)) continue
    if (marker === '@revoked') {
      if (blob === presented) return 'revoked'
      continue
    }
    if (marker !== undefined) continue
    listed = true
    if (blob === presented) trusted = true
  }
  if (trusted) return 'trusted'
  return listed ? 'mismatch' : 'unknown'
}

/** Reads `file` and checks `key`; a missing file trusts nothing. */
export function checkHostKeyFile(file: string, name: string, key: Buffer): HostKeyVerdict {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    return 'unknown'
  }
  return checkHostKey(text, name, key)
}
