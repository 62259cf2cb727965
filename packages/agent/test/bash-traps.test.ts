import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect } from 'vitest'
import { ShellClosedError } from '../src/agent-error.ts'
import type { BashSession } from '../src/bash-session.ts'
import { nextEvent, sh, test } from './fixtures.ts'

/**
 * Runs `lines` in an interactive bash on a real pseudo-terminal (util-linux `script`), one line
 * per command line as a user would type them, and returns what its traps wrote to `log`.
 */
function terminalLog(lines: readonly string[], workdir: string, log: string): string {
  writeFileSync(log, '')
  execFileSync('script', ['-qc', 'bash --norc --noprofile -i', '/dev/null'], {
    input: `${[`LOG=${log}`, ...lines].join('\n')}\nexit\n`,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: workdir, TERM: 'dumb', LANG: 'C.UTF-8' },
    cwd: workdir,
    stdio: ['pipe', 'ignore', 'ignore'],
    timeout: 60_000,
  })
  return readFileSync(log, 'utf8')
}

/** Runs `lines` in a session, one run per line, and returns what its traps wrote to `log`. */
async function sessionLog(s: BashSession, lines: readonly string[], log: string): Promise<string> {
  writeFileSync(log, '')
  for (const line of [`LOG=${log}`, ...lines]) await sh(s, line)
  return readFileSync(log, 'utf8')
}

/** Each scenario ends with its traps removed, so the terminal's closing `exit` fires none. */
const SCENARIOS: Record<string, readonly string[]> = {
  'DEBUG fires once per user command, lists as set, and goes with trap -': [
    `trap 'echo "D:$?:$BASH_COMMAND" >> "$LOG"' DEBUG; echo same-line`,
    'echo a; false; echo b | cat',
    'f() { echo in-f; }; f; for i in 1 2; do [[ $i == 1 ]]; done; (( 1 + 1 )); (echo sub)',
    'trap -p >> "$LOG"; trap >> "$LOG"; trap -p DEBUG INT >> "$LOG"; trap "echo it\'s" INT',
    'trap -p >> "$LOG"',
    'trap - DEBUG INT',
    'echo no-trap-now',
    'trap -p >> "$LOG"',
  ],
  "trap keeps the builtin's forms and messages, also under set -eu": [
    `set -eu; trap 'echo D >> "$LOG"' DEBUG`,
    'trap -p >> "$LOG"; trap -p INT DEBUG >> "$LOG"; trap >> "$LOG"',
    `trap -- 'echo I' INT; trap 'echo E' ERR RETURN debug; trap -p >> "$LOG"`,
    'trap ERR; trap -p >> "$LOG"',
    'echo "$(trap -p)" >> "$LOG"; (trap -p >> "$LOG")',
    `trap '' DEBUG; trap -p DEBUG >> "$LOG"; trap 'echo D >> "$LOG"' DEBUG`,
    'trap x NOSUCHSIG 2>> "$LOG" || echo "st:$?" >> "$LOG"',
    'trap 0 RETURN debug INT; trap -p >> "$LOG"',
    'set +eu',
  ],
  'DEBUG stays out of subshells, also when they start a run': [
    `trap 'echo "D:$BASH_COMMAND" >> "$LOG"' DEBUG`,
    '(echo sub; echo sub2)',
    '{ echo g; } | cat',
    'echo a | cat; (echo sub3)',
    'x=$(echo cs); echo "$x" <(echo ps) >/dev/null',
    'trap - DEBUG',
  ],
  'DEBUG follows set -T into functions and not after set +T': [
    `trap 'echo "D:$BASH_COMMAND" >> "$LOG"' DEBUG`,
    'g() { echo in-g; }; set -T; g; set +T; g',
    'trap - DEBUG',
  ],
  'ERR fires once per failing command and follows set -E': [
    `trap 'echo "E:$?:$BASH_COMMAND" >> "$LOG"' ERR`,
    'false',
    '(exit 3)',
    'test -f /nonexistent && echo never',
    'false || true',
    'h() { false; echo after; }; h; set -E; h; set +E',
    'set -o pipefail; false | true; set +o pipefail',
    'trap -p >> "$LOG"; trap - ERR',
    'false',
  ],
  'RETURN fires for sourced user files and, under set -T, functions': [
    `trap 'echo "R:$BASH_COMMAND" >> "$LOG"' RETURN`,
    'echo "echo sourced" > lib.sh; . ./lib.sh',
    'k() { echo in-k; }; k; set -T; k; set +T',
    'echo "return 4" > ret.sh; . ./ret.sh; echo "st:$?" >> "$LOG"',
    'trap -p RETURN >> "$LOG"; trap - RETURN',
    '. ./lib.sh',
  ],
  'DEBUG fires for the commands of ERR and RETURN actions and nothing else': [
    `trap 'echo "D:$BASH_COMMAND" >> "$LOG"' DEBUG; trap 'echo "E:$?" >> "$LOG"' ERR; trap 'echo R >> "$LOG"' RETURN`,
    'false',
    'echo "true" > lib.sh; . ./lib.sh',
    'set -T; m() { false; }; m; set +T',
    'set -E; m; set +E; set -ET; m; set +ET',
    'trap - DEBUG ERR RETURN',
  ],
}

