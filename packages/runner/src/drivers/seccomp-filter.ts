// The seccomp filter every namespace sandbox runs under, as a classic-BPF program for
// bubblewrap's `--seccomp FD`.
//
// Model: allow by default, deny what Docker's default profile denies to an unprivileged
// container. The program checks the architecture first (anything but x86_64 is killed, so a
// 32-bit `int 0x80` cannot reach a syscall under another number), refuses the x32 ABI, answers
// EPERM for each syscall in DENIED, inspects the arguments of clone, unshare, personality and
// ioctl, answers ENOSYS for clone3 (whose flags sit in memory a filter cannot read, so libc
// falls back to clone, which it can), and allows the rest. Numbers come from the kernel's
// arch/x86/entry/syscalls/syscall_64.tbl.
import type { ChildProcess } from 'node:child_process'

/** Size of one `struct sock_filter` (u16 code, u8 jt, u8 jf, u32 k). */
export const SOCK_FILTER_BYTES = 8

/** `AUDIT_ARCH_X86_64`: EM_X86_64 (62) | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE. */
export const AUDIT_ARCH_X86_64 = 0xc000003e

/** Syscall numbers on x86_64 that the filter names. */
export const X86_64_SYSCALLS = {
  ioctl: 16,
  clone: 56,
  syslog: 103,
  uselib: 134,
  personality: 135,
  ustat: 136,
  sysfs: 139,
  vhangup: 153,
  pivot_root: 155,
  _sysctl: 156,
  acct: 163,
  settimeofday: 164,
  mount: 165,
  umount2: 166,
  swapon: 167,
  swapoff: 168,
  reboot: 169,
  iopl: 172,
  ioperm: 173,
  create_module: 174,
  init_module: 175,
  delete_module: 176,
  get_kernel_syms: 177,
  query_module: 178,
  quotactl: 179,
  nfsservctl: 180,
  lookup_dcookie: 212,
  clock_settime: 227,
  kexec_load: 246,
  add_key: 248,
  request_key: 249,
  keyctl: 250,
  migrate_pages: 256,
  unshare: 272,
  move_pages: 279,
  perf_event_open: 298,
  fanotify_init: 300,
  name_to_handle_at: 303,
  open_by_handle_at: 304,
  clock_adjtime: 305,
  setns: 308,
  kcmp: 312,
  finit_module: 313,
  kexec_file_load: 320,
  bpf: 321,
  userfaultfd: 323,
  io_uring_setup: 425,
  io_uring_enter: 426,
  io_uring_register: 427,
  open_tree: 428,
  move_mount: 429,
  fsopen: 430,
  fsconfig: 431,
  fsmount: 432,
  fspick: 433,
  clone3: 435,
  mount_setattr: 442,
  quotactl_fd: 443,
} as const

/** A syscall the filter names. */
export type SyscallName = keyof typeof X86_64_SYSCALLS

/** Syscalls that always get EPERM, each with the reason it is denied. */
export const DENIED: Readonly<Partial<Record<SyscallName, string>>> = {
  syslog: 'reads the kernel log, which leaks kernel addresses',
  uselib: 'obsolete a.out loader, an old source of exploits',
  ustat: 'obsolete filesystem statistics call',
  sysfs: 'obsolete filesystem-type query',
  vhangup: 'hangs up the terminal of other sessions',
  pivot_root: 'changes the root mount',
  _sysctl: 'obsolete binary sysctl interface',
  acct: 'switches process accounting on or off for the host',
  settimeofday: 'sets the host clock',
  mount: 'mounts filesystems (kernel attack surface even inside a namespace)',
  umount2: 'unmounts, which could uncover what the sandbox mounts hide',
  swapon: 'adds host swap',
  swapoff: 'removes host swap',
  reboot: 'reboots the host or loads a kexec kernel',
  iopl: 'raises the I/O privilege level to reach hardware ports',
  ioperm: 'grants access to hardware I/O ports',
  create_module: 'obsolete kernel module call',
  init_module: 'loads a kernel module',
  delete_module: 'unloads a kernel module',
  get_kernel_syms: 'obsolete kernel symbol query',
  query_module: 'obsolete kernel module query',
  quotactl: 'changes filesystem quotas',
  nfsservctl: 'obsolete NFS server control',
  lookup_dcookie: 'profiling call that exposes kernel internals',
  clock_settime: 'sets the host clock',
  kexec_load: 'replaces the running kernel',
  add_key: 'kernel keyring, which is not namespaced',
  request_key: 'kernel keyring, which is not namespaced',
  keyctl: 'kernel keyring, which is not namespaced',
  migrate_pages: 'moves another process memory between NUMA nodes',
  move_pages: 'moves another process memory between NUMA nodes',
  perf_event_open: 'performance counters leak kernel and other-process data',
  fanotify_init: 'watches filesystem events across mounts',
  name_to_handle_at: 'file handles bypass path-based confinement',
  open_by_handle_at: 'opens any file on a mount by handle, escaping the mount view (the Shocker escape)',
  clock_adjtime: 'adjusts the host clock',
  setns: 'joins another namespace',
  kcmp: 'compares kernel objects of other processes, leaking kernel layout',
  finit_module: 'loads a kernel module',
  kexec_file_load: 'replaces the running kernel',
  bpf: 'loads BPF programs, a large kernel attack surface',
  userfaultfd: 'lets a process stall kernel page faults, a common exploit primitive',
  io_uring_setup: 'io_uring bypasses this filter for the I/O it submits and is a large attack surface',
  io_uring_enter: 'io_uring, as io_uring_setup',
  io_uring_register: 'io_uring, as io_uring_setup',
  open_tree: 'new mount API',
  move_mount: 'new mount API',
  fsopen: 'new mount API',
  fsconfig: 'new mount API',
  fsmount: 'new mount API',
  fspick: 'new mount API',
  mount_setattr: 'new mount API',
  quotactl_fd: 'changes filesystem quotas',
}

