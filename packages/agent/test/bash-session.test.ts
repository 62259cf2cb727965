import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect } from 'vitest'
import { ShellClosedError } from '../src/agent-error.ts'
import { HISTORY_MAX_BYTES } from '../src/session-history.ts'
import { isAlive, nextEvent, sh, test, untilTicksPassStartOf } from './fixtures.ts'

describe('promise 1: exact output', () => {
  test('keeps a missing trailing newline missing', async ({ newSession }) => {
    const s = await newSession()
    expect((await sh(s, "printf 'no newline'")).out).toBe('no newline')
  })

  test('keeps a line that looks like a marker with another nonce', async ({ newSession }) => {
    const s = await newSession()
    const fake = `\\037C${'0'.repeat(32)}:000\\036`
    const r = await sh(s, `printf '${fake}\\n'; printf '${fake}' >&2`)
    expect(r.stdout).toEqual(Buffer.from(`\x1fC${'0'.repeat(32)}:000\x1e\n`, 'latin1'))
    expect(r.stderr).toEqual(Buffer.from(`\x1fC${'0'.repeat(32)}:000\x1e`, 'latin1'))
  })

  test('keeps NUL bytes, invalid UTF-8 and carriage returns', async ({ newSession }) => {
    const s = await newSession()
    const r = await sh(s, "printf 'a\\0b\\377\\376c\\r\\n'")
    expect(r.stdout).toEqual(Buffer.from([0x61, 0, 0x62, 0xff, 0xfe, 0x63, 0x0d, 0x0a]))
  })

  test('separates stdout from stderr', async ({ newSession }) => {
    const s = await newSession()
    const r = await sh(s, 'echo out; echo err >&2')
    expect(r.out).toBe('out\n')
    expect(r.err).toBe('err\n')
  })

  test('keeps a multi-byte character whole when the pipe splits it across chunks', async ({ newSession }) => {
    const s = await newSession()
    // 100001 bytes of 'a' push the first € across a 64 KiB read boundary at some point.
    const r = await sh(
      s,
      "head -c 65535 /dev/zero | tr '\\0' a; printf '€€€'; head -c 65534 /dev/zero | tr '\\0' b; printf '😀'",
    )
    const text = r.stdout.toString('utf8')
    expect(text).toBe(`${'a'.repeat(65535)}€€€${'b'.repeat(65534)}😀`)
  })
})

describe('promise 2: exact exit code', () => {
  test('reports $? including 128+n for a signal', async ({ newSession }) => {
    const s = await newSession()
    expect((await sh(s, 'exit_code() { return 42; }; exit_code')).exitCode).toBe(42)
    expect((await sh(s, 'sh -c "kill -TERM \\$\\$"')).exitCode).toBe(143)
    expect((await sh(s, 'echo $?')).out).toBe('143\n')
  })
})