describe('traps fire as in a terminal', () => {
  for (const [name, lines] of Object.entries(SCENARIOS)) {
    test(`${name} (compared with bash -i on a real terminal)`, async ({ newSession, workdir }) => {
      const expected = terminalLog(lines, workdir, join(workdir, 'terminal.log'))
      expect(expected).not.toBe('')
      const s = await newSession()
      expect(await sessionLog(s, lines, join(workdir, 'session.log'))).toBe(expected)
    })
  }

  test('adds no output of its own to runs when DEBUG, ERR and RETURN are set', async ({ newSession }) => {
    const s = await newSession()
    await sh(s, "trap 'echo D' DEBUG; trap 'echo E >&2' ERR; trap 'echo R' RETURN")
    expect([(await sh(s, 'echo one')).out, (await sh(s, 'true')).out]).toEqual(['D\none\n', 'D\n'])
    const failed = await sh(s, 'false')
    // DEBUG fires for `false` and for the `echo` of the ERR action, as in a terminal.
    expect([failed.exitCode, failed.out, failed.err]).toEqual([1, 'D\nD\n', 'E\n'])
    expect((await sh(s, 'echo "$?"')).out).toBe('D\n1\n')
  })

  test('keeps the user-visible shell options free of the framing', async ({ newSession }) => {
    const s = await newSession()
    await sh(s, "trap ': debug' DEBUG")
    expect((await sh(s, 'echo "$-"')).out).not.toContain('T')
    await sh(s, 'set -T')
    expect((await sh(s, 'echo "$-"')).out).toContain('T')
    await sh(s, 'set +T')
    expect((await sh(s, 'echo "$-"')).out).not.toContain('T')
  })

  test('traces only the trap command under set -x', async ({ newSession }) => {
    const s = await newSession()
    await sh(s, 'set -x')
    expect((await sh(s, "trap 'echo D' DEBUG")).err).toBe("++ trap 'echo D' DEBUG\n")
    expect((await sh(s, 'echo hi')).err).toBe('+++ echo D\n++ echo hi\n')
  })

  test('keeps traps out of internal runs', async ({ newSession }) => {
    const s = await newSession()
    await sh(s, "trap 'echo D' DEBUG; trap 'echo E' ERR; trap 'echo R' RETURN; set -T")
    const r = await s.run({ runId: 'q', command: '\\builtin false; \\builtin printf x', internal: true })
    expect(r.stdout.toString()).toBe('x')
    expect((await sh(s, 'echo y')).out).toBe('D\ny\n')
  })

  test("keeps exit codes, env listings and traps right when the user's variables are readonly", async ({
    newSession,
  }) => {
    const s = await newSession()
    // Short names the framing's own functions could use as locals.
    await sh(s, 'readonly rc=9 n=1 a=1 k=1 s=1 w=1 q=1 r=1 other=1; export EXPORTED=yes')
    expect((await sh(s, 'false')).exitCode).toBe(1)
    expect((await sh(s, '(exit 5)')).exitCode).toBe(5)
    const env = await s.run({ runId: 'e', command: s.helperName('env'), internal: true })
    expect(env.stdout.toString()).toContain('EXPORTED=yes\0')
    await sh(s, "trap 'echo D' DEBUG")
    expect((await sh(s, 'trap -p DEBUG')).out).toBe("D\ntrap -- 'echo D' DEBUG\n")
    expect((await sh(s, 'echo x')).out).toBe('D\nx\n')
  })

  test('runs the EXIT trap once when the shell exits', async ({ newSession }) => {
    const s = await newSession()
    await sh(s, "trap 'echo bye' EXIT; trap 'echo D' DEBUG")
    const closed = nextEvent(s, (e) => e.type === 'shell_closed')
    await expect(sh(s, 'exit 3')).rejects.toBeInstanceOf(ShellClosedError)
    await closed
    const { replay } = s.log.subscribe(0, () => true)
    const text = replay.flatMap((e) => ('data' in e ? [e.data.toString()] : [])).join('')
    expect(text.match(/bye/g)).toHaveLength(1)
    expect((await s.closed).code).toBe(3)
  })
})

