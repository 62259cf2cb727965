// node-pty's runtime files, which the agent needs for terminals: its JavaScript (`lib/`), its
// package.json and the compiled addon `build/Release/pty.node`, nothing else of the package.
// They sit in a folder named `node-pty` beside the agent bundle, where the agent looks first
// (agent pty-loader.ts): `dist/node-pty` in the published runner, and beside the cached bundle
// when running from source; drivers bind that folder read-only at /opt/conch/node-pty. The
// addon is built by `pnpm install` against the pinned Node's headers (scripts/bootstrap.mjs);
// it uses Node-API, so the one build serves every Node the runner supports.
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

/** The folder name beside the agent bundle, on the host and in a sandbox. */
export const PTY_RUNTIME_DIR = 'node-pty'

/** What of the package the runtime needs, relative to its root. */
const RUNTIME_FILES = ['package.json', 'lib', 'build/Release/pty.node'] as const

/** The node-pty package the agent depends on, found from the agent's source main file. */
export function nodePtyPackageDir(agentEntry: string): string {
  return dirname(createRequire(agentEntry).resolve('node-pty/package.json'))
}

function versionAt(dir: string): string | null {
  try {
    const parsed: unknown = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
    return typeof parsed === 'object' && parsed !== null && 'version' in parsed
      ? String(parsed.version)
      : null
  } catch {
    return null
  }
}

/** Copies node-pty's runtime files from `packageDir` into `outDir` (written whole, then renamed). */
export function writePtyRuntime(packageDir: string, outDir: string): void {
  const addon = join(packageDir, 'build/Release/pty.node')
  if (!existsSync(addon)) {
    throw new Error(
      `node-pty's addon ${addon} was not built; run pnpm install (it needs python3, make and g++, which scripts/bootstrap.mjs installs)`,
    )
  }
  const temp = `${outDir}.${process.pid}.tmp`
  rmSync(temp, { recursive: true, force: true })
  for (const file of RUNTIME_FILES) {
    const to = join(temp, file)
    mkdirSync(dirname(to), { recursive: true })
    cpSync(join(packageDir, file), to, {
      recursive: true,
      dereference: true,
      filter: (src) => !src.endsWith('.test.js') && !src.endsWith('.map'),
    })
  }
  rmSync(outDir, { recursive: true, force: true })
  renameSync(temp, outDir)
}

/**
 * Makes sure `dir` holds node-pty's runtime beside a bundle built from `agentEntry`, copying it
 * from the agent's dependency when it is missing or of another version; returns its path.
 */
export function ensurePtyRuntime(bundleDir: string, agentEntry: string): string {
  const out = join(bundleDir, PTY_RUNTIME_DIR)
  const packageDir = nodePtyPackageDir(agentEntry)
  if (existsSync(join(out, 'build/Release/pty.node')) && versionAt(out) === versionAt(packageDir)) return out
  writePtyRuntime(packageDir, out)
  return out
}