/** Namespace flags Docker refuses in clone: NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET. */
export const CLONE_NAMESPACE_FLAGS = 0x7e020000

/** The same flags for unshare, plus CLONE_NEWTIME (0x80), which only unshare accepts. */
export const UNSHARE_NAMESPACE_FLAGS = CLONE_NAMESPACE_FLAGS | 0x80

/** personality() values Docker allows: PER_LINUX, PER_LINUX32, UNAME26, PER_LINUX32|UNAME26, and the query 0xffffffff. */
export const PERSONALITY_ALLOWED = [0x0, 0x8, 0x20000, 0x20008, 0xffffffff] as const

/** ioctl requests denied: TIOCSTI and TIOCLINUX push keystrokes into a terminal another process reads. */
export const IOCTL_DENIED = [0x5412, 0x541c] as const

/** Syscalls at or above this number on x86_64 are the x32 ABI. */
export const X32_SYSCALL_BIT = 0x40000000

/** Seccomp return actions (linux/seccomp.h). */
export const SECCOMP_RET = {
  KILL_PROCESS: 0x80000000,
  ERRNO: 0x00050000,
  ALLOW: 0x7fff0000,
} as const

/** errno values the filter answers with. */
export const ERRNO = { EPERM: 1, ENOSYS: 38 } as const

/** Classic BPF opcodes the program uses (linux/bpf_common.h). */
export const BPF = {
  LD_W_ABS: 0x20,
  JEQ_K: 0x15,
  JGE_K: 0x35,
  JSET_K: 0x45,
  RET_K: 0x06,
} as const

/** Offsets into `struct seccomp_data`: nr, arch, then the args as u64 (low word first on little-endian). */
const DATA = { nr: 0, arch: 4, argLow: (i: number) => 16 + 8 * i } as const

/** One instruction before assembly: jumps name labels, resolved to relative offsets. */
interface Insn {
  code: number
  k: number
  jt?: string
  jf?: string
}

/** Whether the filter has been built for this Node architecture. */
export function seccompSupported(arch: string = process.arch): boolean {
  return arch === 'x64'
}