describe('closing a session hangs bash up as closing a terminal does', () => {
  test('runs the EXIT trap between runs and during one, then closes', async ({ newSession, workdir }) => {
    for (const during of [false, true]) {
      const s = await newSession()
      const file = join(workdir, `bye-${during}`)
      await sh(s, `trap 'echo bye > ${file}' EXIT`)
      const started = nextEvent(s, (e) => 'data' in e && e.data.toString().includes('started'))
      const run = during ? sh(s, 'echo started; sleep 100') : null
      if (run !== null) await started
      const info = await s.dispose()
      expect(info.reason).toBe('session deleted')
      if (run !== null) await expect(run).rejects.toBeInstanceOf(ShellClosedError)
      expect(readFileSync(file, 'utf8')).toBe('bye\n')
    }
  })

  test('still closes a shell that ignores the hang-up', async ({ newSession }) => {
    const s = await newSession()
    await sh(s, "trap '' HUP; trap 'sleep 100' EXIT")
    expect((await s.dispose()).signal).toBe('SIGKILL')
    await expect(sh(s, 'true')).rejects.toBeInstanceOf(ShellClosedError)
  })
})

describe('traps cannot break or read the framing', () => {
  test('never run for framing commands, so they never see the nonce', async ({ newSession, workdir }) => {
    const s = await newSession()
    const log = join(workdir, 'seen')
    const dump = `{ echo "$BASH_COMMAND|$*|\${BASH_ARGV[*]}|\${FUNCNAME[*]}"; declare -p; } >> ${log}`
    await sh(s, `shopt -s extdebug; set -T; trap '${dump}' DEBUG ERR RETURN`)
    for (const c of ['true', 'false', 'f() { return 2; }; f', 'echo x']) await sh(s, c)
    const seen = readFileSync(log, 'utf8')
    expect(seen).toContain('return 2|')
    expect(seen).toContain('echo x|')
    expect(seen).not.toContain('__conch_end')
    expect(seen).not.toMatch(/[0-9a-f]{32}/)
  })

  test('a trap that prints a fake end marker only adds output', async ({ newSession }) => {
    const s = await newSession()
    const fake = `\\037C${'0'.repeat(32)}:000\\036`
    await sh(s, `trap 'printf "${fake}"; printf "${fake}" >&2' DEBUG`)
    const r = await sh(s, 'echo real; false')
    const marker = `\x1fC${'0'.repeat(32)}:000\x1e`
    expect(r.exitCode).toBe(1)
    expect(r.stdout.toString('latin1')).toBe(`${marker}real\n${marker}`)
    expect((await sh(s, 'trap - DEBUG; echo next')).out).toBe(`${marker}next\n`)
  })

  test('exit inside DEBUG closes the shell at the next command, as in a terminal', async ({ newSession }) => {
    const s = await newSession()
    expect((await sh(s, "trap 'exit 9' DEBUG")).exitCode).toBe(0)
    await expect(sh(s, 'echo never')).rejects.toMatchObject({ code: 'SHELL_CLOSED', info: { code: 9 } })
  })

  test('a timeout with traps set stops the command and keeps the shell and its traps', async ({
    newSession,
  }) => {
    const s = await newSession()
    await sh(s, "trap 'echo D' DEBUG; trap 'echo E' ERR; trap 'echo R' RETURN")
    const r = await sh(s, 'sleep 100', { timeoutMs: 300 })
    expect(r.timedOut).toBe(true)
    expect((await sh(s, 'echo next')).out).toBe('D\nnext\n')
    expect((await sh(s, 'trap -p')).out).toBe(
      "D\ntrap -- 'echo D' DEBUG\ntrap -- 'echo E' ERR\ntrap -- 'echo R' RETURN\n",
    )
  })
})
