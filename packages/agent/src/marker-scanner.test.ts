import { describe, expect, it } from 'vitest'
import { MarkerScanner, type ScanItem } from './marker-scanner.ts'

const N1 = 'a'.repeat(32)
const N2 = 'b'.repeat(32)
const outMarker = (nonce: string, code: number) => `\x1fC${nonce}:${String(code).padStart(3, '0')}\x1e`
const errMarker = (nonce: string) => `\x1fC${nonce}\x1e`

function scanAll(scanner: MarkerScanner, chunks: string[]): { text: string; markers: ScanItem[] } {
  let text = ''
  const markers: ScanItem[] = []
  for (const c of chunks) {
    for (const item of scanner.push(Buffer.from(c, 'latin1'))) {
      if (item.kind === 'data') text += item.bytes.toString('latin1')
      else markers.push(item)
    }
  }
  return { text, markers }
}

describe('MarkerScanner', () => {
  it('finds a stdout marker with its exit code and keeps the output around it', () => {
    const s = new MarkerScanner('with-code')
    s.expect(N1)
    const r = scanAll(s, [`hello${outMarker(N1, 42)}tail`])
    expect(r.text).toBe('hellotail')
    expect(r.markers).toEqual([{ kind: 'marker', nonce: N1, exitCode: 42 }])
  })

  it('finds a marker split across chunks at every position without showing a byte of it', () => {
    const full = `out${outMarker(N1, 7)}`
    for (let cut = 0; cut <= full.length; cut++) {
      for (let cut2 = cut; cut2 <= full.length; cut2++) {
        const s = new MarkerScanner('with-code')
        s.expect(N1)
        const r = scanAll(s, [full.slice(0, cut), full.slice(cut, cut2), full.slice(cut2)])
        expect(r.text).toBe('out')
        expect(r.markers).toEqual([{ kind: 'marker', nonce: N1, exitCode: 7 }])
      }
    }
  })

  it('keeps a marker with a wrong nonce as output', () => {
    const s = new MarkerScanner('plain')
    s.expect(N1)
    const fake = errMarker(N2)
    const r = scanAll(s, [`x${fake}y${errMarker(N1)}`])
    expect(r.text).toBe(`x${fake}y`)
    expect(r.markers).toHaveLength(1)
  })

  it('releases a held tail once it can no longer become a marker', () => {
    const s = new MarkerScanner('plain')
    s.expect(N1)
    const first = scanAll(s, ['data\x1fCaaa'])
    expect(first.text).toBe('data')
    expect(s.heldBytes).toBe(5)
    const second = scanAll(s, ['zzz'])
    expect(second.text).toBe('\x1fCaaazzz')
  })

  it('returns held bytes when the nonce they could match is forgotten', () => {
    const s = new MarkerScanner('plain')
    s.expect(N1)
    scanAll(s, ['\x1fCaa'])
    expect(s.forget(N1).toString('latin1')).toBe('\x1fCaa')
  })

  it('passes everything through when no nonce is expected', () => {
    const s = new MarkerScanner('with-code')
    const r = scanAll(s, [outMarker(N1, 0)])
    expect(r.text).toBe(outMarker(N1, 0))
    expect(r.markers).toEqual([])
  })

  it('finds markers of two expected nonces in order', () => {
    const s = new MarkerScanner('with-code')
    s.expect(N1)
    s.expect(N2)
    const r = scanAll(s, [`${outMarker(N1, 0)}mid${outMarker(N2, 130)}`])
    expect(r.text).toBe('mid')
    expect(r.markers.map((m) => (m.kind === 'marker' ? m.exitCode : -1))).toEqual([0, 130])
  })

  it('attack: a forgotten nonce, a case-changed nonce and a nonce with high bytes are output', () => {
    const s = new MarkerScanner('with-code')
    s.expect(N1)
    s.expect(N2)
    s.forget(N1)
    const upper = N2.toUpperCase()
    // A byte over 0x7f that a UTF-8 decode would fold into a replacement character.
    const high = `${N2.slice(0, 31)}\xe2`
    const spoofs = [outMarker(N1, 0), outMarker(upper, 0), outMarker(high, 0)].join('')
    const r = scanAll(s, [spoofs, outMarker(N2, 3)])
    expect(r.text).toBe(spoofs)
    expect(r.markers).toEqual([{ kind: 'marker', nonce: N2, exitCode: 3 }])
  })

  it('rejects a marker whose exit code is not three digits', () => {
    const s = new MarkerScanner('with-code')
    s.expect(N1)
    const bad = `\x1fC${N1}:1x0\x1e`
    const r = scanAll(s, [bad])
    expect(r.text).toBe(bad)
  })
})
