// Run in the guest by /init next to the runner (never on the host): readies what the first
// sandbox of each driver would otherwise pay for while the runner waits for its agent's hello.
// It builds and mounts the namespace driver's runtime image exactly as the driver does (same
// code, same key, so the runner finds it mounted), then compiles the agent bundle into Node's
// compile cache (the dir given as the one argument) under the path each driver loads it from:
// the checkout's bundle for the local driver, and `/opt/conch/conch-agent.mjs` on the image for the
// namespace driver, loaded in a private mount namespace laid out as a sandbox sees it. Loading
// the bundle without arguments compiles it and stops at the agent's usage check (exit 2). Only
// those loads write the cache: this process runs without one, so it never writes an entry of a
// runner module while the runner, starting next to it, reads or writes the same one.
import { spawnSync } from 'node:child_process'
import { locateAgentRuntime } from '../../packages/runner/src/drivers/agent-runtime.ts'
import { DEFAULT_RUNTIME_CACHE, mountRuntimeImage } from '../../packages/runner/src/drivers/runtime-image.ts'

/** Quotes a value for a POSIX shell. */
function quote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`
}

/** The compile cache dir to fill. */
const cacheDir = process.argv[2]
if (!cacheDir) throw new Error('usage: warm-agents.ts <compile cache dir>')

/** Runs a shell script with the compile cache on; throws with its output when it fails. */
function sh(script: string): void {
  const env = { ...process.env, NODE_COMPILE_CACHE: cacheDir }
  const result = spawnSync('sh', ['-c', script], { encoding: 'utf8', env })
  if (result.status !== 0)
    throw new Error(`warm-up failed (${result.status}): ${result.stderr}${result.stdout}`)
}

/** Loads the bundle at `path` with `node`: compiles it, then the agent exits 2 on missing args. */
const load = (node: string, path: string): string =>
  `${quote(node)} ${quote(path)} 2>/dev/null && false || [ $? -eq 2 ]`

const node = process.execPath
const runtime = await locateAgentRuntime(node)
const bundle = runtime.mounts.find((m) => m.guest === runtime.entry)
if (!bundle) throw new Error('the agent runtime has no mount for its entry')

// Local driver: the agent runs the bundle from the checkout.
sh(load(node, bundle.host))

// Namespace driver: the image, then the same bundle at the path a sandbox sees.
const onImage = await mountRuntimeImage(runtime, DEFAULT_RUNTIME_CACHE)
const layout = [
  'mount -t tmpfs tmpfs /opt',
  ...onImage.mounts.map(
    ({ host, guest }) =>
      `mkdir -p "$(dirname ${quote(guest)})" && touch ${quote(guest)} && mount --bind ${quote(host)} ${quote(guest)}`,
  ),
]
sh(
  `unshare --mount --propagation private sh -c ${quote(`set -e; ${layout.join('; ')}; ${load(onImage.node, onImage.entry)}`)}`,
)
