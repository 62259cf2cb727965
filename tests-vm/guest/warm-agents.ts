// Run in the guest by /init next to the runner (never on the host): readies what the first
// sandbox of each driver would otherwise pay for while the runner waits for its agent's hello.
// It builds and mounts the namespace driver's runtime image exactly as the driver does (same
// code, same key, so the runner finds it mounted), then compiles the agent's modules into Node's
// compile cache (the dir given as the one argument) under the paths each driver loads them from:
// the checkout's paths for the local driver, and `/opt/conch/...` on the image for the
// namespace driver, imported in a private mount namespace laid out as a sandbox sees it. Only
// those imports write the cache: this process runs without one, so it never writes an entry of
// a runner module while the runner, starting next to it, reads or writes the same one.
import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { type AgentRuntime, locateAgentRuntime } from '../../packages/runner/src/drivers/agent-runtime.ts'
import { DEFAULT_RUNTIME_CACHE, mountRuntimeImage } from '../../packages/runner/src/drivers/runtime-image.ts'

/** The agent's modules in `srcDir`, without its entry (importing it would start an agent) and tests. */
function agentModules(srcDir: string): string[] {
  return readdirSync(srcDir)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts') && f !== 'main.ts')
    .map((f) => join(srcDir, f))
}

/** Quotes a value for a POSIX shell. */
function quote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`
}

/** The agent's source dir among a runtime's mounts (host side). */
function agentSrc(runtime: AgentRuntime): string {
  const mount = runtime.mounts.find((m) => m.guest.endsWith('/agent/src'))
  if (!mount) throw new Error('the agent runtime has no agent/src mount')
  return mount.host
}

/** The compile cache dir to fill. */
const cacheDir = process.argv[2]
if (!cacheDir) throw new Error('usage: warm-agents.ts <compile cache dir>')

/** Runs a shell script with the compile cache on; throws with its output when it fails. */
function sh(script: string, input = ''): void {
  const env = { ...process.env, NODE_COMPILE_CACHE: cacheDir }
  const result = spawnSync('sh', ['-c', script], { input, encoding: 'utf8', env })
  if (result.status !== 0)
    throw new Error(`warm-up failed (${result.status}): ${result.stderr}${result.stdout}`)
}

const node = process.execPath
const runtime = locateAgentRuntime(node)

/** `import` lines for `files`, read by a Node that takes its program on stdin. */
const importLines = (files: string[]): string => files.map((f) => `import ${JSON.stringify(f)}\n`).join('')
const importer = `${quote(node)} --conditions=source --input-type=module`

// Local driver: the agent runs from the checkout.
sh(importer, importLines(agentModules(agentSrc(runtime))))

// Namespace driver: the image, then the same modules at the paths a sandbox sees.
const onImage = await mountRuntimeImage(runtime, DEFAULT_RUNTIME_CACHE)
const layout = [
  'mount -t tmpfs tmpfs /opt',
  ...onImage.mounts.map(
    ({ host, guest }) =>
      `mkdir -p "$(dirname ${quote(guest)})" && { [ -d ${quote(host)} ] && mkdir -p ${quote(guest)} || touch ${quote(guest)}; } && mount --bind ${quote(host)} ${quote(guest)}`,
  ),
  ...onImage.symlinks.map(
    ([target, path]) => `mkdir -p "$(dirname ${quote(path)})" && ln -s ${quote(target)} ${quote(path)}`,
  ),
]
const guestSrc = onImage.mounts.find((m) => m.guest.endsWith('/agent/src'))?.guest ?? ''
const onGuestPaths = agentModules(agentSrc(onImage)).map((f) =>
  join(guestSrc, f.slice(agentSrc(onImage).length)),
)
sh(
  `unshare --mount --propagation private sh -c ${quote(`set -e; ${layout.join('; ')}; exec ${importer}`)}`,
  importLines(onGuestPaths),
)
