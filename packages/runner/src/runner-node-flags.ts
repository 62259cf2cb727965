// The Node flags `conch runner` runs with, the one place every launch path takes them from: the
// bin (bin.ts) starts Node again with them when it was started without, and the root
// `pnpm runner` script, the image's entrypoint and the systemd unit all go through the bin.
// Imports nothing: the bin reads it before its version check has passed. docs/MEMORY.md has
// what each flag and the malloc settings were measured to buy.

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
 * glibc malloc settings for the runner, given as `GLIBC_TUNABLES` (other C libraries ignore it):
 * - `mmap_threshold=32768`: the relay's per-chunk buffers (64 KiB socket reads, output frames)
 *   get their own mappings, which go back to the system as soon as V8 frees them, instead of
 *   coming from malloc's heap, which kept about 40 MB after one large stream. A fixed threshold
 *   also stops glibc from raising it to the largest block freed so far.
 * - `trim_threshold=131072`: free memory at the top of malloc's heap goes back once it passes
 *   128 KiB, not 128 KiB doubled with every raise of the mmap threshold.
 *
 * An operator's own `GLIBC_TUNABLES` (even an empty one) is kept as it is.
 */
export const RUNNER_MALLOC_TUNABLES = 'glibc.malloc.mmap_threshold=32768:glibc.malloc.trim_threshold=131072'

/** How to start this same script again: its argv (program first) and environment. */
export interface RunnerRelaunch {
  argv: string[]
  env: NodeJS.ProcessEnv
}

/**
 * How to start this same script again under `execPath` with the missing runner flags and, when
 * the operator set no `GLIBC_TUNABLES`, the runner's malloc settings; null when nothing is
 * missing. Node's own flags of this start (`execArgv`, e.g. `--conditions`) and the script's
 * arguments are kept.
 */
export function runnerRelaunch(
  execPath: string,
  execArgv: readonly string[],
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): RunnerRelaunch | null {
  const missing = missingRunnerNodeFlags(execArgv, env.NODE_OPTIONS)
  const tunables = env.GLIBC_TUNABLES === undefined
  if (missing.length === 0 && !tunables) return null
  return {
    argv: [execPath, ...missing, ...execArgv, ...argv.slice(1)],
    env: tunables ? { ...env, GLIBC_TUNABLES: RUNNER_MALLOC_TUNABLES } : env,
  }
}
