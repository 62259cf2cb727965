#!/usr/bin/env node
// Builds the VM tier's base image from Debian packages: a kernel (Debian's cloud kernel) and an
// initramfs that is a whole minimal Debian root filesystem with an /init that mounts a pure
// cgroup v2 hierarchy, brings up the network and starts the conch runner. The image holds no
// conch code: the harness appends a second archive with the sources, their node_modules and the
// pinned Node at every boot, so a code change never rebuilds it.
//
// The result is cached outside the repository, in `$XDG_CACHE_HOME/conch-vm/<key>/` (or
// `~/.cache/conch-vm/<key>/`), where the key hashes this file (which holds the package list and
// /init); a change to either builds a new image. Prints the image folder on stdout. Needs root
// (debootstrap), debootstrap, cpio and zstd, and the Debian mirror apt uses (CONCH_VM_MIRROR
// overrides it).
//
//   node tests-vm/scripts/build-vm-image.mjs          build unless cached; print the folder
//   node tests-vm/scripts/build-vm-image.mjs --print  print the folder, build nothing
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { homedir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The Debian release the image is built from. */
const SUITE = 'bookworm'

/**
 * Packages installed on top of debootstrap's minbase: the namespace driver needs bubblewrap,
 * util-linux (setpriv, unshare), mount and e2fsprogs (its runtime image and workspace disks are
 * loop-mounted ext4); the conformance cases use perl (fork bomb, memory hog).
 */
const PACKAGES = [
  'bash',
  'coreutils',
  'bubblewrap',
  'util-linux',
  'mount',
  'e2fsprogs',
  'perl-base',
  'procps',
  'iproute2',
  'kmod',
  'libstdc++6',
]

/** The kernel metapackage; its one dependency names the versioned kernel package. */
const KERNEL_PACKAGE = 'linux-image-cloud-amd64'

/** Modules /init loads: the cloud kernel builds virtio, loop devices (the namespace driver's disks) and overlayfs as modules. */
const MODULES = ['virtio_pci', 'virtio_net', 'loop', 'overlay']

/** Files of the kernel package copied into the image, so `modprobe` finds the modules above. */
const MODULE_PATHS = [
  'kernel/drivers/virtio/virtio.ko',
  'kernel/drivers/virtio/virtio_ring.ko',
  'kernel/drivers/virtio/virtio_pci.ko',
  'kernel/drivers/virtio/virtio_pci_modern_dev.ko',
  'kernel/drivers/virtio/virtio_pci_legacy_dev.ko',
  'kernel/net/core/failover.ko',
  'kernel/drivers/net/net_failover.ko',
  'kernel/drivers/net/virtio_net.ko',
  'kernel/drivers/block/loop.ko',
  'kernel/fs/overlayfs/overlay.ko',
  'modules.builtin',
  'modules.builtin.modinfo',
  'modules.order',
]

/** Folders of the root filesystem that the VM never reads; dropped to keep the initramfs small. */
const PRUNED = [
  'usr/share/doc',
  'usr/share/man',
  'usr/share/info',
  'usr/share/locale',
  'usr/share/zoneinfo',
  'var/cache/apt',
  'var/lib/apt/lists',
  'var/log',
]

/**
 * The VM's /init. The harness appends /conch (the runner's sources, node_modules and Node) and
 * /conch/vm.env (port, API key, mode, warm-up command) to the initramfs. Lines starting `CONCH-VM ` on the
 * console are for the harness: `ready <url>` once the runner listens, `exit <code>` when a
 * command run (mode `command`) ends, `fail <reason>` when /init cannot go on.
 *
 * In mode `runner` the runner's pid is kept in /run/conch-vm/runner.pid, and a line `restart`
 * written to the fifo /run/conch-vm/control stops it with SIGTERM (its agents keep running) and
 * starts a new one on the same state dir, as an operator's restart would.
 */
const INIT = `#!/bin/bash
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
say() { echo "CONCH-VM $*" > /dev/console; }
die() { say "fail $*"; sync; echo o > /proc/sysrq-trigger; sleep 5; }
mount -t proc proc /proc
# The initramfs root (rootfs) cannot be pivot_root'ed away, which bwrap does for every namespace
# sandbox. Stage 1 binds it onto itself and continues in that bind mount, which can.
if [ "$1" != stage2 ]; then
  mkdir -p /.root && mount --bind / /.root && cd /.root && mount --move . / || die "cannot bind the root"
  exec chroot . /init stage2
fi
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
ln -s /proc/self/fd /dev/fd
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs tmpfs /run
# A pure cgroup v2 hierarchy (cgroup_no_v1=all is on the command line), with every controller
# delegated from the root, as systemd does on a v2 host.
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup || die "cannot mount cgroup2"
for c in $(cat /sys/fs/cgroup/cgroup.controllers); do echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control; done
echo 1 > /proc/sys/kernel/sysrq
hostname conch-vm
for m in ${MODULES.join(' ')}; do modprobe "$m" || die "modprobe $m failed"; done
ip link set lo up
ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2 || die "no eth0"
[ -f /conch/vm.env ] || die "no /conch/vm.env: boot with the harness's app archive"
set -a; . /conch/vm.env; set +a
say "booted cgroup=$(stat -fc %T /sys/fs/cgroup) controllers=$(cat /sys/fs/cgroup/cgroup.subtree_control | tr ' ' ,)"
cd /conch/repo || die "no /conch/repo"
if [ "$VM_MODE" = command ]; then
  bash -c "$VM_COMMAND" > /dev/console 2>&1
  say "exit $?"
else
  mkdir -p /var/lib/conch /run/conch-vm "$NODE_COMPILE_CACHE"
  # Compiling (and type-stripping) the agent's modules takes longer under TCG than the runner
  # waits for an agent's hello; compiling them once here fills Node's compile cache, which
  # sandboxes created with NODE_COMPILE_CACHE in their env then reuse.
  bash -c "$VM_WARMUP" &
  warm=$!
  # Echoes the runner's log; says ready once it listens and the warm-up is done.
  watch_log() {
    while IFS= read -r line; do
      echo "$line"
      case $line in *"listening on"*)
        while kill -0 $warm 2> /dev/null; do sleep 0.2; done
        say "ready port=$VM_PORT" ;;
      esac
    done
  }
  mkfifo /run/conch-vm/control
  while read -r request < /run/conch-vm/control; do
    if [ "$request" = restart ]; then
      : > /run/conch-vm/restarting
      kill -TERM "$(cat /run/conch-vm/runner.pid)"
    fi
  done &
  while :; do
    rm -f /run/conch-vm/restarting
    "$VM_NODE" --conditions=source packages/runner/src/main.ts runner --host 0.0.0.0 \\
      --port "$VM_PORT" --state-dir /var/lib/conch $VM_RUNNER_ARGS > >(watch_log) 2>&1 &
    echo $! > /run/conch-vm/runner.pid
    wait $!
    code=$?
    [ -e /run/conch-vm/restarting ] || break
  done
  say "exit $code"
fi
sync
echo o > /proc/sysrq-trigger
sleep 5
`

/** `$XDG_CACHE_HOME/conch-vm` or `~/.cache/conch-vm`. */
function cacheRoot() {
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'conch-vm')
}

