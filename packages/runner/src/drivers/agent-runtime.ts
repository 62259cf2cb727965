// What a sandbox needs of the host to run the agent, and where it appears inside: the Node
// binary, the agent bundle (agent-bundle.ts: the agent, the protocol and zod in one file
// with no imports but Node's own) and node-pty's runtime for terminals (pty-runtime.ts), each
// bound read-only under /opt/conch. Nothing of the
// runner's node_modules enters a sandbox.
import { existsSync, realpathSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { AGENT_BUNDLE_FILE, locateAgentBundle } from './agent-bundle.ts'
import { PTY_RUNTIME_DIR } from './pty-runtime.ts'

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
  /** Symlinks inside the sandbox, as [target, path] (the bundle needs none). */
  symlinks: [string, string][]
  /** The Node binary inside the sandbox. */
  node: string
  /** The agent's entry file inside the sandbox. */
  entry: string
  /** A read-only V8 compile cache of the entry inside the sandbox, when the runtime carries one. */
  compileCache?: string
}

/**
 * Locates Node and the agent bundle on the host and lays them out under /opt/conch. A given
 * `agentEntry` (the agent's source main file) is bundled from that source.
 */
export async function locateAgentRuntime(nodePath: string, agentEntry?: string): Promise<AgentRuntime> {
  const bundle = realpathSync(await locateAgentBundle(agentEntry))
  const g = GUEST_RUNTIME_DIR
  // node-pty's runtime (pty-runtime.ts) beside the bundle, where the agent loads it for terminals.
  const pty = join(dirname(bundle), PTY_RUNTIME_DIR)
  return {
    mounts: [
      { host: realpathSync(nodePath), guest: `${g}/node` },
      { host: bundle, guest: `${g}/${AGENT_BUNDLE_FILE}` },
      ...(existsSync(pty) ? [{ host: realpathSync(pty), guest: `${g}/${PTY_RUNTIME_DIR}` }] : []),
    ],
    symlinks: [],
    node: `${g}/node`,
    entry: `${g}/${AGENT_BUNDLE_FILE}`,
  }
}
