import { join } from 'node:path'
import { OutputLostError } from '@conch/sdk'
import { describe, expect } from 'vitest'
import { spawnNode } from '../harness/node-child.ts'
import { test } from './runner-fixture.ts'

const CLIENT = join(import.meta.dirname, 'fixtures/reattach-client.ts')

// Prints a line, blocks until the file e2e-release exists, prints more, ends with code 3.
const IN_FLIGHT =
  'echo first; while [ ! -e e2e-release ]; do sleep 0.02; done; echo second; echo second-err >&2; (exit 3) # e2e-in-flight'

interface Seen {
  event: string
  runId?: string | null
  stream?: 'stdout' | 'stderr'
  text?: string
  running?: string | null
  stdout?: string
  exitCode?: number
  exitCodes?: (number | null)[]
}

function parseLines(lines: string[]): Seen[] {
  return lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Seen)
}

function textOf(seen: Seen[], stream: 'stdout' | 'stderr'): string {
  return seen
    .filter((s) => s.event === 'output' && s.stream === stream)
    .map((s) => s.text)
    .join('')
}

describe('reattach', () => {
  for (const mode of ['live', 'from offset 0'] as const) {
    test(`lets a client in another process attach mid-run and see the rest and the end (${mode})`, async ({
      runner,
      sandbox,
    }) => {
      await using sh = await sandbox.shell()
      await sh.run('rm -f e2e-release')
      let sawFirst: () => void = () => {}
      const first = new Promise<void>((resolve) => {
        sawFirst = resolve
      })
      const pending = sh.run(IN_FLIGHT, {
        onStdout: (chunk: string) => {
          if (chunk.includes('first')) sawFirst()
        },
      })
      await first

      await using child = spawnNode(CLIENT, [], {
        CONCH_URL: runner.url,
        CONCH_API_KEY: runner.apiKey,
        SANDBOX_ID: sandbox.id,
        SESSION_ID: sh.sessionId,
        HISTORY_MATCH: 'e2e-in-flight',
        ...(mode === 'from offset 0' ? { REATTACH_OFFSET: '0' } : {}),
      })
      const attached = JSON.parse(await child.waitForLine((l) => l.includes('"attached"'))) as Seen
      expect(attached.running).not.toBeNull()

      await sandbox.files.write('/workspace/e2e-release', '')
      const result = await pending
      expect(result).toMatchObject({ stdout: 'first\nsecond\n', stderr: 'second-err\n', exitCode: 3 })

      const exit = await child.exited
      expect(exit, child.output()).toEqual({ code: 0, signal: null })
      const seen = parseLines(child.stdoutLines())
      const stdout = textOf(seen, 'stdout')
      expect(stdout).toBe(mode === 'live' ? 'second\n' : 'first\nsecond\n')
      expect(textOf(seen, 'stderr')).toBe('second-err\n')
      expect(seen.filter((s) => s.event === 'output').every((s) => s.runId === attached.running)).toBe(true)
      expect(seen.find((s) => s.event === 'own-run')).toMatchObject({
        stdout: 'from-the-child\n',
        exitCode: 0,
      })
      expect(seen.find((s) => s.event === 'history')?.exitCodes).toEqual([3])
    })
  }

  test('rejects a resume from an evicted offset with OutputLostError', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    // The e2e runner keeps 256 KiB of scrollback per session; write well past it.
    const big = await sh.run('head -c 1000000 /dev/zero | tr "\\0" x')
    expect(big.stdoutBytes).toBe(1_000_000)
    const error = await sandbox.reattachShell(sh.sessionId, { offset: 0 }).then(
      (again) => {
        again.close()
        return null
      },
      (err: unknown) => err,
    )
    expect(error).toBeInstanceOf(OutputLostError)
    expect((error as OutputLostError).code).toBe('OUTPUT_LOST')

    // The session itself is fine: a reattach without an offset works.
    await using again = await sandbox.reattachShell(sh.sessionId)
    expect((await again.run('echo still-here')).stdout).toBe('still-here\n')
  })
})
