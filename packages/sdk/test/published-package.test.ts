// What npm users get: the packed files, a README whose links work on the npm page, and the
// repository fields the release workflow stamps for provenance.
import { execFileSync, spawnSync } from 'node:child_process'
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { afterAll, describe, expect, it } from 'vitest'

const sdkDir = join(import.meta.dirname, '..')
const repoRoot = join(sdkDir, '..', '..')
const stampScript = join(repoRoot, 'scripts', 'stamp-package-metadata.mjs')
const temps: string[] = []
/**
 * The SDK's size budget: its bundle, gzipped. It validates with schemas generated from the
 * protocol (no zod); 24.9 KiB with backpressure, binary frames, retries, typed error details
 * and the suggestion map; 29.9 KiB with terminals, piped stdin, ports and snapshots (esbuild
 * keeps the TSDoc of class members); 31.3 KiB with the checker shared with the agent (tuples,
 * coercion, named refinements), idle lifetimes and keep-alives, and unexposing ports; 32.0 KiB
 * with a checker compiled once per server frame type and output text decoded in 64 KiB pieces
 * (both measured cuts of the client's CPU per run and per MiB). About 7.4 KiB of it is TSDoc.
 */
const GZIP_BUDGET_BYTES = 33 * 1024
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true })
})

describe('the published @conch/sdk', () => {
  it('packs its build, README and the MIT license, and nothing else', () => {
    const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts=false'], {
      cwd: sdkDir,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    })
    const [pack] = JSON.parse(out) as [{ files: { path: string }[] }]
    const paths = pack.files.map((f) => f.path)
    expect(paths).toEqual(expect.arrayContaining(['LICENSE', 'README.md', 'package.json', 'dist/index.js']))
    expect(paths.filter((p) => !/^(LICENSE|README\.md|package\.json|dist\/.+)$/.test(p))).toEqual([])
    expect(readFileSync(join(sdkDir, 'LICENSE'), 'utf8')).toMatch(/^MIT License/)
  })

  it('keeps its bundle within the gzipped size budget, with no zod in it', () => {
    const bundle = readFileSync(join(sdkDir, 'dist', 'index.js'))
    expect(gzipSync(bundle, { level: 9 }).byteLength).toBeLessThanOrEqual(GZIP_BUDGET_BYTES)
    expect(bundle.toString('utf8')).not.toMatch(/from ['"]zod/)
  })

  it('has no relative links in its README (npm renders them broken)', () => {
    const readme = readFileSync(join(sdkDir, 'README.md'), 'utf8')
    const links = [...readme.matchAll(/\]\(([^)]+)\)/g)].map((m) => m[1])
    expect(links.filter((href) => !/^(https:\/\/|#)/.test(href ?? ''))).toEqual([])
  })
})

describe('stamp-package-metadata', () => {
  const copyRepo = () => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-stamp-'))
    temps.push(dir)
    for (const name of ['sdk', 'runner', 'protocol'])
      cpSync(join(repoRoot, 'packages', name, 'package.json'), join(dir, 'packages', name, 'package.json'))
    return dir
  }

  it('names the repository the workflow runs in, on public packages only', () => {
    const dir = copyRepo()
    const env = { ...process.env, GITHUB_SERVER_URL: 'https://github.com', GITHUB_REPOSITORY: 'acme/conch' }
    execFileSync(process.execPath, [stampScript, dir], { env, stdio: 'ignore' })
    const sdk = JSON.parse(readFileSync(join(dir, 'packages', 'sdk', 'package.json'), 'utf8'))
    expect(sdk.repository).toEqual({
      type: 'git',
      url: 'git+https://github.com/acme/conch.git',
      directory: 'packages/sdk',
    })
    expect(sdk.bugs).toEqual({ url: 'https://github.com/acme/conch/issues' })
    expect(sdk.homepage).toBe('https://github.com/acme/conch/tree/main/packages/sdk#readme')
    const protocol = JSON.parse(readFileSync(join(dir, 'packages', 'protocol', 'package.json'), 'utf8'))
    expect(protocol.private).toBe(true)
    expect(protocol.repository).toBeUndefined()
  })

  it('refuses to guess outside GitHub Actions, and rejects a malformed repository name', () => {
    for (const repo of [undefined, 'acme', 'acme/conch/../../x', 'acme/con ch']) {
      const dir = copyRepo()
      const env: NodeJS.ProcessEnv = { ...process.env, GITHUB_SERVER_URL: 'https://github.com' }
      if (repo === undefined) delete env.GITHUB_REPOSITORY
      else env.GITHUB_REPOSITORY = repo
      const result = spawnSync(process.execPath, [stampScript, dir], { env, encoding: 'utf8' })
      expect(result.status).toBe(2)
      expect(result.stderr).toContain('GITHUB_REPOSITORY')
      const sdk = JSON.parse(readFileSync(join(dir, 'packages', 'sdk', 'package.json'), 'utf8'))
      expect(sdk.repository).toBeUndefined()
    }
  })
})