describe('promise 3: any command text', () => {
  test('runs heredocs with <<EOF and <<-EOF', async ({ newSession }) => {
    const s = await newSession()
    const r = await sh(s, "cat <<EOF\nline $((1+1))\nEOF\ncat <<-'EOF'\n\t\tindented $x\n\tEOF")
    expect(r.out).toBe('line 2\nindented $x\n')
  })

  test('runs functions, case and a trailing comment', async ({ newSession }) => {
    const s = await newSession()
    await sh(
      s,
      'greet() {\n  case "$1" in\n    a) echo alpha ;;\n    *) echo other ;;\n  esac\n} # trailing comment',
    )
    expect((await sh(s, 'greet a; greet z # another')).out).toBe('alpha\nother\n')
  })

  test('reports an unbalanced quote as a syntax error and stays usable', async ({ newSession }) => {
    const s = await newSession()
    const r = await sh(s, 'echo "unterminated')
    expect(r.exitCode).toBe(2)
    expect(r.err).toContain('unexpected EOF')
    expect((await sh(s, 'echo fine')).out).toBe('fine\n')
  })

  test('accepts CRLF line endings', async ({ newSession }) => {
    const s = await newSession()
    const r = await sh(s, 'x=1\r\nif [ "$x" = 1 ]; then\r\n  echo crlf\r\nfi\r\n')
    expect(r.out).toBe('crlf\n')
  })

  test('rejects a NUL byte in the command with a typed error', async ({ newSession }) => {
    const s = await newSession()
    await expect(s.run({ runId: 'n', command: 'echo a\0b' })).rejects.toMatchObject({
      code: 'INVALID_COMMAND',
    })
    expect((await sh(s, 'echo ok')).out).toBe('ok\n')
  })

  test('runs a command too long for a line through the command file', async ({ newSession }) => {
    const s = await newSession()
    const r = await sh(s, `x='${'y'.repeat(200_000)}'; echo \${#x}`)
    expect(r.out).toBe('200000\n')
  })

  test('runs a shorter command after a longer one without leftover text', async ({ newSession }) => {
    const s = await newSession()
    expect((await sh(s, 'echo long-command-text-here')).out).toBe('long-command-text-here\n')
    expect((await sh(s, 'echo a')).out).toBe('a\n')
  })

  test('keeps running commands after a command removes its own command file', async ({ newSession }) => {
    const s = await newSession()
    expect((await sh(s, 'rm -f -- "$BASH_SOURCE"; echo gone')).out).toBe('gone\n')
    const r = await sh(s, 'echo still here')
    expect(r.out).toBe('still here\n')
    expect(r.exitCode).toBe(0)
  })
})

describe('state persists', () => {
  test('keeps cwd, exports, variables, functions, aliases and $1 between runs', async ({
    newSession,
    workdir,
  }) => {
    const s = await newSession()
    await sh(
      s,
      'mkdir -p sub && cd sub; export E=exported; declare D=declared; f() { echo fn; }; alias al="echo aliased"; set -- one two',
    )
    const r = await sh(s, 'pwd; echo $E $D; f; al; echo $1')
    expect(r.out).toBe(`${join(workdir, 'sub')}\nexported declared\nfn\naliased\none\n`)
  })
})

describe('promise 4: no hangs on stdin', () => {
  test('gives commands /dev/null as stdin', async ({ newSession }) => {
    const s = await newSession()
    const r = await sh(s, 'read x; echo "rc=$? x=$x"; cat; wc -c')
    expect(r.out).toBe('rc=1 x=\n0\n')
  })

  test('gives a command the stdin bytes passed with the run', async ({ newSession }) => {
    const s = await newSession()
    const r = await sh(s, 'read a; cat', { stdin: Buffer.from('first\nrest\n') })
    expect(r.out).toBe('rest\n')
    expect((await sh(s, 'echo $a')).out).toBe('first\n')
  })

  test('runs git log without a pager', async ({ newSession, workdir }) => {
    const s = await newSession()
    execFileSync('git', ['init', '-q', workdir])
    const r = await sh(
      s,
      'git -c user.name=t -c user.email=t@e commit -q --allow-empty -m one && git log --oneline | wc -l; git log --format=%s',
    )
    expect(r.out).toBe('1\none\n')
  })

  test('starts with the non-interactive environment', async ({ newSession }) => {
    const s = await newSession()
    expect((await sh(s, 'echo $PAGER $GIT_PAGER $GIT_TERMINAL_PROMPT $DEBIAN_FRONTEND')).out).toBe(
      'cat cat 0 noninteractive\n',
    )
  })
})