/** The filter program: `struct sock_filter` entries, 8 bytes each, little-endian; x86_64 only. */
export function buildSeccompFilter(): Buffer {
  const eperm = SECCOMP_RET.ERRNO | ERRNO.EPERM
  const code: (Insn | { label: string })[] = [
    { code: BPF.LD_W_ABS, k: DATA.arch },
    { code: BPF.JEQ_K, k: AUDIT_ARCH_X86_64, jt: 'nr', jf: 'kill' },
    { label: 'kill' },
    { code: BPF.RET_K, k: SECCOMP_RET.KILL_PROCESS },
    { label: 'nr' },
    { code: BPF.LD_W_ABS, k: DATA.nr },
    { code: BPF.JGE_K, k: X32_SYSCALL_BIT, jt: 'eperm' },
    ...Object.keys(DENIED).map((name) => jumpIf(X86_64_SYSCALLS[name as SyscallName], 'eperm')),
    jumpIf(X86_64_SYSCALLS.clone, 'clone'),
    jumpIf(X86_64_SYSCALLS.unshare, 'unshare'),
    jumpIf(X86_64_SYSCALLS.clone3, 'enosys'),
    jumpIf(X86_64_SYSCALLS.personality, 'personality'),
    jumpIf(X86_64_SYSCALLS.ioctl, 'ioctl'),
    { code: BPF.RET_K, k: SECCOMP_RET.ALLOW },
    // The flags are the first argument; every namespace flag lives in its low word.
    { label: 'clone' },
    { code: BPF.LD_W_ABS, k: DATA.argLow(0) },
    { code: BPF.JSET_K, k: CLONE_NAMESPACE_FLAGS, jt: 'eperm', jf: 'allow' },
    { label: 'unshare' },
    { code: BPF.LD_W_ABS, k: DATA.argLow(0) },
    { code: BPF.JSET_K, k: UNSHARE_NAMESPACE_FLAGS, jt: 'eperm', jf: 'allow' },
    // The kernel reads personality's argument and ioctl's request as unsigned int: the low word is all of it.
    { label: 'personality' },
    { code: BPF.LD_W_ABS, k: DATA.argLow(0) },
    ...PERSONALITY_ALLOWED.map((value) => jumpIf(value, 'allow')),
    { code: BPF.RET_K, k: eperm },
    { label: 'ioctl' },
    { code: BPF.LD_W_ABS, k: DATA.argLow(1) },
    ...IOCTL_DENIED.map((request) => jumpIf(request, 'eperm')),
    // Classic BPF jumps only forward: the shared verdicts come last.
    { label: 'allow' },
    { code: BPF.RET_K, k: SECCOMP_RET.ALLOW },
    { label: 'eperm' },
    { code: BPF.RET_K, k: eperm },
    { label: 'enosys' },
    { code: BPF.RET_K, k: SECCOMP_RET.ERRNO | ERRNO.ENOSYS },
  ]
  return assemble(code)
}

/** The filter as bwrap takes it: the arguments, the fd they name, and the program to write there. */
export interface BwrapSeccomp {
  /** `--seccomp <fd>`, to place before the command. */
  args: string[]
  /** The child's fd the program is read from: give bwrap a pipe there (`stdio[fd] = 'pipe'`). */
  fd: number
  /** The program to write into that pipe. */
  program: Buffer
}

/** The bwrap arguments and program for the filter on `fd`; throws on a host the filter does not cover. */
export function bwrapSeccomp(fd = 10): BwrapSeccomp {
  if (!seccompSupported())
    throw new Error(
      `the sandbox seccomp filter is built for x86_64 only, and this host is ${process.arch}; run the runner on an x86_64 host`,
    )
  return { args: ['--seccomp', String(fd)], fd, program: buildSeccompFilter() }
}

/** Writes the program into the pipe of a bwrap spawned with `stdio[filter.fd] = 'pipe'`, then closes it. */
export function feedSeccomp(child: ChildProcess, filter: BwrapSeccomp): void {
  const pipe = child.stdio[filter.fd]
  if (pipe === undefined || pipe === null || !('write' in pipe))
    throw new Error(`spawn bwrap with stdio[${filter.fd}] = 'pipe' to pass it the seccomp filter`)
  // bwrap reads the fd to its end before it runs anything; a program of a few hundred bytes
  // fits the pipe buffer, so the write never waits for the reader.
  // A bwrap that dies before reading closes the pipe; that is reported by its exit, not here.
  pipe.on('error', () => {})
  pipe.end(filter.program)
}

function jumpIf(k: number, target: string): Insn {
  return { code: BPF.JEQ_K, k, jt: target }
}

/** Resolves labels to forward offsets (which must fit a u8) and encodes each instruction. */
function assemble(code: (Insn | { label: string })[]): Buffer {
  const labels = new Map<string, number>()
  const insns: Insn[] = []
  for (const item of code) {
    if ('label' in item) labels.set(item.label, insns.length)
    else insns.push(item)
  }
  const out = Buffer.alloc(insns.length * SOCK_FILTER_BYTES)
  insns.forEach((insn, i) => {
    const offset = (label: string | undefined): number => {
      if (label === undefined) return 0
      const at = labels.get(label)
      if (at === undefined) throw new Error(`seccomp filter: unknown label ${label}`)
      const jump = at - (i + 1)
      if (jump < 0 || jump > 255) throw new Error(`seccomp filter: jump to ${label} out of range (${jump})`)
      return jump
    }
    out.writeUInt16LE(insn.code, i * SOCK_FILTER_BYTES)
    out.writeUInt8(offset(insn.jt), i * SOCK_FILTER_BYTES + 2)
    out.writeUInt8(offset(insn.jf), i * SOCK_FILTER_BYTES + 3)
    out.writeUInt32LE(insn.k >>> 0, i * SOCK_FILTER_BYTES + 4)
  })
  return out
}
