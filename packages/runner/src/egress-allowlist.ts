// A sandbox's egress allowlist: which destinations its proxy may connect to.
//
// A rule is a host name (`api.example.com`), a wildcard (`*.example.org`: any name below it,
// not the apex), an IPv4 or IPv6 address or CIDR (`10.0.0.0/8`, `[2001:db8::]/32`), each with an
// optional `:port` (without one: 80 and 443). Names match names and addresses match addresses:
// a name rule never admits an IP literal, so `http://93.184.216.34/` is refused even when a rule
// names the host that resolves there. Names are compared lowercased, without a trailing dot, and
// only in their ASCII form; anything that is not a plain DNS name is refused.
import { BlockList, isIP, isIPv4 } from 'node:net'

/** Ports a rule without `:port` allows. */
export const DEFAULT_EGRESS_PORTS: readonly number[] = [80, 443]

/** A parsed rule. */
export type EgressRuleSpec =
  | { kind: 'name'; name: string; ports: readonly number[] }
  | { kind: 'wildcard'; suffix: string; ports: readonly number[] }
  | { kind: 'address'; list: BlockList; ports: readonly number[] }

/** A DNS name as the proxy accepts it: labels of [a-z0-9-], not starting or ending with '-'. */
const NAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/

/** A host as a destination: a lowercased DNS name, an IPv4/IPv6 address, or null when neither. */
export function normalizeHost(host: string): { kind: 'name' | 'address'; value: string } | null {
  let h = host.trim().toLowerCase()
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1)
  if (isIP(h)) return { kind: 'address', value: h }
  if (h.endsWith('.')) h = h.slice(0, -1)
  // Numeric-looking names (`2130706433`, `0x7f.1`, `127.1`) are addresses to some resolvers; a
  // name must have a label that is not all digits or hex-prefixed.
  const labels = h.split('.')
  if (labels.every((l) => /^(0x[0-9a-f]*|[0-9]+)$/.test(l))) return null
  return NAME.test(h) ? { kind: 'name', value: h } : null
}

function parsePort(text: string): number {
  if (!/^[1-9][0-9]{0,4}$/.test(text) || Number(text) > 65_535) throw new Error(`"${text}" is not a port`)
  return Number(text)
}

/** Parses one rule; throws an Error naming what is wrong. */
export function parseEgressRule(rule: string): EgressRuleSpec {
  let hostPart = rule.trim()
  let ports: readonly number[] = DEFAULT_EGRESS_PORTS
  const bracket = /^\[([^\]]+)\](\/\d{1,3})?(?::(\d+))?$/.exec(hostPart)
  if (bracket) {
    hostPart = `${bracket[1]}${bracket[2] ?? ''}`
    if (bracket[3] !== undefined) ports = [parsePort(bracket[3])]
  } else if ((hostPart.match(/:/g) ?? []).length === 1) {
    const [h, p] = hostPart.split(':')
    hostPart = h ?? ''
    ports = [parsePort(p ?? '')]
  }
  const [address, prefixText] = hostPart.split('/')
  if (address && isIP(address)) {
    const family = isIPv4(address) ? 'ipv4' : 'ipv6'
    const max = family === 'ipv4' ? 32 : 128
    const prefix = prefixText === undefined ? max : Number(prefixText)
    if (!Number.isInteger(prefix) || prefix < 0 || prefix > max)
      throw new Error(`"${rule}" has a bad prefix length`)
    const list = new BlockList()
    list.addSubnet(address, prefix, family)
    return { kind: 'address', list, ports }
  }
  if (prefixText !== undefined) throw new Error(`"${rule}": only an address can have a /prefix`)
  if (hostPart.startsWith('*.')) {
    const suffix = normalizeHost(hostPart.slice(2))
    if (suffix?.kind !== 'name') throw new Error(`"${rule}" is not a wildcard over a DNS name`)
    return { kind: 'wildcard', suffix: suffix.value, ports }
  }
  const name = normalizeHost(hostPart)
  if (name?.kind !== 'name') throw new Error(`"${rule}" is not a host name, *.domain, address or CIDR`)
  return { kind: 'name', name: name.value, ports }
}

/** A sandbox's parsed allowlist. */
export class EgressAllowlist {
  readonly #rules: readonly EgressRuleSpec[]

  /** Parses `rules`; throws on the first bad one. */
  constructor(rules: readonly string[]) {
    this.#rules = rules.map(parseEgressRule)
  }

  /** Whether a destination named by `host` (a name or an address literal) and `port` is listed. */
  allows(host: string, port: number): boolean {
    return this.#matches(host, port)
  }

  /** Whether `host` is listed on some port. */
  allowsHost(host: string): boolean {
    return this.#matches(host, null)
  }

  #matches(host: string, port: number | null): boolean {
    const target = normalizeHost(host)
    if (!target) return false
    return this.#rules.some((rule) => {
      if (port !== null && !rule.ports.includes(port)) return false
      switch (rule.kind) {
        case 'name':
          return target.kind === 'name' && target.value === rule.name
        case 'wildcard':
          return target.kind === 'name' && target.value.endsWith(`.${rule.suffix}`)
        case 'address':
          return (
            target.kind === 'address' && rule.list.check(target.value, isIPv4(target.value) ? 'ipv4' : 'ipv6')
          )
      }
      return false
    })
  }
}