describe('promise 5: robust against user shell state', () => {
  test('keeps working with set -u, set -o pipefail and an ERR trap', async ({ newSession }) => {
    const s = await newSession()
    await sh(s, 'set -u -o pipefail; trap "echo trapped >&2" ERR')
    const r = await sh(s, 'false | true')
    expect(r.exitCode).toBe(1)
    expect(r.err).toContain('trapped')
    expect((await sh(s, 'echo $undefined_var')).exitCode).not.toBe(0)
    expect((await sh(s, 'echo still')).out).toBe('still\n')
  })

  test('closes the shell on set -e and a failing command', async ({ newSession }) => {
    const s = await newSession()
    await sh(s, 'set -e')
    await expect(sh(s, 'false')).rejects.toBeInstanceOf(ShellClosedError)
    expect(await s.closed).toMatchObject({ code: 1, signal: null })
  })

  test('survives redefined printf, echo and cd, aliases, unset PATH, PS1 and PROMPT_COMMAND', async ({
    newSession,
  }) => {
    const s = await newSession()
    await sh(
      s,
      'printf() { :; }; echo() { :; }; cd() { :; }; alias builtin=false return=false local=false; PS1="$ "; PS2="> "; PROMPT_COMMAND="command echo pc"; PS0=zero',
    )
    const r = await sh(s, 'unset PATH; command printf "%s\\n" ok; (exit 3)')
    expect(r.out).toBe('ok\n')
    expect(r.err).toBe('')
    expect(r.exitCode).toBe(3)
  })

  test('under set -u with the prompts unset, a sparse PROMPT_COMMAND and TMOUT, runs end and keep $?', async ({
    newSession,
  }) => {
    const s = await newSession()
    // The end function reads the prompt variables to decide whether to reset them: unset ones
    // must not trip `set -u`, and an array PROMPT_COMMAND with no element 0 still counts as set.
    const set = await sh(
      s,
      'set -u; unset PS0 PS1 PS2; PROMPT_COMMAND[1]="command echo pc"; TMOUT=9; (exit 7)',
    )
    expect([set.out, set.err, set.exitCode]).toEqual(['', '', 7])
    const r = await sh(s, 'echo "$? ${PROMPT_COMMAND[*]-none} ${TMOUT-none}"; (exit 5)')
    expect([r.out, r.err, r.exitCode]).toEqual(['7 none none\n', '', 5])
    const next = await sh(s, 'echo $?; PS1="\\$(echo p)$ "; PS0=zero')
    expect([next.out, next.err, next.exitCode]).toEqual(['5\n', '', 0])
    const after = await sh(s, 'echo "[$PS0][$PS1][$PS2]"')
    expect([after.out, after.err]).toEqual(['[][][]\n', ''])
  })

  test('keeps $? for the next run when the command makes the prompt variables readonly', async ({
    newSession,
  }) => {
    const s = await newSession()
    // The end function cannot reset them: that must neither abort it before it returns `$?`
    // nor cost a run its end.
    const set = await sh(s, 'readonly PS0=zero PS1="> " TMOUT=100; (exit 4)')
    expect([set.out, set.err, set.exitCode]).toEqual(['', '', 4])
    const r = await sh(s, 'echo "$? [$PS0] [$PS1] $TMOUT"; (exit 6)')
    expect([r.out, r.err, r.exitCode]).toEqual(['4 [zero] [> ] 100\n', '', 6])
    const next = await sh(s, 'echo $?')
    expect([next.out, next.exitCode]).toEqual(['6\n', 0])
  })

  test('keeps markers on the pipes when the command redirects stdout and stderr for good', async ({
    newSession,
    workdir,
  }) => {
    const s = await newSession()
    await sh(s, `exec >${join(workdir, 'o.txt')} 2>&1; echo into-file`)
    const r = await sh(s, 'echo more; exec >/dev/stdin 2>&1')
    expect(r.out).toBe('')
  })

  test('runs an EXIT trap when the shell exits', async ({ newSession }) => {
    const s = await newSession()
    await sh(s, 'trap "echo bye" EXIT')
    const exit = nextEvent(s, (e) => 'data' in e && e.data.toString().includes('bye'))
    await expect(sh(s, 'exit 0')).rejects.toBeInstanceOf(ShellClosedError)
    await exit
  })
})

