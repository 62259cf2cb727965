// `conch --help`, `--version` and the command line's mistakes, as a real child process: the help
// describes every setting, and a mistake is one line on stderr with exit code 2, never a stack
// or a raw schema message.
import { type SpawnSyncReturns, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { SETTINGS } from '../src/runner-settings.ts'

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url))
const VERSION = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version

function conch(args: string[], env: Record<string, string> = {}): SpawnSyncReturns<string> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CONCH_')))
  return spawnSync(process.execPath, ['--conditions=source', MAIN, ...args], {
    encoding: 'utf8',
    env: { ...clean, ...env },
    timeout: 60_000,
  })
}

describe('conch --help', () => {
  const help = conch(['runner', '--help'])

  it('describes every flag and variable with its default, and the allowed values of each fixed set', () => {
    expect(help.status).toBe(0)
    expect(help.stderr).toBe('')
    const lines = help.stdout.split('\n')
    for (const setting of SETTINGS) {
      const head = lines.findIndex((l) =>
        setting.flag
          ? l.startsWith(`  ${setting.flag} `) || l === `  ${setting.flag}`
          : l.startsWith(`  ${setting.env} `),
      )
      expect(head, `${setting.flag ?? setting.env} is in the help`).toBeGreaterThan(-1)
      expect(lines[head]).toContain(setting.env)
      const body: string[] = []
      for (const l of lines.slice(head + 1)) {
        if (!l.startsWith('      ')) break
        body.push(l.trim())
      }
      const text = body.join(' ')
      expect(text, `${setting.env} has a description`).toMatch(/^[A-Z].{20,}/)
      expect(text, `${setting.env} has a default`).toMatch(/Default: \S/)
      if (setting.values) expect(text).toContain(`Values: ${setting.values}`)
    }
    expect(help.stdout).toContain('Default: 7878.')
    expect(help.stdout).toContain('Values: auto, gvisor, namespace, local, ssh.')
    expect(help.stdout).toContain('Values: auto, pretty, json.')
  })

  it('prints the same help for -h, --help, help, conch alone and conch runner -h, each with exit code 0', () => {
    for (const args of [
      ['-h'],
      ['--help'],
      ['help'],
      [],
      ['runner', '-h'],
      ['runner', '--port', '0', '--help'],
    ]) {
      const run = conch(args)
      expect(run.status, args.join(' ')).toBe(0)
      expect(run.stdout, args.join(' ')).toBe(help.stdout)
    }
  })

  it('prints the version from the runner package.json for --version and -v', () => {
    for (const args of [['--version'], ['-v'], ['runner', '--version']]) {
      const run = conch(args)
      expect(run.status).toBe(0)
      expect(run.stdout).toBe(`${VERSION}\n`)
    }
    expect(help.stdout.split('\n')[0]).toContain(`conch ${VERSION}`)
  })
})

/** Exit code 2 and one `conch:` line on stderr matching `pattern`, with no stack and no zod message. */
function expectMistake(run: SpawnSyncReturns<string>, pattern: RegExp): void {
  expect(run.status, run.stderr).toBe(2)
  const lines = run.stderr.trimEnd().split('\n')
  expect(lines, run.stderr).toHaveLength(1)
  expect(lines[0]).toMatch(/^conch: /)
  expect(lines[0]).toMatch(pattern)
  expect(run.stderr).not.toMatch(/^\s+at |Invalid input|received NaN|ZodError|"code":/m)
  expect(run.stdout).toBe('')
}

describe('a mistake on the command line', () => {
  it('names an unknown command and the ones there are', () => {
    expectMistake(conch(['start']), /unknown command "start"; the commands are runner and mcp/)
  })

  it('says what conch mcp --transport accepts', () => {
    expectMistake(
      conch(['mcp', '--transport', 'carrier-pigeon']),
      /--transport is stdio or http, not "carrier-pigeon"/,
    )
  })

  it('names an unknown conch mcp flag and points at its help', () => {
    expectMistake(conch(['mcp', '--shell', 'zsh']), /Unknown option '--shell'.*conch mcp --help/)
  })

  it('says that flags go after the command', () => {
    expectMistake(conch(['--port', '0']), /flags go after the command: conch runner --port 0/)
  })

  it('says what --port accepts when given a word, and points at --help', () => {
    expectMistake(
      conch(['runner', '--port', 'abc']),
      /--port abc is not valid: use an integer from 0 to 65535; run conch runner --help/,
    )
    expectMistake(
      conch(['runner'], { CONCH_PORT: '70000' }),
      /CONCH_PORT=70000 is not valid: use an integer from 0 to 65535/,
    )
  })

  it('names an unknown flag, a flag without its value and a stray argument', () => {
    expectMistake(conch(['runner', '--prot', '0']), /unknown flag --prot; run conch runner --help/)
    expectMistake(conch(['runner', '-p', '0']), /unknown flag -p;/)
    expectMistake(
      conch(['runner', '--port']),
      /flag --port needs a value \(<port>: an integer from 0 to 65535\)/,
    )
    expectMistake(conch(['runner', '--state-dir', '--port', '0']), /flag --state-dir needs a value/)
    expectMistake(conch(['runner', 'now']), /unexpected argument "now"/)
  })

  it('lists the allowed values of a fixed set and every bad setting on the same line', () => {
    expectMistake(
      conch(['runner', '--driver', 'vm', '--log-format', 'xml']),
      /--driver vm is not valid: use one of auto, gvisor, namespace, local, ssh; --log-format xml is not valid: use one of auto, pretty, json/,
    )
  })

  it('never repeats a bad API key', () => {
    const run = conch(['runner'], { CONCH_API_KEY: 'short-secret' })
    expectMistake(run, /CONCH_API_KEY=… is not valid: use at least 16 characters/)
    expect(run.stderr).not.toContain('short-secret')
  })
})
