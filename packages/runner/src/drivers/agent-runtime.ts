// What a sandbox needs of the host to run the agent, and where it appears inside: the Node
// binary, the agent's and the protocol's package.json and src/, and zod, each bound read-only
// under /opt/conch. The agent runs from source exactly as the local driver runs it, so nothing
// is built; the layout mirrors node_modules resolution (`/opt/conch/node_modules/@conch/protocol`
// is a symlink to `/opt/conch/protocol`, so its real path is outside node_modules, where Node
// strips types).
import { existsSync, readFileSync, realpathSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative } from 'node:path'
import { resolveAgentEntry } from './local-driver.ts'

/** Where the agent's files appear inside a sandbox. */
export const GUEST_RUNTIME_DIR = '/opt/conch'

/** One host path bound read-only into the sandbox. */
export interface RuntimeMount {
  /** Real path on the host. */
  host: string
  /** Path inside the sandbox. */
  guest: string
}

/** The agent's files, located on the host and placed in the sandbox. */
export interface AgentRuntime {
  /** Read-only bind mounts. */
  mounts: RuntimeMount[]
  /** Symlinks inside the sandbox, as [target, path]. */
  symlinks: [string, string][]
  /** The Node binary inside the sandbox. */
  node: string
  /** The agent's entry file inside the sandbox. */
  entry: string
}

/** The nearest folder at or above `file` holding a package.json (with `name` when given). */
function packageRoot(file: string, name?: string): string {
  let dir = dirname(file)
  for (;;) {
    const manifest = join(dir, 'package.json')
    if (existsSync(manifest)) {
      if (name === undefined) return dir
      const parsed: unknown = JSON.parse(readFileSync(manifest, 'utf8'))
      if (typeof parsed === 'object' && parsed !== null && 'name' in parsed && parsed.name === name)
        return dir
    }
    const up = dirname(dir)
    if (up === dir) throw new Error(`no package.json${name ? ` for ${name}` : ''} above ${file}`)
    dir = up
  }
}

/** Locates the agent, the protocol, zod and Node on the host and lays them out under /opt/conch. */
export function locateAgentRuntime(nodePath: string, agentEntry?: string): AgentRuntime {
  const entry = realpathSync(agentEntry ?? resolveAgentEntry())
  const agentDir = packageRoot(entry)
  const protocolDir = realpathSync(
    packageRoot(createRequire(join(agentDir, 'package.json')).resolve('@conch/protocol'), '@conch/protocol'),
  )
  const zodDir = realpathSync(
    packageRoot(createRequire(join(protocolDir, 'package.json')).resolve('zod'), 'zod'),
  )
  const g = GUEST_RUNTIME_DIR
  return {
    mounts: [
      { host: realpathSync(nodePath), guest: `${g}/node` },
      { host: join(agentDir, 'package.json'), guest: `${g}/agent/package.json` },
      { host: join(agentDir, 'src'), guest: `${g}/agent/src` },
      { host: join(protocolDir, 'package.json'), guest: `${g}/protocol/package.json` },
      { host: join(protocolDir, 'src'), guest: `${g}/protocol/src` },
      { host: zodDir, guest: `${g}/node_modules/zod` },
    ],
    symlinks: [['../../protocol', `${g}/node_modules/@conch/protocol`]],
    node: `${g}/node`,
    entry: `${g}/agent/${relative(agentDir, entry)}`,
  }
}
