// The agent bundle is what every sandbox's agent runs and holds in memory for as long as it
// lives: it must be ASCII (so V8 keeps its source one byte per character), must not carry zod's
// other languages, and must still report a bad argument with zod's English message.
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
  it('is ASCII, carries no zod locale but English, and still explains a bad argument in English', async () => {
    const file = join(dir, 'conch-agent.mjs')
    await writeAgentBundle(resolveAgentEntry(), file)
    const text = readFileSync(file)
    expect(text.findIndex((byte) => byte > 0x7f)).toBe(-1)
    const source = text.toString('latin1')
    for (const locale of ['de', 'fr', 'ja', 'zh-CN'])
      expect(source).not.toContain(`zod/v4/locales/${locale}.js`)
    expect(source).toContain('zod/v4/locales/en.js')

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
    expect(result.stderr).toContain('Invalid input: expected string, received undefined')
  }, 60_000)
})
