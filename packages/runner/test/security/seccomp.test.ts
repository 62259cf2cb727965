// Attacks on the kernel from inside a sandbox under the seccomp filter: each dangerous syscall
// is called for real (through perl's `syscall`) in a bubblewrap sandbox that gets the filter on
// an fd, and must answer EPERM; a new user namespace must be refused; and the tools an agent
// relies on (bash, coreutils, git, python3, node) must still work under it.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { describe, expect, it } from 'vitest'
import {
  bwrapSeccomp,
  DENIED,
  feedSeccomp,
  IOCTL_DENIED,
  type SyscallName,
  X32_SYSCALL_BIT,
  X86_64_SYSCALLS,
} from '../../src/drivers/seccomp-filter.ts'

const EPERM = 1
const ENOSYS = 38

interface Outcome {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

/** Runs `command` in a fresh user namespace as uid 1000 with a private /tmp, with or without the filter. */
/** Where the runner's own node binary appears in the test sandbox. */
const SANDBOX_NODE = '/mnt/node'

async function sandboxed(command: string[], withFilter = true): Promise<Outcome> {
  const filter = bwrapSeccomp()
  const args = [
    '--unshare-user',
    '--uid',
    '1000',
    '--gid',
    '1000',
    '--ro-bind',
    '/',
    '/',
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--tmpfs',
    '/tmp',
    // The runner's node may live under /tmp (a checkout there), which the tmpfs hides.
    '--tmpfs',
    '/mnt',
    '--ro-bind',
    process.execPath,
    SANDBOX_NODE,
    '--chdir',
    '/tmp',
    '--setenv',
    'HOME',
    '/tmp',
    ...(withFilter ? filter.args : []),
    '--',
    ...command,
  ]
  const stdio = Array.from({ length: filter.fd + 1 }, (_, fd) => (fd === 1 || fd === 2 ? 'pipe' : 'ignore'))
  if (withFilter) stdio[filter.fd] = 'pipe'
  const child = spawn('bwrap', args, { stdio: stdio as ('pipe' | 'ignore')[] })
  if (withFilter) feedSeccomp(child, filter)
  let stdout = ''
  let stderr = ''
  child.stdout?.on('data', (d: Buffer) => {
    stdout += d.toString()
  })
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString()
  })
  const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null]
  return { code, signal, stdout, stderr }
}

/** One raw syscall: a name for the report, its number and its integer arguments. */
interface Probe {
  name: string
  nr: number
  args: number[]
}

const CLONE_NEWUSER = 0x10000000
const SIGCHLD = 17
const ADDR_NO_RANDOMIZE = 0x0040000

/** Calls each probe through perl's `syscall` and returns its errno by name (0 when it succeeded). */
async function probe(probes: Probe[], withFilter = true): Promise<Record<string, number>> {
  const calls = probes.map((p) => `[${JSON.stringify(p.name)}, ${[p.nr, ...p.args].join(', ')}]`).join(', ')
  // A successful clone forks perl: the child leaves at once and the parent reaps it.
  const script = `use POSIX; for my $c (${calls}) { my ($name, $nr, @args) = @$c; $! = 0; my $r = syscall($nr, @args); POSIX::_exit(0) if $r == 0 && $name =~ /^clone/; waitpid($r, 0) if $r > 0 && $name =~ /^clone/; printf "%s\\t%d\\n", $name, $r < 0 ? $!+0 : 0 }`
  const out = await sandboxed(['perl', '-e', script], withFilter)
  expect(out.stderr).toBe('')
  return Object.fromEntries(
    out.stdout
      .trim()
      .split('\n')
      .map((line) => {
        const [name, errno] = line.split('\t')
        return [name, Number(errno)]
      }),
  )
}

const nr = (name: SyscallName) => X86_64_SYSCALLS[name]
/** Every unconditionally denied syscall, called with zero arguments. */
const DENIED_PROBES: Probe[] = (Object.keys(DENIED) as SyscallName[]).map((name) => ({
  name,
  nr: nr(name),
  args: [0, 0, 0, 0, 0],
}))
/** The argument-dependent denials. */
const ARGUMENT_PROBES: Probe[] = [
  { name: 'clone(CLONE_NEWUSER)', nr: nr('clone'), args: [CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0] },
  { name: 'unshare(CLONE_NEWUSER)', nr: nr('unshare'), args: [CLONE_NEWUSER] },
  { name: 'personality(ADDR_NO_RANDOMIZE)', nr: nr('personality'), args: [ADDR_NO_RANDOMIZE] },
  ...IOCTL_DENIED.map((request) => ({
    name: `ioctl(0x${request.toString(16)})`,
    nr: nr('ioctl'),
    args: [0, request, 0],
  })),
  { name: 'x32:getpid', nr: X32_SYSCALL_BIT + 39, args: [] },
]

