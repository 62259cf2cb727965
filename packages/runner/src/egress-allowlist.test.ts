import { describe, expect, it } from 'vitest'
import { EgressAllowlist, normalizeHost, parseEgressRule } from './egress-allowlist.ts'
import { AddressScreen } from './egress-resolver.ts'

describe('egress allowlist', () => {
  const list = new EgressAllowlist([
    'api.example.com',
    '*.example.org',
    '10.0.0.0/8:5432',
    '[2001:db8::]/32:443',
  ])

  it('admits listed names on 80 and 443, wildcard subdomains, and addresses in a listed CIDR', () => {
    expect(list.allows('api.example.com', 443)).toBe(true)
    expect(list.allows('API.Example.COM.', 80)).toBe(true)
    expect(list.allows('a.b.example.org', 443)).toBe(true)
    expect(list.allows('10.9.8.7', 5432)).toBe(true)
    expect(list.allows('2001:db8::1', 443)).toBe(true)
  })

  it('refuses other ports, the apex of a wildcard, look-alike suffixes and non-DNS names', () => {
    expect(list.allows('api.example.com', 22)).toBe(false)
    expect(list.allows('example.org', 443)).toBe(false)
    expect(list.allows('evilexample.org', 443)).toBe(false)
    expect(list.allows('api.example.com.evil.net', 443)).toBe(false)
    expect(list.allows('api.example.com\0', 443)).toBe(false)
    expect(list.allows('10.9.8.7', 443)).toBe(false)
  })

  it('never admits an address by a name rule, or numeric forms of addresses as names', () => {
    expect(new EgressAllowlist(['127.0.0.1']).allows('2130706433', 80)).toBe(false)
    expect(normalizeHost('0x7f.1')).toBeNull()
    expect(normalizeHost('127.1')).toBeNull()
    expect(normalizeHost('[::1]')).toEqual({ kind: 'address', value: '::1' })
  })

  it('rejects malformed rules', () => {
    for (const rule of ['', '*.', 'a..b', 'host:0', 'host:65536', '10.0.0.0/33', 'name/8', '*.1.2.3.4'])
      expect(() => parseEgressRule(rule), rule).toThrow()
  })
})

describe('address screen', () => {
  it('refuses loopback, private, link-local, metadata and mapped forms unless permitted, and the runner always', () => {
    const screen = new AddressScreen(['10.1.0.0/16'], ['127.0.0.1:8080'])
    for (const address of [
      '127.0.0.1',
      '10.0.0.1',
      '169.254.169.254',
      '::1',
      '::ffff:127.0.0.1',
      'fd00::1',
      '0.0.0.0',
      '100.64.0.1',
    ])
      expect(screen.refusal(address, 443), address).not.toBeNull()
    expect(screen.refusal('10.1.2.3', 443)).toBeNull()
    expect(screen.refusal('93.184.216.34', 443)).toBeNull()
    expect(new AddressScreen(['127.0.0.0/8'], ['127.0.0.1:8080']).refusal('127.0.0.1', 8080)).toBe(
      'it is the runner itself',
    )
  })
})
