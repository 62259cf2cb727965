// The agent as one JavaScript file: the agent, the link and the protocol's zod-free modules
// bundled by esbuild, with no imports but Node's own (the agent checks its input without zod;
// see docs/PROTOCOL.md, "Validation"). Every driver runs this file, so a sandbox needs only a Node binary and
// it. The published package ships it as `conch-agent.mjs` beside the runner's code. Running
// from source (a checkout, the tests), it is built on first use into a cache named by a hash of
// what it is built from (the agent's, the link's and the protocol's sources by relative path,
// the build options), so an edited agent is rebuilt, an unchanged one costs only the hash, and a
// copy of the checkout elsewhere (the VM tier) finds the same file without esbuild.
import { createHash } from 'node:crypto'
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { BuildOptions } from 'esbuild'
import { RunnerError } from '../runner-error.ts'
import { ensurePtyRuntime } from './pty-runtime.ts'

/** The bundle's file name: beside the runner's code in the package, and in sandboxes (`/opt/conch/`). */
export const AGENT_BUNDLE_FILE = 'conch-agent.mjs'

/** The oldest Node the bundle is compiled for (the runner checks it at start). */
export const AGENT_BUNDLE_TARGET = 'node22'

/** What esbuild needs to bundle the agent from `entry` (its source main file). */
function agentBundleOptions(entry: string): BuildOptions & { write: false } {
  return {
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: AGENT_BUNDLE_TARGET,
    conditions: ['source'],
    // Not minified: a stack trace in an agent's log names the agent's real functions.
    minify: false,
    legalComments: 'none',
    // Non-ASCII in strings, identifiers and regexps is escaped, so V8 keeps the source (which it
    // holds for as long as the agent lives) one byte per character, not two (see asciiSource).
    charset: 'ascii',
    write: false,
    logLevel: 'silent',
  }
}

/**
 * The bundle's text with every non-ASCII character written as `\u{…}`. With `charset: 'ascii'`
 * the only ones esbuild leaves are in comments, where the escape is text like any other; one
 * such character would make V8 hold the whole source as UTF-16, twice its size (measured: a
 * 2.1 MB string instead of 0.9 MB for a bundle that carried zod's locales).
 */
export function asciiSource(text: string): string {
  return text.replace(/[\u{80}-\u{10ffff}]/gu, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`)
}

/** The nearest folder at or above `file` holding a package.json named `name`. */
function packageRoot(file: string, name: string): string {
  let dir = dirname(file)
  for (;;) {
    const manifest = join(dir, 'package.json')
    if (existsSync(manifest)) {
      const parsed: unknown = JSON.parse(readFileSync(manifest, 'utf8'))
      if (typeof parsed === 'object' && parsed !== null && 'name' in parsed && parsed.name === name)
        return dir
    }
    const up = dirname(dir)
    if (up === dir) throw new Error(`no package.json of ${name} above ${file}`)
    dir = up
  }
}

/** Hashes every non-test source file under `dir` (named relative to `base`), in a stable order. */
function hashTree(hash: ReturnType<typeof createHash>, base: string, dir = base): void {
  for (const entry of readdirSync(dir).sort()) {
    const path = join(dir, entry)
    if (statSync(path).isDirectory()) hashTree(hash, base, path)
    else if (!entry.endsWith('.test.ts')) hash.update(`${relative(base, path)}\0`).update(readFileSync(path))
  }
}

/** The cache key of a bundle built from the agent whose main file is `entry`. */
function agentSourceKey(entry: string): string {
  const agentDir = packageRoot(entry, '@conch/agent')
  const agentManifest = join(agentDir, 'package.json')
  const protocolDir = packageRoot(createRequire(agentManifest).resolve('@conch/protocol'), '@conch/protocol')
  const linkDir = packageRoot(createRequire(agentManifest).resolve('@conch/link'), '@conch/link')
  const hash = createHash('sha256')
  hash.update('agent\0')
  hashTree(hash, join(agentDir, 'src'))
  hash.update('link\0')
  hashTree(hash, join(linkDir, 'src'))
  hash.update('protocol\0')
  hashTree(hash, join(protocolDir, 'src'))
  hash.update(JSON.stringify(agentBundleOptions('')))
  return hash.digest('hex').slice(0, 16)
}

/** Bundles the agent from `entry` into `outFile` (written whole, then renamed into place). */
export async function writeAgentBundle(entry: string, outFile: string): Promise<void> {
  // esbuild is a development dependency: only a checkout reaches this, never the published package.
  const esbuild = await import('esbuild')
  const result = await esbuild.build(agentBundleOptions(entry))
  const [output] = result.outputFiles
  if (!output) throw new Error(`esbuild produced no output for ${entry}`)
  mkdirSync(dirname(outFile), { recursive: true })
  const temp = `${outFile}.${process.pid}.tmp`
  writeFileSync(temp, asciiSource(output.text), { mode: 0o644 })
  renameSync(temp, outFile)
}

/** Where a checkout keeps built bundles: the runner package's `node_modules/.cache`. */
function devCacheDir(): string {
  return join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'node_modules', '.cache', 'conch-agent')
}

/** Locates the agent's source main file (`@conch/agent/main`) without importing it. */
export function resolveAgentEntry(): string {
  // vitest's module runner may lack import.meta.resolve; require resolution finds the same file
  // (the package maps `default` to it too).
  const resolve = (import.meta as { resolve?: (s: string) => string }).resolve
  if (typeof resolve === 'function') {
    try {
      return fileURLToPath(resolve('@conch/agent/main'))
    } catch {
      // fall through
    }
  }
  return createRequire(import.meta.url).resolve('@conch/agent/main')
}

/**
 * The agent bundle's path on the host: built from `agentEntry` (the agent's source main file)
 * when given; else the one shipped beside the runner's code; else, running from source, one
 * built from `@conch/agent` on first use. Built bundles are cached by their sources' content.
 */
export async function locateAgentBundle(agentEntry?: string): Promise<string> {
  const shipped = fileURLToPath(new URL(`./${AGENT_BUNDLE_FILE}`, import.meta.url))
  if (agentEntry === undefined && existsSync(shipped)) return shipped
  try {
    const entry = agentEntry ?? resolveAgentEntry()
    const cached = join(devCacheDir(), `conch-agent-${agentSourceKey(entry)}.mjs`)
    if (!existsSync(cached)) await writeAgentBundle(entry, cached)
    // Terminals need node-pty beside the bundle; shells work without it, so a failure here
    // only surfaces when a terminal is opened (the agent then says what is missing).
    try {
      ensurePtyRuntime(devCacheDir(), entry)
    } catch {}
    return cached
  } catch (error) {
    throw new RunnerError(
      'AGENT_UNAVAILABLE',
      `the agent bundle ${AGENT_BUNDLE_FILE} is missing beside the runner and could not be built from source (${(error as Error).message}); reinstall @conch/runner, or in a checkout run pnpm install`,
      { cause: error },
    )
  }
}
