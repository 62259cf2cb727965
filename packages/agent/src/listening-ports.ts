// The sandbox's listening TCP sockets, read from `/proc/net/tcp` and `/proc/net/tcp6`.
//
// Those files describe the network namespace of the process that reads them, so the agent,
// which lives in the sandbox's namespace, sees exactly the sandbox's sockets. A row is in state
// `0A` (LISTEN) when a server listens; its local address is hex, each 32-bit word in host
// (little-endian) byte order, and its port is big-endian hex.
import { readFile } from 'node:fs/promises'
import type { ListeningPort } from '@conch/protocol'

/** TCP_LISTEN in the kernel's `st` column. */
const LISTEN_STATE = '0A'

/** Parses one `/proc/net/tcp{,6}` table into its listening sockets. */
export function parseProcNetTcp(text: string, family: 'ipv4' | 'ipv6'): ListeningPort[] {
  const ports: ListeningPort[] = []
  for (const line of text.split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/)
    if (fields.length < 4 || fields[3] !== LISTEN_STATE) continue
    const [addressHex, portHex] = (fields[1] ?? '').split(':')
    if (!addressHex || !portHex || !/^[0-9A-Fa-f]{4}$/.test(portHex)) continue
    const port = Number.parseInt(portHex, 16)
    const address = family === 'ipv4' ? ipv4FromHex(addressHex) : ipv6FromHex(addressHex)
    if (port < 1 || address === null) continue
    ports.push({ port, address, family })
  }
  return ports
}

/** Reads both tables; a missing table (no IPv6 in the kernel) counts as empty. */
export async function listeningPorts(procNet = '/proc/net'): Promise<ListeningPort[]> {
  const read = (name: string): Promise<string> => readFile(`${procNet}/${name}`, 'utf8').catch(() => '')
  const [v4, v6] = await Promise.all([read('tcp'), read('tcp6')])
  const all = [...parseProcNetTcp(v4, 'ipv4'), ...parseProcNetTcp(v6, 'ipv6')]
  const seen = new Set<string>()
  const unique = all.filter((p) => {
    const key = `${p.family}/${p.address}/${p.port}`
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
  return unique.sort((a, b) => a.port - b.port || a.family.localeCompare(b.family))
}

function ipv4FromHex(hex: string): string | null {
  if (!/^[0-9A-Fa-f]{8}$/.test(hex)) return null
  const word = Number.parseInt(hex, 16)
  return [word & 0xff, (word >>> 8) & 0xff, (word >>> 16) & 0xff, word >>> 24].join('.')
}

function ipv6FromHex(hex: string): string | null {
  if (!/^[0-9A-Fa-f]{32}$/.test(hex)) return null
  const bytes: number[] = []
  for (let w = 0; w < 4; w++) {
    const word = Number.parseInt(hex.slice(w * 8, w * 8 + 8), 16)
    bytes.push(word & 0xff, (word >>> 8) & 0xff, (word >>> 16) & 0xff, word >>> 24)
  }
  const groups: string[] = []
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16))
  return compressIpv6(groups)
}

/** RFC 5952 text form: the longest run of two or more zero groups becomes `::`. */
function compressIpv6(groups: string[]): string {
  let bestStart = -1
  let bestLength = 1
  for (let i = 0; i < groups.length; ) {
    if (groups[i] !== '0') {
      i++
      continue
    }
    let j = i
    while (j < groups.length && groups[j] === '0') j++
    if (j - i > bestLength) {
      bestStart = i
      bestLength = j - i
    }
    i = j
  }
  if (bestStart < 0) return groups.join(':')
  return `${groups.slice(0, bestStart).join(':')}::${groups.slice(bestStart + bestLength).join(':')}`
}
