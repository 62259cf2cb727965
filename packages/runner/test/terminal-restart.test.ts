// A terminal survives a runner restart: the runner is SIGKILLed and started again on the same
// state dir; the terminal lives in the sandbox's detached agent, so the same terminal, with its
// shell state and its scrollback, is there for the client that reattaches from its offset.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Sandbox } from '@conch/sdk'
import { describe, expect, it } from 'vitest'
import { WebSocket } from 'ws'
import { generateApiKey } from '../src/credentials.ts'
import { destroyStateDir, runnerProcess } from './runner-process.ts'
import { screenOf } from './terminal-screen.ts'

describe('terminal across a runner restart', () => {
  it('keeps the terminal, its state and its scrollback; a client resumes from its offset', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-term-restart-'))
    const apiKey = generateApiKey()
    try {
      let sandboxId: string
      let terminalId: string
      let offset: number
      {
        await using first = await runnerProcess(stateDir, apiKey)
        const sb = await Sandbox.create({ url: first.url, apiKey, WebSocket })
        sandboxId = sb.id
        const term = await sb.terminal({ command: ['bash', '--norc'] })
        terminalId = term.id
        const { until } = screenOf(term)
        term.write('cd /tmp; KEPT=yes; echo before-restart\r')
        await until(/[\r\n]before-restart\r\n/)
        offset = term.offset
        term.detach()
        first.child.kill('SIGKILL')
        await first.exited
      }
      await using second = await runnerProcess(stateDir, apiKey)
      const sb = await Sandbox.connect(sandboxId, { url: second.url, apiKey, WebSocket })
      expect((await sb.listTerminals()).map((t) => t.id)).toEqual([terminalId])
      const replayed = screenOf(await sb.attachTerminal(terminalId, { offset: 0 }))
      await replayed.until(/before-restart/)
      const term = await sb.attachTerminal(terminalId, { offset })
      const { until } = screenOf(term)
      term.write('echo "$PWD $KEPT"\r')
      const screen = await until(/\/tmp yes\r\n/)
      // Resumed from its offset: nothing from before the restart is shown twice.
      expect(screen).not.toContain('before-restart')
      await term.close()
      await sb.destroy()
    } finally {
      await destroyStateDir(stateDir)
    }
  }, 60_000)
})
