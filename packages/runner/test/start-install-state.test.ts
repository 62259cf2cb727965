// `npm start` decides from scripts/install-state.mjs whether to run `pnpm install`, and runs the
// root `runner` script's node command (read by scripts/node-script.mjs) without pnpm. Each test
// builds a small workspace in a temp folder, as pnpm would leave it after an install.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { installInputs, installState, recordInstall } from '../../../scripts/install-state.mjs'
import { nodeScriptArgs } from '../../../scripts/node-script.mjs'

/** A workspace with a root, one package with dependencies and one without, installed. */
function installedWorkspace(): AsyncDisposable & { root: string } {
  const root = mkdtempSync(join(tmpdir(), 'conch-install-state-'))
  const write = (file: string, text: string) => {
    mkdirSync(join(root, file, '..'), { recursive: true })
    writeFileSync(join(root, file), text)
  }
  write('package.json', JSON.stringify({ name: 'w', devDependencies: { vitest: '5.1.1' } }))
  write('pnpm-workspace.yaml', 'packages:\n  - packages/*\n  - "tests-e2e"\n\ncatalog:\n  zod: 4.6.7\n')
  write('pnpm-lock.yaml', "lockfileVersion: '9.0'\nimporters:\n  .: {}\n")
  write('packages/sdk/package.json', JSON.stringify({ name: 'sdk', dependencies: { ws: '8.23.0' } }))
  write('packages/empty/package.json', JSON.stringify({ name: 'empty' }))
  write('tests-e2e/package.json', JSON.stringify({ name: 'e2e', devDependencies: { vitest: '5.1.1' } }))
  write('node_modules/.modules.yaml', 'layoutVersion: 5\n')
  write('packages/sdk/node_modules/.keep', '')
  write('tests-e2e/node_modules/.keep', '')
  recordInstall(root)
  return { root, [Symbol.asyncDispose]: async () => rmSync(root, { recursive: true, force: true }) }
}

describe('install state', () => {
  it('is current right after a recorded install', async () => {
    await using w = installedWorkspace()
    expect(installState(w.root)).toEqual({ current: true })
  })

  it('hashes the lockfile, the workspace file and every workspace package.json', async () => {
    await using w = installedWorkspace()
    expect(installInputs(w.root)).toEqual([
      'package.json',
      'pnpm-lock.yaml',
      'pnpm-workspace.yaml',
      'packages/empty/package.json',
      'packages/sdk/package.json',
      'tests-e2e/package.json',
    ])
  })

  it('asks for an install when the lockfile changed', async () => {
    await using w = installedWorkspace()
    writeFileSync(join(w.root, 'pnpm-lock.yaml'), "lockfileVersion: '9.0'\nimporters:\n  .: {x: 1}\n")
    expect(installState(w.root)).toMatchObject({ current: false, reason: expect.stringContaining('changed') })
  })

  it('asks for an install when a package.json changed or a package was added', async () => {
    await using w = installedWorkspace()
    writeFileSync(
      join(w.root, 'packages/empty/package.json'),
      JSON.stringify({ name: 'empty', version: '2' }),
    )
    expect(installState(w.root).current).toBe(false)
    recordInstall(w.root)
    expect(installState(w.root).current).toBe(true)
    mkdirSync(join(w.root, 'packages/new'))
    writeFileSync(join(w.root, 'packages/new/package.json'), '{"name":"new"}')
    expect(installState(w.root).current).toBe(false)
  })

  it("asks for an install when pnpm's node_modules is gone", async () => {
    await using w = installedWorkspace()
    rmSync(join(w.root, 'node_modules/.modules.yaml'))
    expect(installState(w.root)).toEqual({ current: false, reason: 'node_modules is missing' })
  })

  it("asks for an install when a package's node_modules is gone", async () => {
    await using w = installedWorkspace()
    rmSync(join(w.root, 'tests-e2e/node_modules'), { recursive: true })
    expect(installState(w.root)).toEqual({ current: false, reason: 'tests-e2e/node_modules is missing' })
  })

  it('asks for an install when no install finished or the record is garbage', async () => {
    await using w = installedWorkspace()
    const record = join(w.root, 'node_modules/.conch-install-state.json')
    writeFileSync(record, 'not json')
    expect(installState(w.root).current).toBe(false)
    rmSync(record)
    expect(installState(w.root)).toEqual({ current: false, reason: 'no record of a finished install' })
  })
})

describe('runner script arguments', () => {
  it("reads the root runner script's flags, so npm start runs the runner as pnpm would", () => {
    const root = join(import.meta.dirname, '..', '..', '..')
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      scripts: { runner: string }
    }
    const args = nodeScriptArgs(pkg.scripts.runner)
    expect(args).toContain('--conditions=source')
    expect(args?.at(-2)).toBe('packages/runner/src/bin.ts')
    expect(args?.at(-1)).toBe('runner')
  })

  it('gives up on a script that needs a shell', () => {
    expect(nodeScriptArgs('node a.js && node b.js')).toBeNull()
    expect(nodeScriptArgs('FOO=1 node a.js')).toBeNull()
    expect(nodeScriptArgs('node "$HOME/a.js"')).toBeNull()
    expect(nodeScriptArgs('tsx a.ts')).toBeNull()
    expect(nodeScriptArgs('node --flag a.js run')).toEqual(['--flag', 'a.js', 'run'])
  })
})
