import { describe, expect } from 'vitest'
import { systemClock } from '../src/clock.ts'
import { silentLogger } from '../src/logger.ts'
import { ProcessTable } from '../src/process-tree.ts'
import { ScrollbackBudget } from '../src/scrollback-budget.ts'
import { SessionManager } from '../src/session-manager.ts'
import { nodeSpawn } from '../src/spawner.ts'
import { chooseTempRoot } from '../src/temp-root.ts'
import { test } from './fixtures.ts'

const KB = 1024

function managerWith(budget: ScrollbackBudget, root: string): SessionManager {
  return new SessionManager({
    baseEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: root },
    root,
    resolveDir: (dir) => dir,
    spawn: nodeSpawn,
    clock: systemClock,
    logger: silentLogger,
    processTable: new ProcessTable(systemClock),
    tempRoot: chooseTempRoot(),
    killGraceMs: 300,
    scrollbackBudget: budget,
  })
}

describe('bounded memory: one scrollback budget for every session', () => {
  test('keeps all sessions within the budget; the chatty one loses its own old output', async ({
    workdir,
  }) => {
    const budget = new ScrollbackBudget(64 * KB)
    const manager = managerWith(budget, workdir)
    try {
      const quiet = await manager.create({ id: 'quiet' })
      const chatty = await manager.create({ id: 'chatty' })
      await quiet.run({ runId: 'q', command: 'echo keep me' })
      for (let i = 0; i < 4; i++) {
        const r = await chatty.run({ runId: `c${i}`, command: "head -c 50000 /dev/zero | tr '\\0' x" })
        expect(r.stdoutBytes).toBe(50_000)
      }
      expect(budget.heldBytes).toBeLessThanOrEqual(64 * KB)
      expect(budget.heldBytes).toBe(quiet.log.heldBytes + chatty.log.heldBytes)
      expect(quiet.log.startOffset).toBe(0)
      const kept = quiet.log.readFrom(0).flatMap((e) => ('data' in e ? [e.data.toString()] : []))
      expect(kept.join('')).toBe('keep me\n')
      expect(chatty.log.startOffset).toBeGreaterThan(0)
    } finally {
      await manager.closeAll()
    }
    expect(budget.logs).toBe(0)
    expect(budget.heldBytes).toBe(0)
  })

  test('gives back everything a deleted session held', async ({ workdir }) => {
    const budget = new ScrollbackBudget(1 << 20)
    const manager = managerWith(budget, workdir)
    try {
      const gone = await manager.create({ id: 'gone' })
      const stays = await manager.create({ id: 'stays' })
      await gone.run({ runId: 'g', command: "head -c 20000 /dev/zero | tr '\\0' y" })
      await stays.run({ runId: 's', command: 'echo here' })
      expect(budget.logs).toBe(2)
      expect(budget.heldBytes).toBeGreaterThan(20_000)
      await manager.delete('gone')
      expect(budget.logs).toBe(1)
      expect(budget.heldBytes).toBe(stays.log.heldBytes)
    } finally {
      await manager.closeAll()
    }
  })
})
