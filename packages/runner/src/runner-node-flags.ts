// The Node flags `conch runner` runs with, the one place every launch path takes them from: the
// bin (bin.ts) starts Node again with them when it was started without, and the root
// `pnpm runner` script, the image's entrypoint and the systemd unit all go through the bin.
// Imports nothing: the bin reads it before its version check has passed. docs/MEMORY.md has
// what each flag was measured to buy.

/**
 * V8 and Node flags for the long-lived runner process:
 * - `--max-semi-space-size=2`: a young generation of a few MiB instead of one that grew to
 *   67 MB under 40 000 pipelined runs and stayed committed after them.
 * - `--v8-pool-size=1`: one V8 worker thread instead of one per core; each thread brings its
 *   own malloc arena.
 *
 * No old-space cap: a runner's heap grows with the sandboxes and sockets it serves.
 */
export const RUNNER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=2', '--v8-pool-size=1']

/** A flag's name without its value, spelt with dashes (V8 also accepts underscores). */
function flagName(flag: string): string {
  return flag.split('=', 1)[0]!.replaceAll('_', '-')
}

/**
 * The runner flags this process was started without. A flag counts as given when its name is
 * on Node's command line (`execArgv`) or in `NODE_OPTIONS`, whatever its value, so a flag the
 * operator chose is never overridden.
 */
export function missingRunnerNodeFlags(execArgv: readonly string[], nodeOptions = ''): string[] {
  const given = new Set(
    [...execArgv, ...nodeOptions.split(/\s+/)].filter((a) => a.startsWith('--')).map(flagName),
  )
  return RUNNER_NODE_FLAGS.filter((flag) => !given.has(flagName(flag)))
}

/**
 * The argv (program first) that starts this same script again under `execPath` with the
 * missing runner flags, or null when none are missing. Node's own flags of this start
 * (`execArgv`, e.g. `--conditions`) and the script's arguments are kept.
 */
export function runnerRelaunchArgv(
  execPath: string,
  execArgv: readonly string[],
  argv: readonly string[],
  nodeOptions?: string,
): string[] | null {
  const missing = missingRunnerNodeFlags(execArgv, nodeOptions)
  if (missing.length === 0) return null
  return [execPath, ...missing, ...execArgv, ...argv.slice(1)]
}