describe('promise 6: timeouts stop the command and keep the shell', () => {
  test('stops a builtin loop and keeps cwd, env and functions', async ({ newSession, workdir }) => {
    const s = await newSession()
    await sh(s, 'cd /; export KEEP=yes; keep() { echo kept; }')
    const r = await sh(s, 'echo partial; while :; do :; done', { timeoutMs: 300 })
    expect(r.timedOut).toBe(true)
    expect(r.out).toBe('partial\n')
    expect(r.exitCode).toBe(130)
    expect((await sh(s, 'pwd; echo $KEEP; keep')).out).toBe('/\nyes\nkept\n')
    expect(workdir).not.toBe('/')
  })

  test('kills grandchildren, double-forked children and children that ignore SIGINT', async ({
    newSession,
    workdir,
  }) => {
    const s = await newSession()
    const pids = join(workdir, 'pids')
    const r = await sh(
      s,
      `(sleep 101 & echo $! >> ${pids}); sh -c 'sleep 102 & echo $! >> ${pids}; wait' & sh -c 'trap "" INT; sleep 103 & echo $! >> ${pids}; wait'`,
      { timeoutMs: 400 },
    )
    expect(r.timedOut).toBe(true)
    const list = (await sh(s, `cat ${pids}`)).out.trim().split('\n').map(Number)
    expect(list).toHaveLength(3)
    for (const pid of list) expect(isAlive(pid)).toBe(false)
  })

  test('spares background jobs started by earlier runs', async ({ newSession }) => {
    const s = await newSession()
    const bg = Number((await sh(s, 'sleep 300 & echo $!')).out)
    await untilTicksPassStartOf(bg) // start times have one-tick resolution: keep the runs a tick apart
    const r = await sh(s, 'sleep 200', { timeoutMs: 300 })
    expect(r.timedOut).toBe(true)
    expect(isAlive(bg)).toBe(true)
  })

  test('reports the session closed when bash itself cannot be recovered', async ({ newSession }) => {
    const s = await newSession()
    await sh(s, 'trap "" INT')
    await expect(sh(s, 'while :; do :; done', { timeoutMs: 200 })).rejects.toBeInstanceOf(ShellClosedError)
    expect((await s.closed).reason).toContain('did not recover')
  })
})

describe('promise 7: interrupt', () => {
  test('interrupts the running command like Ctrl-C and keeps the shell', async ({ newSession }) => {
    const s = await newSession()
    const started = nextEvent(s, (e) => 'data' in e && e.data.toString().includes('started'))
    const run = sh(s, 'echo started; sleep 100; echo never')
    await started
    expect(s.interrupt()).toBe(true)
    const r = await run
    expect(r.exitCode).toBe(130)
    expect(r.out).toBe('started\n')
    expect(r.interrupted).toBe(true)
    expect((await sh(s, 'echo next')).out).toBe('next\n')
  })

  test('adds no byte of its own to the interrupted run or the next one', async ({ newSession }) => {
    const s = await newSession()
    const started = nextEvent(s, (e) => 'data' in e && e.data.toString().includes('err-side'))
    const run = sh(s, 'echo out-side; echo err-side >&2; sleep 100')
    await started
    s.interrupt()
    const r = await run
    expect(r.out).toBe('out-side\n')
    expect(r.err).toBe('err-side\n')
    const next = await sh(s, 'echo next')
    expect([next.out, next.err]).toEqual(['next\n', ''])
  })

  test('stops a loop that forks a new child each turn', async ({ newSession }) => {
    const s = await newSession()
    const started = nextEvent(s, (e) => 'data' in e && e.data.toString().includes('looping'))
    const run = sh(s, 'echo looping; while true; do /bin/true; done')
    await started
    s.interrupt()
    expect((await run).exitCode).toBe(130)
    expect((await sh(s, 'echo alive')).out).toBe('alive\n')
  })
})

