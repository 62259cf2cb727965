import { describe, expect, it } from 'vitest'
import {
  AUDIT_ARCH_X86_64,
  BPF,
  buildSeccompFilter,
  bwrapSeccomp,
  CLONE_NAMESPACE_FLAGS,
  DENIED,
  ERRNO,
  SECCOMP_RET,
  SOCK_FILTER_BYTES,
  type SyscallName,
  X86_64_SYSCALLS,
} from './seccomp-filter.ts'

interface Insn {
  code: number
  jt: number
  jf: number
  k: number
}

function decode(program: Buffer): Insn[] {
  const out: Insn[] = []
  for (let at = 0; at < program.length; at += SOCK_FILTER_BYTES) {
    out.push({
      code: program.readUInt16LE(at),
      jt: program.readUInt8(at + 2),
      jf: program.readUInt8(at + 3),
      k: program.readUInt32LE(at + 4),
    })
  }
  return out
}

/** The `struct seccomp_data` of one call: nr, arch, and the low words of its arguments. */
interface Call {
  nr: number
  arch?: number
  args?: number[]
}

/** Runs the program on a call as the kernel would, for the opcodes the filter uses. */
function evaluate(insns: Insn[], call: Call): number {
  const word = (offset: number): number => {
    if (offset === 0) return call.nr >>> 0
    if (offset === 4) return (call.arch ?? AUDIT_ARCH_X86_64) >>> 0
    const arg = (offset - 16) / 8
    // Low words only: the high words of the test calls are zero.
    return Number.isInteger(arg) ? (call.args?.[arg] ?? 0) >>> 0 : 0
  }
  let acc = 0
  for (let pc = 0; pc < insns.length; pc++) {
    const insn = insns[pc] as Insn
    switch (insn.code) {
      case BPF.LD_W_ABS:
        acc = word(insn.k)
        break
      case BPF.JEQ_K:
        pc += acc === insn.k ? insn.jt : insn.jf
        break
      case BPF.JGE_K:
        pc += acc >= insn.k ? insn.jt : insn.jf
        break
      case BPF.JSET_K:
        pc += (acc & insn.k) !== 0 ? insn.jt : insn.jf
        break
      case BPF.RET_K:
        return insn.k
      default:
        throw new Error(`unexpected opcode ${insn.code}`)
    }
  }
  throw new Error('the program ran off its end')
}

const program = buildSeccompFilter()
const insns = decode(program)
const EPERM = SECCOMP_RET.ERRNO | ERRNO.EPERM
const nr = (name: SyscallName) => X86_64_SYSCALLS[name]

describe('seccomp filter encoding', () => {
  it('is a whole number of 8-byte instructions within the kernel limit', () => {
    expect(program.length % SOCK_FILTER_BYTES).toBe(0)
    expect(insns.length).toBeGreaterThan(Object.keys(DENIED).length)
    // BPF_MAXINSNS.
    expect(insns.length).toBeLessThanOrEqual(4096)
  })

  it('checks the architecture first and kills any other', () => {
    expect(insns[0]).toEqual({ code: BPF.LD_W_ABS, jt: 0, jf: 0, k: 4 })
    expect(insns[1]).toMatchObject({ code: BPF.JEQ_K, k: AUDIT_ARCH_X86_64 })
    const onMismatch = insns[2 + (insns[1]?.jf ?? 0)]
    expect(onMismatch).toEqual({ code: BPF.RET_K, jt: 0, jf: 0, k: SECCOMP_RET.KILL_PROCESS })
    // AUDIT_ARCH_I386, as an `int 0x80` call from a 64-bit process reports.
    expect(evaluate(insns, { nr: 20, arch: 0x40000003 })).toBe(SECCOMP_RET.KILL_PROCESS)
  })

  it('jumps only forward and lands inside the program', () => {
    insns.forEach((insn, pc) => {
      if ((insn.code & 0x07) !== 0x05) return
      expect(pc + 1 + insn.jt).toBeLessThan(insns.length)
      expect(pc + 1 + insn.jf).toBeLessThan(insns.length)
    })
    expect(insns[insns.length - 1]?.code).toBe(BPF.RET_K)
  })

  it.each(Object.keys(DENIED) as SyscallName[])('answers %s with EPERM', (name) => {
    expect(evaluate(insns, { nr: nr(name) })).toBe(EPERM)
  })

  it('allows what it does not name, and refuses the x32 ABI', () => {
    for (const allowed of [0, 1, 2, 39, 59, 60, 101, 231, 334, 439, 462]) {
      expect(evaluate(insns, { nr: allowed })).toBe(SECCOMP_RET.ALLOW)
    }
    expect(evaluate(insns, { nr: 0x40000000 + 39 })).toBe(EPERM)
  })

  it('looks into clone, unshare, clone3, personality and ioctl', () => {
    const SIGCHLD = 17
    const CLONE_THREAD_FLAGS = 0x003d0f00
    expect(evaluate(insns, { nr: nr('clone'), args: [SIGCHLD] })).toBe(SECCOMP_RET.ALLOW)
    expect(evaluate(insns, { nr: nr('clone'), args: [CLONE_THREAD_FLAGS] })).toBe(SECCOMP_RET.ALLOW)
    for (let bit = 0; bit < 32; bit++) {
      const flag = 2 ** bit
      if ((CLONE_NAMESPACE_FLAGS & flag) === 0) continue
      expect(evaluate(insns, { nr: nr('clone'), args: [flag | SIGCHLD] })).toBe(EPERM)
      expect(evaluate(insns, { nr: nr('unshare'), args: [flag] })).toBe(EPERM)
    }
    const CLONE_NEWTIME = 0x80
    expect(evaluate(insns, { nr: nr('unshare'), args: [CLONE_NEWTIME] })).toBe(EPERM)
    const CLONE_FILES = 0x400
    expect(evaluate(insns, { nr: nr('unshare'), args: [CLONE_FILES] })).toBe(SECCOMP_RET.ALLOW)
    expect(evaluate(insns, { nr: nr('clone3') })).toBe(SECCOMP_RET.ERRNO | ERRNO.ENOSYS)
    expect(evaluate(insns, { nr: nr('personality'), args: [0] })).toBe(SECCOMP_RET.ALLOW)
    expect(evaluate(insns, { nr: nr('personality'), args: [0xffffffff] })).toBe(SECCOMP_RET.ALLOW)
    const ADDR_NO_RANDOMIZE = 0x0040000
    expect(evaluate(insns, { nr: nr('personality'), args: [ADDR_NO_RANDOMIZE] })).toBe(EPERM)
    const TIOCSTI = 0x5412
    const TCGETS = 0x5401
    expect(evaluate(insns, { nr: nr('ioctl'), args: [0, TIOCSTI] })).toBe(EPERM)
    expect(evaluate(insns, { nr: nr('ioctl'), args: [0, TCGETS] })).toBe(SECCOMP_RET.ALLOW)
  })

  it('gives bwrap the program on the fd its arguments name', () => {
    const filter = bwrapSeccomp(11)
    expect(filter.args).toEqual(['--seccomp', '11'])
    expect(filter.fd).toBe(11)
    expect(filter.program.equals(program)).toBe(true)
  })
})
