// The CLI page and the runner must not drift: every flag and CONCH_* variable that
// `conch runner --help` prints is documented on /reference/cli/, and the page documents no other.
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')

function runnerBin(): string {
  const pkgDir = join(root, 'node_modules', '@conch', 'runner')
  const pkg: unknown = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'))
  if (typeof pkg === 'object' && pkg !== null && 'bin' in pkg) {
    const { bin } = pkg
    if (typeof bin === 'object' && bin !== null && 'conch' in bin && typeof bin.conch === 'string') {
      return join(pkgDir, bin.conch)
    }
  }
  throw new Error('@conch/runner has no "conch" bin')
}

/** `[flag or '', variable]` pairs. */
type Setting = [string, string]

function helpText(): string {
  const help = spawnSync(process.execPath, ['--conditions=source', runnerBin(), 'runner', '--help'], {
    encoding: 'utf8',
  })
  expect(help.status).toBe(0)
  return help.stdout
}

function fromHelp(): Setting[] {
  const settings: Setting[] = []
  for (const line of helpText().split('\n')) {
    // A setting's first line: two spaces, the flag (and its value placeholder) or the variable
    // alone; the description under it is indented further.
    const flag = /^ {2}(--[a-z-]+)(?: <[a-z]+>)?\s+env (CONCH_[A-Z_]+)/.exec(line)
    if (flag) settings.push([flag[1]!, flag[2]!])
    const envOnly = /^ {2}(CONCH_[A-Z_]+)\s/.exec(line)
    if (envOnly) settings.push(['', envOnly[1]!])
  }
  return settings.sort()
}

function fromPage(): Setting[] {
  const page = readFileSync(join(root, 'src', 'content', 'docs', 'reference', 'cli.md'), 'utf8')
  const settings: Setting[] = []
  for (const line of page.split('\n')) {
    const row = /^\|\s*(?:`(--[a-z-]+)`)?\s*\|\s*`(CONCH_[A-Z_]+)`/.exec(line)
    if (row) settings.push([row[1] ?? '', row[2]!])
  }
  return settings.sort()
}

it('documents exactly the flags and variables that conch runner --help prints', () => {
  const help = fromHelp()
  expect(help.length).toBeGreaterThan(5)
  expect(fromPage()).toEqual(help)
})

/** Variable → the default the help gives, for the defaults that are one value (`7878`, `auto`). */
function helpDefaults(): Map<string, string> {
  const defaults = new Map<string, string>()
  for (const block of helpText().split(/\n(?= {2}\S)/)) {
    const env = /^ {2}(?:--[a-z-]+(?: <[a-z]+>)?\s+env )?(CONCH_[A-Z_]+)/.exec(block)?.[1]
    const value = /Default: (\S+?)\.(?:\s|$)/.exec(block.replace(/\s+/g, ' '))?.[1]
    if (env && value) defaults.set(env, value)
  }
  return defaults
}

it('gives the same one-value defaults as conch runner --help', () => {
  const page = readFileSync(join(root, 'src', 'content', 'docs', 'reference', 'cli.md'), 'utf8')
  const pageDefaults = new Map<string, string>()
  for (const line of page.split('\n')) {
    const row = /^\|[^|]*\|\s*`(CONCH_[A-Z_]+)`\s*\|\s*([^|]*?)\s*\|/.exec(line)
    if (row) pageDefaults.set(row[1]!, row[2]!)
  }
  const defaults = helpDefaults()
  expect(defaults.get('CONCH_PORT')).toBe('7878')
  expect(defaults.size).toBeGreaterThan(15)
  for (const [env, value] of defaults) expect(pageDefaults.get(env)?.replaceAll('`', ''), env).toBe(value)
})
