import type { AddressInfo } from 'node:net'
import { networkInterfaces } from 'node:os'

/**
 * The `address:port` pairs on which a listening server can be reached from this host: its own
 * address, or every interface address (and loopback) when it listens on all of them. Egress
 * refuses these, so a sandbox cannot reach its runner through the proxy.
 */
export function listeningAddresses(address: AddressInfo | string | null): string[] {
  if (!address || typeof address === 'string') return []
  const { port } = address
  if (address.address !== '0.0.0.0' && address.address !== '::') return [`${address.address}:${port}`]
  const all = ['127.0.0.1', '::1']
  for (const list of Object.values(networkInterfaces())) for (const i of list ?? []) all.push(i.address)
  return all.map((a) => `${a}:${port}`)
}