describe('attack: dangerous syscalls under the sandbox seccomp filter', () => {
  it('answers EPERM to every denied syscall', async () => {
    const errnos = await probe([...DENIED_PROBES, ...ARGUMENT_PROBES])
    const expected = Object.fromEntries([...DENIED_PROBES, ...ARGUMENT_PROBES].map((p) => [p.name, EPERM]))
    expect(errnos).toEqual(expected)
  })

  it('reaches the kernel with the same calls when there is no filter, so the EPERM is the filter', async () => {
    const meaningful: Probe[] = [
      { name: 'keyctl', nr: nr('keyctl'), args: [0, -3, 0] },
      { name: 'bpf', nr: nr('bpf'), args: [-1, 0, 0] },
      { name: 'perf_event_open', nr: nr('perf_event_open'), args: [0, 0, -1, -1, 0] },
      { name: 'io_uring_setup', nr: nr('io_uring_setup'), args: [1, 0] },
      { name: 'mount', nr: nr('mount'), args: [0, 0, 0, 0, 0] },
      ...ARGUMENT_PROBES,
    ]
    const bare = await probe(meaningful, false)
    for (const p of meaningful) expect({ [p.name]: bare[p.name] }).not.toEqual({ [p.name]: EPERM })
    const filtered = await probe(meaningful)
    for (const p of meaningful) expect({ [p.name]: filtered[p.name] }).toEqual({ [p.name]: EPERM })
  })

  it('answers clone3 with ENOSYS and keeps plain clone and personality queries working', async () => {
    const errnos = await probe([
      { name: 'clone3', nr: nr('clone3'), args: [0, 0] },
      { name: 'clone', nr: nr('clone'), args: [SIGCHLD, 0, 0, 0, 0] },
      { name: 'personality', nr: nr('personality'), args: [0xffffffff] },
    ])
    expect(errnos).toEqual({ clone3: ENOSYS, clone: 0, personality: 0 })
  })

  it('refuses unshare -Ur', async () => {
    const out = await sandboxed(['unshare', '-Ur', 'true'])
    expect(out.code).not.toBe(0)
    expect(out.stderr).toContain('Operation not permitted')
    expect((await sandboxed(['unshare', '-Ur', 'true'], false)).code).toBe(0)
  })
})

describe('tools under the sandbox seccomp filter', () => {
  it('runs bash and coreutils', async () => {
    const out = await sandboxed([
      'bash',
      '-c',
      [
        'set -e',
        'mkdir d && printf "b\\na\\nc\\n" > d/in.txt',
        'cp d/in.txt d/copy.txt && sort d/copy.txt | tr "\\n" " "',
        'tar -cf d.tar d && rm -r d && tar -xf d.tar && ls d | tr "\\n" " "',
        'echo "$(id -u) $(( $(seq 1 10 | paste -sd+) ))"',
      ].join('\n'),
    ])
    expect(out).toMatchObject({ code: 0, stderr: '' })
    expect(out.stdout).toBe('a b c copy.txt in.txt 1000 55\n')
  })

  it('runs git init and commit', async () => {
    const out = await sandboxed([
      'bash',
      '-c',
      [
        'set -e',
        'git init -q repo && cd repo',
        'echo hi > f.txt && git add f.txt',
        'git -c user.name=t -c user.email=t@example.com commit -qm first',
        'git log --format=%s',
      ].join('\n'),
    ])
    expect(out).toMatchObject({ code: 0, stdout: 'first\n' })
  })

  it('runs python3 with threads and subprocesses', async () => {
    const out = await sandboxed([
      '/usr/bin/python3',
      '-c',
      'import subprocess, threading; t = threading.Thread(target=print, args=("thread",)); t.start(); t.join(); print(subprocess.run(["echo", "child"], capture_output=True, text=True).stdout.strip())',
    ])
    expect(out).toMatchObject({ code: 0, stdout: 'thread\nchild\n' })
  })

  it("runs the runner's own node with workers and child processes", async () => {
    const out = await sandboxed([
      SANDBOX_NODE,
      '-e',
      [
        "const { Worker } = require('node:worker_threads')",
        "const { execFileSync } = require('node:child_process')",
        'new Worker(\'require("node:worker_threads").parentPort.postMessage(6 * 7)\', { eval: true })',
        "  .on('message', (n) => { console.log(n, execFileSync('echo', ['child']).toString().trim(), require('node:fs').readdirSync('/tmp').length) })",
      ].join('\n'),
    ])
    expect(out).toMatchObject({ code: 0, stdout: '42 child 0\n' })
  })
})
