// The shell scripts the ssh driver runs on a remote host, built here so that every value is
// quoted in one place. They need only bash and coreutils (and /proc) on the remote. Nothing
// secret is ever part of a command line: the link secret and the sandbox's environment go to
// the remote as 0600 files over SFTP, and the agent deletes them once read.
import { AGENT_NODE_FLAGS } from '@conch/protocol'
import { RunnerError } from '../runner-error.ts'

/** `value` as one single-quoted shell word. */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`
}

/** What the probe learns about a remote host. */
export interface RemoteFacts {
  /** `uname -s`. */
  os: string
  /** `uname -m`. */
  arch: string
  /** The remote user's home. */
  home: string
  /** The remote user's PATH, given to agents. */
  path: string
  /** Path of bash, or empty. */
  bash: string
  /** Path of bwrap, or empty. */
  bwrap: string
  /** Whether bwrap made a pid, ipc and uts namespace in a test run. */
  bwrapWorks: boolean
  /** The Node the probe found (the configured one, else `node` on PATH), or empty. */
  node: string
  /** Its `--version`, or empty. */
  nodeVersion: string
  /** The first line of `ldd --version` (glibc or musl), or empty. */
  libc: string
}

/** The probe: prints `name=value` lines read by `parseProbe`. */
export function probeScript(nodePath: string | undefined): string {
  const node = nodePath === undefined ? 'n=$(command -v node || true)' : `n=${shellQuote(nodePath)}`
  return [
    'echo "os=$(uname -s)"',
    'echo "arch=$(uname -m)"',
    'echo "home=$HOME"',
    'echo "path=$PATH"',
    'echo "bash=$(command -v bash || true)"',
    'echo "bwrap=$(command -v bwrap || true)"',
    // Whether bubblewrap can really make the namespaces here (as a user it needs user namespaces).
    'bw=$(command -v bwrap || true); if [ -n "$bw" ] && "$bw" --ro-bind / / --dev /dev --proc /proc --unshare-pid --unshare-ipc --unshare-uts /bin/true 2>/dev/null; then echo "bwrapWorks=yes"; fi',
    node,
    'if [ -n "$n" ] && [ -x "$n" ]; then echo "node=$n"; echo "nodeVersion=$("$n" --version 2>/dev/null)"; fi',
    'echo "libc=$(ldd --version 2>&1 | head -n 1)"',
  ].join('\n')
}

/** Reads the probe's output. */
export function parseProbe(stdout: string): RemoteFacts {
  const facts: Record<string, string> = {}
  for (const line of stdout.split('\n')) {
    const eq = line.indexOf('=')
    if (eq > 0) facts[line.slice(0, eq)] = line.slice(eq + 1).trim()
  }
  const get = (k: string): string => facts[k] ?? ''
  return {
    os: get('os'),
    arch: get('arch'),
    home: get('home'),
    path: get('path'),
    bash: get('bash'),
    bwrap: get('bwrap'),
    bwrapWorks: get('bwrapWorks') === 'yes',
    node: get('node'),
    nodeVersion: get('nodeVersion'),
    libc: get('libc'),
  }
}

/** The major version of `vNN.x.y`, or 0. */
export function nodeMajor(version: string): number {
  const match = /^v(\d+)\./.exec(version)
  return match ? Number(match[1]) : 0
}

/** The oldest Node the agent runs on. */
export const MIN_NODE_MAJOR = 22

/** The environment file the agent's launcher sources: `export NAME='value'` lines. */
export function envFile(env: Record<string, string>): string {
  let text = ''
  for (const [name, value] of Object.entries(env)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      throw new RunnerError(
        'BAD_REQUEST',
        `environment variable name "${name}" cannot be passed to an SSH host; use letters, digits and _ only`,
      )
    }
    text += `export ${name}=${shellQuote(value)}\n`
  }
  return text
}

/** The files of one sandbox in its remote folder. */
export const REMOTE_FILES = {
  bundle: 'conch-agent.mjs',
  socket: 'agent.sock',
  pid: 'agent.pid',
  log: 'agent.log',
  env: 'agent.env',
  secret: 'link-secret',
  workspace: 'workspace',
} as const

/** Makes the sandbox's folder (0700) and its workspace; fails when the folder already exists. */
export function prepareScript(dir: string): string {
  const d = shellQuote(dir)
  return `set -e; umask 077; mkdir -p "$(dirname ${d})"; mkdir ${d}; mkdir ${d}/${REMOTE_FILES.workspace}`
}

/**
 * Starts the agent detached: its own session (setsid) with stdin from /dev/null and its log in
 * the folder, so neither the SSH connection's end nor the runner's touches it. A clean bash
 * sources the environment file, deletes it, records its pid and execs Node; prints that pid.
 */
export function startScript(dir: string, node: string, args: string[], wrap: readonly string[] = []): string {
  const d = shellQuote(dir)
  const argv = [...wrap, node, ...AGENT_NODE_FLAGS, `${dir}/${REMOTE_FILES.bundle}`, ...args]
    .map(shellQuote)
    .join(' ')
  const launcher = shellQuote(
    `echo $$ > ${REMOTE_FILES.pid}; . ./${REMOTE_FILES.env}; rm -f ${REMOTE_FILES.env}; unset OLDPWD SHLVL; exec "$@"`,
  )
  return [
    `cd ${d} || exit 1`,
    `setsid env -i /bin/bash --noprofile --norc -c ${launcher} conch-agent ${argv} </dev/null >>${REMOTE_FILES.log} 2>&1 &`,
    `for i in $(seq 1 200); do [ -s ${REMOTE_FILES.pid} ] && break; sleep 0.05; done`,
    `cat ${REMOTE_FILES.pid}`,
  ].join('\n')
}

/**
 * bubblewrap options that wrap the agent on a remote that has it: its own pid, ipc and uts
 * namespaces and session, the host's files read-only, a private /tmp, and only the sandbox's
 * folder writable (the socket in it stays reachable from outside: same inode). The user and the
 * network stay the host's.
 */
export function bwrapPrefix(bwrap: string, dir: string, node: string): string[] {
  return [
    bwrap,
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--new-session',
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    '--tmpfs',
    '/tmp',
    '--ro-bind',
    node,
    node,
    '--bind',
    dir,
    dir,
    '--chdir',
    `${dir}/${REMOTE_FILES.workspace}`,
    '--',
  ]
}

/** Shell code that sets `p` to the agent's pid when it still runs this sandbox's bundle, else empty. */
function agentPid(dir: string, pid: number): string {
  const bundle = shellQuote(`${dir}/${REMOTE_FILES.bundle}`)
  return `p=${pid}; if ! tr '\\0' '\\n' < /proc/$p/cmdline 2>/dev/null | grep -qxF -- ${bundle}; then p=; fi`
}

/** Prints `alive` while the agent `pid` runs this sandbox's bundle, else `gone` and the log's last lines. */
export function aliveScript(dir: string, pid: number): string {
  return `${agentPid(dir, pid)}\nif [ -n "$p" ]; then echo alive; else echo gone; tail -n 3 ${shellQuote(`${dir}/${REMOTE_FILES.log}`)} 2>/dev/null; fi`
}

/**
 * Ends the agent and everything below it (its shells and their children, found through
 * /proc/<pid>/task/<tid>/children): SIGTERM, up to a second's grace, then SIGKILL; then, when
 * `remove`, deletes the folder.
 */
export function stopScript(dir: string, pid: number | undefined, remove: boolean): string {
  const lines = [
    'tree() { echo "$1"; local c; for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do tree "$c"; done; }',
    pid === undefined ? 'p=' : agentPid(dir, pid),
    'if [ -n "$p" ]; then',
    '  all=$(tree "$p"); kill -TERM $all 2>/dev/null',
    '  for i in $(seq 1 20); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done',
    '  kill -KILL $all $(tree "$p") 2>/dev/null',
    'fi',
  ]
  if (remove) lines.push(`rm -rf -- ${shellQuote(dir)}`)
  lines.push('true')
  return lines.join('\n')
}
