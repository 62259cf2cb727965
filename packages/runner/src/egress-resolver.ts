// Name resolution and address screening for egress.
//
// The runner resolves a destination's name itself, screens every address it got, and connects
// to a screened address (never resolving again), so a name that rebinds between the check and
// the connect cannot switch the connection to another address. Addresses in special ranges
// (loopback, private, link-local with the cloud metadata address, carrier-grade NAT, unique
// local, multicast, unspecified, and their IPv4-mapped IPv6 forms) are refused unless the
// operator permits a range explicitly (`--egress-permit`); the runner's own listening addresses
// are refused always. The resolver is an interface so tests can map a name to a loopback
// server; the screening stays the production rule and the test permits the range it uses.
import { lookup } from 'node:dns/promises'
import { BlockList, isIP, isIPv4 } from 'node:net'

/** Turns a DNS name into addresses. */
export interface EgressResolver {
  /** Every address of `name` (IPv4 and IPv6); an empty list or a throw when it has none. */
  resolve(name: string): Promise<string[]>
}

/** The system resolver (getaddrinfo), as the runner's host resolves names. */
export const systemResolver: EgressResolver = {
  async resolve(name) {
    const answers = await lookup(name, { all: true, verbatim: true })
    return answers.map((a) => a.address)
  },
}

/** A fixed table of names, for tests and for operators who pin names (`--egress-host name=ip`). */
export function tableResolver(
  table: Readonly<Record<string, readonly string[]>>,
  fallback?: EgressResolver,
): EgressResolver {
  return {
    async resolve(name) {
      const pinned = table[name]
      if (pinned) return [...pinned]
      if (fallback) return fallback.resolve(name)
      return []
    },
  }
}

/** Ranges no sandbox reaches unless the operator permits them. */
const SPECIAL_RANGES: readonly [string, number, 'ipv4' | 'ipv6'][] = [
  ['0.0.0.0', 8, 'ipv4'],
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['224.0.0.0', 4, 'ipv4'],
  ['240.0.0.0', 4, 'ipv4'],
  ['::', 128, 'ipv6'],
  ['::1', 128, 'ipv6'],
  ['64:ff9b::', 96, 'ipv6'],
  ['100::', 64, 'ipv6'],
  ['fc00::', 7, 'ipv6'],
  ['fe80::', 10, 'ipv6'],
  ['ff00::', 8, 'ipv6'],
]

/** `::ffff:a.b.c.d` (or its hex form) as `a.b.c.d`; other addresses unchanged. */
export function unmapIpv4(address: string): string {
  const lower = address.toLowerCase()
  const dotted = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower)
  if (dotted?.[1]) return dotted[1]
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower)
  if (hex?.[1] && hex[2]) {
    const hi = Number.parseInt(hex[1], 16)
    const lo = Number.parseInt(hex[2], 16)
    return [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff].join('.')
  }
  return address
}

/** Decides which resolved addresses a sandbox's proxy may connect to. */
export class AddressScreen {
  readonly #special = new BlockList()
  readonly #permitted = new BlockList()
  readonly #self: () => readonly string[]

  /**
   * `permit` lists CIDRs the operator opens despite being special; `self` lists (or computes)
   * the `address:port` pairs of the runner's own listeners, which stay refused whatever is
   * permitted.
   */
  constructor(permit: readonly string[] = [], self: readonly string[] | (() => readonly string[]) = []) {
    for (const [address, prefix, family] of SPECIAL_RANGES) this.#special.addSubnet(address, prefix, family)
    for (const cidr of permit) {
      const [address = '', prefixText] = cidr.split('/')
      const family = isIPv4(address) ? 'ipv4' : 'ipv6'
      if (!isIP(address)) throw new Error(`"${cidr}" is not an address or CIDR`)
      this.#permitted.addSubnet(
        address,
        prefixText === undefined ? (family === 'ipv4' ? 32 : 128) : Number(prefixText),
        family,
      )
    }
    this.#self = typeof self === 'function' ? self : () => self
  }

  /** Why `address:port` is refused, or null when it may be reached. */
  refusal(address: string, port: number): string | null {
    const plain = unmapIpv4(address)
    const family = isIPv4(plain) ? 'ipv4' : 'ipv6'
    if (!isIP(plain)) return `"${address}" is not an address`
    if (this.#self().includes(`${plain}:${port}`)) return 'it is the runner itself'
    if (this.#special.check(plain, family) && !this.#permitted.check(plain, family))
      return `${plain} is in a loopback, private, link-local or reserved range`
    return null
  }
}
