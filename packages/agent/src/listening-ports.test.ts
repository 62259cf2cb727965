import { describe, expect, it } from 'vitest'
import { parseProcNetTcp } from './listening-ports.ts'

const TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0 100 0 0 10 0
   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 2 1 0 100 0 0 10 0
   2: 0100007F:0BB8 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 3 1 0 100 0 0 10 0
`
const TCP6 = `  sl  local_address                         remote_address                        st tx_queue
   0: 00000000000000000000000001000000:1388 00000000000000000000000000000000:0000 0A 00000000:00000000
   1: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000
   2: 0000000000000000FFFF00000100007F:0051 00000000000000000000000000000000:0000 0A 00000000:00000000
`

describe('parseProcNetTcp', () => {
  it('reads listening IPv4 sockets and skips connections', () => {
    expect(parseProcNetTcp(TCP, 'ipv4')).toEqual([
      { port: 3000, address: '127.0.0.1', family: 'ipv4' },
      { port: 8080, address: '0.0.0.0', family: 'ipv4' },
    ])
  })

  it('reads listening IPv6 sockets in their short form', () => {
    expect(parseProcNetTcp(TCP6, 'ipv6')).toEqual([
      { port: 5000, address: '::1', family: 'ipv6' },
      { port: 80, address: '::', family: 'ipv6' },
      { port: 81, address: '::ffff:7f00:1', family: 'ipv6' },
    ])
  })

  it('ignores malformed rows', () => {
    expect(parseProcNetTcp('header\n 0: zz:0BB8 x 0A\n 1: 0100007F:0000 x 0A\n', 'ipv4')).toEqual([])
  })
})
