import { describe, expect, it } from 'vitest'
import { OutputFlow } from './output-flow.ts'

const KiB = 1024

/** A flow with `window` whose acks are recorded. */
function flow(window: number): { flow: OutputFlow; acks: number[] } {
  const acks: number[] = []
  return { flow: new OutputFlow(window, (offset) => acks.push(offset)), acks }
}

describe('OutputFlow', () => {
  it('acknowledges consumed output once per quarter window, not per frame', () => {
    const { flow: f, acks } = flow(1024 * KiB)
    f.negotiated(true, null)
    f.attached(0)
    for (let end = 64 * KiB; end <= 1024 * KiB; end += 64 * KiB) f.received(end)
    expect(acks).toEqual([256 * KiB, 512 * KiB, 768 * KiB, 1024 * KiB])
  })

  it('does not acknowledge output a consumer holds, and acknowledges it once released', () => {
    const { flow: f, acks } = flow(256 * KiB)
    f.negotiated(true, null)
    f.attached(0)
    const releases = [0, 1, 2, 3].map((i) => f.hold(i * 64 * KiB, (i + 1) * 64 * KiB))
    expect(f.heldBytes).toBe(256 * KiB)
    expect(acks).toEqual([])
    // Released out of order: the oldest held range still pins the acknowledged offset.
    releases[1]!()
    releases[2]!()
    expect(acks).toEqual([])
    expect(f.consumed).toBe(0)
    releases[0]!()
    expect(f.consumed).toBe(192 * KiB)
    expect(acks).toEqual([192 * KiB])
    releases[3]!()
    releases[3]!()
    expect(f.heldBytes).toBe(0)
    expect(f.consumed).toBe(256 * KiB)
  })

  it('sends nothing to a runner without output_ack', () => {
    const { flow: f, acks } = flow(256 * KiB)
    f.negotiated(false, null)
    f.attached(0)
    f.received(4096 * KiB)
    f.hold(4096 * KiB, 4160 * KiB)()
    expect(acks).toEqual([])
  })
})
