// The agent bundle is what every sandbox's agent runs and holds in memory for as long as it
// lives: it must be ASCII (so V8 keeps its source one byte per character), must not carry zod
// (it checks its input with the protocol's zod-free checker), and must still explain a bad
// argument.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { asciiSource, resolveAgentEntry, writeAgentBundle } from './agent-bundle.ts'

const dir = mkdtempSync(join(tmpdir(), 'conch-agent-bundle-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('asciiSource', () => {
  it('writes every non-ASCII character as a \\u{} escape and leaves ASCII alone', () => {
    expect(asciiSource('// a — b ↔ c 😀\nconst x = "y"')).toBe(
      '// a \\u{2014} b \\u{2194} c \\u{1f600}\nconst x = "y"',
    )
  })
})

describe('the agent bundle', () => {
  it('is ASCII, carries no zod, and still explains a bad argument', async () => {
    const file = join(dir, 'conch-agent.mjs')
    await writeAgentBundle(resolveAgentEntry(), file)
    const text = readFileSync(file)
    expect(text.findIndex((byte) => byte > 0x7f)).toBe(-1)
    const source = text.toString('latin1')
    expect(source).not.toMatch(/zod/i)
    // The checker that replaces it is there.
    expect(source).toContain('x-refine')

    const result = spawnSync(
      process.execPath,
      [file, '--socket', join(dir, 'agent.sock'), '--secretFd', '3'],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 30_000,
      },
    )
    expect(result.status).not.toBe(0)
    expect(result.stderr).toContain('root: expected a value')
  }, 60_000)
})