describe('shell options that print', () => {
  test('set -x traces the command and nothing of the framing', async ({ newSession }) => {
    const s = await newSession()
    await sh(s, 'set -x')
    const r = await sh(s, 'echo hi')
    expect(r.out).toBe('hi\n')
    expect(r.err).toBe('++ echo hi\n')
    await sh(s, 'set +x')
  })

  test('set -x traces nothing of the framing around a run a timeout interrupts', async ({ newSession }) => {
    // The end function has no stderr redirection of its own: after the SIGINT aborts the run's
    // `. file 2>&63`, bash's stderr must be /dev/null again before the sync line calls it.
    const s = await newSession()
    await sh(s, 'set -x')
    const r = await sh(s, 'echo partial; while :; do :; done', { timeoutMs: 300 })
    expect(r.timedOut).toBe(true)
    expect(r.err.startsWith('++ echo partial\n')).toBe(true)
    expect(r.err).not.toContain('conch')
    expect(r.err).not.toContain('printf')
    const next = await sh(s, 'echo hi')
    expect([next.out, next.err]).toEqual(['hi\n', '++ echo hi\n'])
    await sh(s, 'set +x')
  })

  test('a command may send its own stderr elsewhere for the rest of its run', async ({ newSession }) => {
    const s = await newSession()
    const r = await sh(s, 'exec 2>/dev/null; echo gone >&2; echo kept')
    expect([r.out, r.err]).toEqual(['kept\n', ''])
    expect((await sh(s, 'echo back >&2')).err).toBe('back\n')
  })
})

describe('promise 8: exit closes', () => {
  for (const [command, expected] of [
    ['exit 7', { code: 7, signal: null }],
    ['kill -9 $$', { code: null, signal: 'SIGKILL' }],
    ['exec true', { code: 0, signal: null }],
  ] as const) {
    test(`closes on ${command} and fails the pending and queued runs`, async ({ newSession }) => {
      const s = await newSession()
      const closedEvent = nextEvent(s, (e) => e.type === 'shell_closed')
      const pending = s.run({ runId: 'a', command })
      const queued = s.run({ runId: 'b', command: 'echo never' })
      await expect(pending).rejects.toMatchObject({ code: 'SHELL_CLOSED', info: expected })
      await expect(queued).rejects.toBeInstanceOf(ShellClosedError)
      await closedEvent
      await expect(s.run({ runId: 'c', command: 'true' })).rejects.toBeInstanceOf(ShellClosedError)
    })
  }
})

describe('promise 9: ordering', () => {
  test('rejects a run id that is active or queued and accepts it again once that run ended', async ({
    newSession,
  }) => {
    const s = await newSession()
    const first = s.run({ runId: 'dup', command: 'sleep 0.2; echo first' })
    const queued = s.run({ runId: 'q', command: 'echo queued' })
    await expect(s.run({ runId: 'dup', command: 'true' })).rejects.toMatchObject({ code: 'BAD_REQUEST' })
    await expect(s.run({ runId: 'q', command: 'true' })).rejects.toMatchObject({ code: 'BAD_REQUEST' })
    expect((await first).stdout.toString()).toBe('first\n')
    expect((await queued).stdout.toString()).toBe('queued\n')
    expect((await s.run({ runId: 'dup', command: 'echo again' })).stdout.toString()).toBe('again\n')
  })

  test('runs pipelined commands one at a time in arrival order', async ({ newSession }) => {
    const s = await newSession()
    const runs = Array.from({ length: 50 }, (_, i) => s.run({ runId: `p${i}`, command: `echo ${i}` }))
    const outs = await Promise.all(runs)
    expect(outs.map((o) => o.stdout.toString())).toEqual(Array.from({ length: 50 }, (_, i) => `${i}\n`))
  })

  test('delivers background output written between runs as unattributed', async ({ newSession, workdir }) => {
    const s = await newSession()
    const go = join(workdir, 'go')
    await sh(s, `(while [ ! -e ${go} ]; do sleep 0.01; done; echo from-background) &`)
    const bgEvent = nextEvent(s, (e) => 'data' in e && e.data.toString() === 'from-background\n')
    writeFileSync(go, '')
    const e = await bgEvent
    expect('data' in e && e.id).toBe(null)
    expect((await sh(s, 'echo next')).out).toBe('next\n')
  })

  test('runs different sessions in parallel', async ({ newSession }) => {
    const a = await newSession()
    const b = await newSession()
    const fifoRun = sh(a, 'read x < /dev/stdin; echo got-$x', { stdin: Buffer.from('') })
    const r = await sh(b, 'echo independent')
    expect(r.out).toBe('independent\n')
    await fifoRun
  })
})