/** The cache key: this file holds the package list, the module list and /init. */
function imageKey() {
  const self = readFileSync(fileURLToPath(import.meta.url))
  return createHash('sha256').update(self).digest('hex').slice(0, 16)
}

/** The Debian mirror: CONCH_VM_MIRROR, else the first Debian (non-security) URI apt uses. */
function debianMirror() {
  if (process.env.CONCH_VM_MIRROR) return process.env.CONCH_VM_MIRROR
  const files = ['/etc/apt/sources.list']
  if (existsSync('/etc/apt/sources.list.d')) {
    for (const f of readdirSync('/etc/apt/sources.list.d')) files.push(join('/etc/apt/sources.list.d', f))
  }
  for (const file of files) {
    if (!existsSync(file)) continue
    for (const match of readFileSync(file, 'utf8').matchAll(/(?:^URIs:|^deb)\s+(\S+)/gm)) {
      const uri = match[1]
      if (uri && /\/debian\/?$/.test(uri)) return uri
    }
  }
  return 'http://deb.debian.org/debian'
}

function log(message) {
  process.stderr.write(`[conch-vm] ${message}\n`)
}

function run(cmd, args, options = {}) {
  const result = spawnSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'], ...options })
  if (result.error) throw new Error(`${cmd}: ${result.error.message}`)
  if (result.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${result.status}`)
  return result
}

function capture(cmd, args) {
  return run(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' }).stdout
}

/** Builds the image into `dir` (kernel `vmlinuz`, initramfs `rootfs.cpio.zst`, `image.json`). */
function build(dir, work) {
  if (process.getuid?.() !== 0) throw new Error('building the VM image needs root (debootstrap); run as root')
  for (const tool of ['debootstrap', 'cpio', 'zstd']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) {
      throw new Error(`${tool} is missing; install it with: apt-get install debootstrap cpio zstd`)
    }
  }
  const mirror = debianMirror()
  const rootfs = join(work, 'rootfs')
  log(`debootstrap ${SUITE} from ${mirror}`)
  run('debootstrap', ['--variant=minbase', `--include=${PACKAGES.join(',')}`, SUITE, rootfs, mirror], {
    stdio: ['ignore', 'ignore', 'inherit'],
  })

  // The kernel comes from the same mirror, through the new system's own apt.
  log(`downloading ${KERNEL_PACKAGE}`)
  const chrootApt = (args, options) => run('chroot', [rootfs, ...args], options)
  copyFileSync('/etc/resolv.conf', join(rootfs, 'etc/resolv.conf'))
  chrootApt(['apt-get', 'update', '-qq'])
  const depends = capture('chroot', [rootfs, 'apt-cache', 'depends', KERNEL_PACKAGE])
  const kernelPackage = /Depends: (linux-image-\S+)/.exec(depends)?.[1]
  if (!kernelPackage) throw new Error(`${KERNEL_PACKAGE} names no kernel package:\n${depends}`)
  chrootApt(['sh', '-c', `cd /tmp && apt-get download -qq ${kernelPackage}`])
  const deb = readdirSync(join(rootfs, 'tmp')).find((f) => f.endsWith('.deb'))
  if (!deb) throw new Error(`apt-get download ${kernelPackage} left no .deb`)
  const kernel = join(work, 'kernel')
  run('dpkg-deb', ['-x', join(rootfs, 'tmp', deb), kernel])
  rmSync(join(rootfs, 'tmp', deb))
  const version = readdirSync(join(kernel, 'lib/modules'))[0]
  if (!version) throw new Error(`${kernelPackage} holds no modules`)
  const modulesIn = join(kernel, 'lib/modules', version)
  const modulesOut = join(rootfs, 'lib/modules', version)
  for (const path of MODULE_PATHS) {
    mkdirSync(dirname(join(modulesOut, path)), { recursive: true })
    copyFileSync(join(modulesIn, path), join(modulesOut, path))
  }
  run('chroot', [rootfs, 'depmod', version])

  for (const path of PRUNED) rmSync(join(rootfs, path), { recursive: true, force: true })
  writeFileSync(join(rootfs, 'etc/resolv.conf'), '')
  writeFileSync(join(rootfs, 'init'), INIT)
  chmodSync(join(rootfs, 'init'), 0o755)

  log('packing the initramfs')
  const staging = join(work, 'image')
  mkdirSync(staging)
  copyFileSync(join(kernel, 'boot', `vmlinuz-${version}`), join(staging, 'vmlinuz'))
  run('sh', [
    '-c',
    `cd "${rootfs}" && find . -print0 | cpio --null -o -H newc --quiet | zstd -q -3 -T0 > "${join(staging, 'rootfs.cpio.zst')}"`,
  ])
  const manifest = { suite: SUITE, mirror, kernel: kernelPackage, kernelVersion: version, packages: PACKAGES }
  writeFileSync(join(staging, 'image.json'), `${JSON.stringify(manifest, null, 2)}\n`)
  mkdirSync(dirname(dir), { recursive: true })
  renameSync(staging, dir)
}

function main() {
  const dir = join(cacheRoot(), imageKey())
  if (process.argv.includes('--print') || existsSync(join(dir, 'image.json'))) {
    process.stdout.write(`${dir}\n`)
    return
  }
  const started = Date.now()
  mkdirSync(cacheRoot(), { recursive: true })
  const work = mkdtempSync(join(cacheRoot(), 'build-'))
  try {
    build(dir, work)
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
  // Images of other keys are older builds of this script: drop them so the cache holds one.
  for (const entry of readdirSync(cacheRoot())) {
    if (/^[0-9a-f]{16}$/.test(entry) && entry !== basename(dir))
      rmSync(join(cacheRoot(), entry), { recursive: true, force: true })
  }
  log(`image built in ${Math.round((Date.now() - started) / 1000)} s: ${dir}`)
  process.stdout.write(`${dir}\n`)
}

try {
  main()
} catch (error) {
  log(error instanceof Error ? error.message : String(error))
  process.exitCode = 1
}
