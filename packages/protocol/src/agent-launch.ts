import type { AgentArgs } from './agent-args.ts'

// How a driver starts an agent. The driver runs the agent bundle (`conch-agent.mjs`: the agent's
// entry `@conch/agent/main` with the link and the protocol's zod-free modules, built by esbuild) after `AGENT_NODE_FLAGS`, detached from the runner,
// with the arguments below, and with an environment that is exactly the sandbox's base environment
// (never the runner's own: it holds secrets). The agent gives that environment, minus
// `CONCH_AGENT_*` variables, to sessions that do not ask for `cleanEnv`. The driver creates the
// agent's listening socket where sandbox code cannot reach it and passes it as an fd, and writes
// the sandbox's link secret into a pipe whose read end is another fd (or, where fds cannot cross,
// such as into gVisor, a root-only file the agent deletes once read); the agent reads it at start.
// The agent outlives its runner: it keeps serving, and a new runner connection that proves the
// secret replaces the previous one.

/**
 * Node flags every driver starts the agent with, before its entry file. The agent is one small
 * process per sandbox that lives for hours, so its heap is sized for that:
 * - `--max-semi-space-size=1`: a 1 MiB young generation. Runs allocate short-lived objects
 *   quickly; by default the young generation grows to 16 MiB per semi-space and stays
 *   committed, and more survivors reach the old space between full collections.
 * - `--max-old-space-size=192`: a cap well inside the 256 MiB the sandbox's memory cgroup
 *   keeps for the agent, so a runaway heap ends with V8's "JavaScript heap out of memory" in
 *   the agent's log rather than an anonymous OOM kill; a cap this small also makes V8 grow the
 *   heap in small steps.
 * - `--v8-pool-size=1`: one V8 worker thread instead of one per core; each thread brings its
 *   own malloc arena.
 * Measured figures are in docs/MEMORY.md.
 */
export const AGENT_NODE_FLAGS: readonly string[] = [
  '--max-semi-space-size=1',
  '--max-old-space-size=192',
  '--v8-pool-size=1',
]

/** Environment variables with this prefix configure the agent and are never passed to sessions. */
export const AGENT_ENV_PREFIX = 'CONCH_AGENT_'

/** The workspace path as the files API names it; drivers map it to the sandbox root. */
export const WORKSPACE_PATH = '/workspace'

/** Turns `--socket x --root y` into an object for `AgentArgs.parse`. */
export function argvToRecord(argv: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {}
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (!arg.startsWith('--')) continue
    const eq = arg.indexOf('=')
    if (eq > 0) out[arg.slice(2, eq)] = arg.slice(eq + 1)
    else out[arg.slice(2)] = argv[++i] ?? ''
  }
  return out
}

/**
 * The Node flag that turns on V8's compile cache in `dir` before the agent's entry loads (a
 * preload module given as a data URL, so no file is added and no variable reaches the sandbox's
 * sessions). The cache is portable: entries are keyed by the entry's path relative to `dir`, so
 * a cache built beside the bundle on the host serves the bundle where the sandbox sees it. A
 * Node without the option, or an unreadable dir, leaves the cache off and nothing else changes.
 */
export function compileCacheFlag(dir: string): string {
  const code = `import m from "node:module";try{m.enableCompileCache?.({directory:${JSON.stringify(dir)},portable:true})}catch{}`
  return `--import=data:text/javascript,${encodeURIComponent(code)}`
}

/**
 * The command line that starts an agent: Node with `AGENT_NODE_FLAGS` (and the compile cache in
 * `compileCache`, when given), the agent's entry file, then `args` as `--name value` pairs (the
 * inverse of `argvToRecord`). Every driver builds its agent command here, so the flags and the
 * arguments' spelling live in one place.
 */
export function agentCommand(node: string, entry: string, args: AgentArgs, compileCache?: string): string[] {
  const cache = compileCache === undefined ? [] : [compileCacheFlag(compileCache)]
  const argv: string[] = [node, ...AGENT_NODE_FLAGS, ...cache, entry]
  for (const [name, value] of Object.entries(args)) {
    if (value !== undefined) argv.push(`--${name}`, String(value))
  }
  return argv
}