describe('promise 10 and 11: streaming and bounded memory', () => {
  test('streams output before the command exits', async ({ newSession, workdir }) => {
    const s = await newSession()
    const go = join(workdir, 'go2')
    const seen = nextEvent(s, (e) => 'data' in e && e.data.toString() === 'early\n')
    const run = sh(s, `echo early; while [ ! -e ${go} ]; do sleep 0.01; done; echo late`)
    await seen
    writeFileSync(go, '')
    expect((await run).out).toBe('early\nlate\n')
  })

  test('caps the buffered result, marks it truncated and counts every byte', async ({ newSession }) => {
    const s = await newSession({ scrollbackBytes: 1 << 20 })
    const out = await s.run({ runId: 'big', command: 'head -c 50000000 /dev/zero', outputCapBytes: 1000 })
    expect(out.stdout.length).toBe(1000)
    expect(out.truncated).toBe(true)
    expect(out.stdoutBytes).toBe(50_000_000)
    expect(s.log.heldBytes).toBeLessThanOrEqual(1 << 20)
  })
})

describe('promise 12: scrollback', () => {
  test('replays from an offset, sliced exactly, with run events', async ({ newSession }) => {
    const s = await newSession()
    await s.run({ runId: 'one', command: 'printf abcdef' })
    const events = s.log.readFrom(3)
    expect(events.map((e) => ('data' in e ? e.data.toString() : e.type))).toEqual(['def', 'shell_exit'])
  })

  test('reports OUTPUT_LOST with the earliest offset for an evicted offset', async ({ newSession }) => {
    const s = await newSession({ scrollbackBytes: 1000 })
    await s.run({ runId: 'fill', command: 'head -c 5000 /dev/zero' })
    expect(() => s.log.readFrom(0)).toThrow(expect.objectContaining({ code: 'OUTPUT_LOST' }))
    try {
      s.log.readFrom(0)
    } catch (err) {
      const earliest = (err as { details: { earliestOffset: number } }).details.earliestOffset
      expect(earliest).toBeGreaterThan(0)
      expect(s.log.readFrom(earliest).length).toBeGreaterThan(0)
    }
  })

  test('a replayed old marker never completes a new run', async ({ newSession }) => {
    const s = await newSession()
    await sh(s, 'true')
    const r = await sh(s, 'cat /proc/self/cmdline >/dev/null; echo done')
    expect(r.out).toBe('done\n')
  })
})

describe('bounded memory: history', () => {
  test('keeps the history within its byte cap and drops the oldest commands first', async ({
    newSession,
  }) => {
    const s = await newSession()
    const big = (i: number) => `: ${String(i).padStart(3, '0')}${'x'.repeat(200_000)}`
    for (let i = 0; i < 8; i++) expect((await sh(s, big(i))).exitCode).toBe(0)
    await sh(s, 'echo last')
    const entries = s.history()
    expect(s.historyBytes).toBeLessThanOrEqual(HISTORY_MAX_BYTES)
    expect(entries.length).toBeLessThan(9)
    expect(entries.at(-1)?.command).toBe('echo last')
    expect(entries.at(-2)?.command).toBe(big(7))
    // Indexes stay stable: the first entry kept is the one after the last dropped.
    expect(entries[0]?.index).toBe(9 - entries.length)
    expect(s.historyEntry(0)).toBeNull()
  })
})
