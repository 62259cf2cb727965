import type { ServerFrame } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { ShellStartFold } from './shell-start-fold.ts'

/** A fold whose sender records what it sends. */
function recorded(enabled: boolean): { fold: ShellStartFold; sent: ServerFrame[] } {
  const sent: ServerFrame[] = []
  // As the socket's sender does: the end of a tick asked for flushes the fold.
  const fold: ShellStartFold = new ShellStartFold({
    send: (frame) => sent.push(frame),
    atEndOfTick: () => process.nextTick(() => fold.flush()),
  })
  if (enabled) fold.enable()
  return { fold, sent }
}

const tick = (): Promise<void> => new Promise((resolve) => process.nextTick(resolve))

describe('ShellStartFold', () => {
  it('gives a start held in this tick to its run exit, and sends nothing for it', () => {
    const { fold, sent } = recorded(true)
    fold.start('link-1', 'r1', 40)
    expect(fold.takeFor('link-1')).toBe(40)
    expect(sent).toEqual([])
    expect(fold.takeFor('link-1')).toBeUndefined()
  })

  it('sends a start alone at the end of the tick when its exit does not come in it', async () => {
    const { fold, sent } = recorded(true)
    fold.start('link-1', 'r1', 40)
    await tick()
    expect(sent).toEqual([{ type: 'shell_start', id: 'r1', offset: 40 }])
    expect(fold.takeFor('link-1')).toBeUndefined()
    expect(sent).toHaveLength(1)
  })

  it('sends a held start before another run starts or ends, and before output (flush)', () => {
    const { fold, sent } = recorded(true)
    fold.start('a', 'ra', 1)
    fold.start('b', 'rb', 2)
    expect(sent).toEqual([{ type: 'shell_start', id: 'ra', offset: 1 }])
    expect(fold.takeFor('a')).toBeUndefined()
    expect(sent).toEqual([
      { type: 'shell_start', id: 'ra', offset: 1 },
      { type: 'shell_start', id: 'rb', offset: 2 },
    ])
    fold.start('c', 'rc', 3)
    fold.flush()
    fold.flush()
    expect(sent.at(-1)).toEqual({ type: 'shell_start', id: 'rc', offset: 3 })
    expect(sent).toHaveLength(3)
    expect(fold.takeFor('c')).toBeUndefined()
  })

  it('sends every start at once for a client that did not list start_in_exit', () => {
    const { fold, sent } = recorded(false)
    fold.start('link-1', 'r1', 7)
    expect(sent).toEqual([{ type: 'shell_start', id: 'r1', offset: 7 }])
    expect(fold.takeFor('link-1')).toBeUndefined()
    expect(sent).toHaveLength(1)
  })
})
