// Attacks on the write-ahead window from code inside a run. bash keeps its original stdin (the
// socket the agent writes lines to) on fd 10 while a run's `<` redirection is active, so a run
// can read the lines written ahead of it: learn later runs' nonces, swallow their lines, or
// forge their markers. What must hold (docs/SECURITY.md, "What is left"): it corrupts only its
// own session's results, every run still ends (by its marker or its timeout), another session
// is untouched, and plain output never ends a run.
import { describe, expect } from 'vitest'
import { ShellClosedError } from '../src/agent-error.ts'
import type { BashSession } from '../src/bash-session.ts'
import { NONCE_LENGTH } from '../src/marker-scanner.ts'
import { REFILL_AT, WINDOW_LINES } from '../src/run-window.ts'
import type { RunOutcome } from '../src/session-run.ts'
import { test } from './fixtures.ts'

/** Reads the lines written ahead from bash's saved stdin and prints the first later nonce. */
const STEAL_AND_FORGE = String.raw`while read -r -t 0.5 -u 10 line; do
  case $line in *"__conch_end_"*" && :") n=$\{line% && :}; n=$\{n##* }; [[ $\{#n} == 32 ]] && break ;; esac
done
printf 'stole %s\n' "$n"
printf '\037C%s:042\036' "$n"; printf '\037C%s\036' "$n" >&2`.replaceAll('$\\{', '${')

function queue(s: BashSession, commands: string[], prefix: string, timeoutMs = 3000) {
  return commands.map((command, i) => s.run({ runId: `${prefix}${i}`, command, timeoutMs }))
}

const later = Array.from({ length: 20 }, (_, i) => `echo later-${i}`)

describe('write-ahead attacks', () => {
  test('a run that reads later lines and forges their markers corrupts only its own session, which goes on', async ({
    newSession,
  }) => {
    const victim = await newSession()
    const bystander = await newSession()
    const attacked = queue(victim, [STEAL_AND_FORGE, ...later], 'a')
    const calm = queue(bystander, later, 'b')
    const settled = await Promise.allSettled(attacked)
    // Every run of the attacked session ended: none hangs, whatever its result.
    expect(settled.every((r) => r.status === 'fulfilled')).toBe(true)
    const first = (settled[0] as PromiseFulfilledResult<RunOutcome>).value.stdout.toString()
    expect(first).toMatch(new RegExp(`^stole [0-9a-f]{${NONCE_LENGTH}}\\n`))
    // The other session's runs are exact.
    expect((await Promise.all(calm)).map((o) => o.stdout.toString())).toEqual(
      later.map((c) => `${c.slice(5)}\n`),
    )
    // The attacked session keeps working for the runs after the attack.
    expect(victim.open).toBe(true)
    const next = await victim.run({ runId: 'next', command: 'echo next; (exit 4)' })
    expect([next.stdout.toString(), next.exitCode]).toEqual(['next\n', 4])
  })

  test('a run that swallows the lines behind it times out, and the swallowed runs then run', async ({
    newSession,
  }) => {
    const s = await newSession()
    const [reader, b, c] = [
      s.run({ runId: 'reader', command: 'while read -r -u 10 line; do :; done', timeoutMs: 500 }),
      s.run({ runId: 'b', command: 'echo b' }),
      s.run({ runId: 'c', command: 'echo c $?' }),
    ]
    expect((await reader).timedOut).toBe(true)
    // Lines it read never ran and printed no marker: at the timeout they were held, so their
    // runs were written again.
    expect([(await b).stdout.toString(), (await c).stdout.toString()]).toEqual(['b\n', 'c 0\n'])
  })

  test('a background job racing bash for its stdin cannot hang the session or touch another', async ({
    newSession,
  }) => {
    const s = await newSession({ killGraceMs: 200 })
    const bystander = await newSession()
    await s.run({ runId: 'reader', command: 'cat <&10 >/dev/null &' })
    const settled = await Promise.allSettled(queue(s, later, 'r', 500))
    // Each run ended: it ran, timed out (its line swallowed), or was rejected when bash was
    // closed after a swallowed sync line. A swallowed line's run may show the next run's
    // output (its marker never came): results of this session only, nothing of another's.
    for (const r of settled) {
      if (r.status === 'fulfilled') expect(r.value.stdout.toString()).toMatch(/^(later-\d+\n)*$/)
      else expect(r.reason).toBeInstanceOf(ShellClosedError)
    }
    expect((await bystander.run({ runId: 'x', command: 'echo fine' })).stdout.toString()).toBe('fine\n')
  })

  test('output shaped like markers of guessed nonces stays output and ends nothing', async ({
    newSession,
  }) => {
    const s = await newSession()
    const fake = (n: string) => `printf '\\037C%s:000\\036' ${n}; printf '\\037C%s\\036' ${n} >&2`
    const guesses = ['0'.repeat(NONCE_LENGTH), 'f'.repeat(NONCE_LENGTH), 'deadbeef'.repeat(4)]
    const runs = queue(s, [...guesses.map(fake), 'echo after'], 'g')
    const outs = await Promise.all(runs)
    guesses.forEach((n, i) => {
      expect(outs[i]!.stdout.toString()).toBe(`\x1fC${n}:000\x1e`)
      expect(outs[i]!.stderr.toString()).toBe(`\x1fC${n}\x1e`)
    })
    expect(outs[3]!.stdout.toString()).toBe('after\n')
  })

  test('a burst written many lines per write stays exact against forged markers, closed marker fds and stdin readers', async ({
    newSession,
  }) => {
    const s = await newSession()
    // Lines go into bash once per task and then in batches of REFILL_AT as the window drains:
    // each run of the burst is hostile in one way, and each must still end on its own marker,
    // in order, with exactly its own output and `$?`.
    const hostile = [
      (i: number) => `printf '\\037C%s:000\\036' ${'ab'.repeat(NONCE_LENGTH / 2)}; echo ${i}`,
      (i: number) => `(exec 62>&- 63>&-; echo ${i}); (exit ${i % 7})`,
      (i: number) => `echo ${i} $?`,
      (i: number) => `(exec 62>/dev/null 63>/dev/null; echo ${i} >&62); echo ${i} >&2`,
      (i: number) => `cat; read -r x; echo ${i} "$x"`,
    ]
    const count = 2 * WINDOW_LINES + REFILL_AT + 3
    const commands = Array.from({ length: count }, (_, i) => hostile[i % hostile.length]!(i))
    const outs = await Promise.all(queue(s, commands, 'h', 10_000))
    const exits: number[] = []
    outs.forEach((o, i) => {
      const kind = i % hostile.length
      const before = exits.at(-1) ?? 0
      const expected = [
        [`\x1fC${'ab'.repeat(NONCE_LENGTH / 2)}:000\x1e${i}\n`, '', 0],
        [`${i}\n`, '', i % 7],
        [`${i} ${before}\n`, '', 0],
        ['', `${i}\n`, 0],
        [`${i} \n`, '', 0],
      ][kind]!
      expect([o.stdout.toString(), o.stderr.toString(), o.exitCode, o.timedOut]).toEqual([...expected, false])
      exits.push(o.exitCode)
    })
    expect(s.history().map((h) => h.command)).toEqual(commands)
  })
})
