// Host-key checks against known_hosts text, as an attacker on the network would try them: a
// different key, a key listed under another name or port, a revoked key, hashed entries.
import { createHmac, randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { checkHostKey, knownHostsName } from './known-hosts.ts'

const good = randomBytes(51)
const evil = randomBytes(51)
const b64 = (key: Buffer): string => key.toString('base64')

function hashed(name: string): string {
  const salt = randomBytes(20)
  return `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update(name).digest('base64')}`
}

describe('checkHostKey', () => {
  const name = knownHostsName('10.0.0.5', 2222)

  it('names a non-standard port as [host]:port and port 22 as the bare host', () => {
    expect(name).toBe('[10.0.0.5]:2222')
    expect(knownHostsName('box.example', 22)).toBe('box.example')
  })

  it('trusts the listed key, in plain, comma-listed and hashed entries', () => {
    expect(checkHostKey(`${name} ssh-ed25519 ${b64(good)}\n`, name, good)).toBe('trusted')
    expect(checkHostKey(`other,${name} ssh-ed25519 ${b64(good)}\n`, name, good)).toBe('trusted')
    expect(checkHostKey(`${hashed(name)} ssh-ed25519 ${b64(good)}\n`, name, good)).toBe('trusted')
  })

  it('refuses a different key for a listed host (a man in the middle)', () => {
    expect(checkHostKey(`${name} ssh-ed25519 ${b64(good)}\n`, name, evil)).toBe('mismatch')
    expect(checkHostKey(`${hashed(name)} ssh-ed25519 ${b64(good)}\n`, name, evil)).toBe('mismatch')
  })

  it('refuses a key listed only under another name or port', () => {
    expect(checkHostKey(`10.0.0.5 ssh-ed25519 ${b64(evil)}\n`, name, evil)).toBe('unknown')
    expect(checkHostKey(`[10.0.0.5]:22 ssh-ed25519 ${b64(evil)}\n`, name, evil)).toBe('unknown')
    expect(checkHostKey(`${hashed('10.0.0.6')} ssh-ed25519 ${b64(evil)}\n`, name, evil)).toBe('unknown')
  })

  it('does not honour wildcards or cert-authority lines, which could only widen trust', () => {
    expect(checkHostKey(`* ssh-ed25519 ${b64(evil)}\n`, name, evil)).toBe('unknown')
    expect(checkHostKey(`@cert-authority ${name} ssh-ed25519 ${b64(evil)}\n`, name, evil)).toBe('unknown')
  })

  it('refuses a revoked key even when it is also listed as trusted', () => {
    const text = `${name} ssh-ed25519 ${b64(good)}\n@revoked * ssh-ed25519 ${b64(good)}\n@revoked ${name} ssh-ed25519 ${b64(good)}\n`
    expect(checkHostKey(text, name, good)).toBe('revoked')
  })

  it('ignores comments, blank and malformed lines', () => {
    const text = `# ${name} ssh-ed25519 ${b64(evil)}\n\n${name}\n${name} ssh-ed25519\n`
    expect(checkHostKey(text, name, evil)).toBe('unknown')
  })
})
