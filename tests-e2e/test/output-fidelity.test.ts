import { ShellClosedError } from '@conch/sdk'
import { describe, expect } from 'vitest'
import { test } from './runner-fixture.ts'

describe('output fidelity', () => {
  test('keeps a missing trailing newline, carriage returns and marker-like lines', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    expect((await sh.run("printf 'no newline'")).stdout).toBe('no newline')
    expect((await sh.run("printf 'a\\r\\nb\\rc'")).stdout).toBe('a\r\nb\rc')
    // Bytes shaped like the agent's end markers, with a nonce that is not the run's.
    const nonce = '0123456789abcdef0123456789abcdef'
    const fake = await sh.run(
      `printf '\\037C%s:%03d\\036' ${nonce} 0; printf '\\037C%s\\036' ${nonce} >&2; echo next`,
    )
    expect(fake.stdout).toBe(`\x1fC${nonce}:000\x1enext\n`)
    expect(fake.stderr).toBe(`\x1fC${nonce}\x1e`)
    expect((await sh.run('echo héllo wörld ✓')).stdout).toBe('héllo wörld ✓\n')
  })

  test('a command opens /dev/stdout, /dev/stderr and (in an exec with stdin) /dev/stdin as in a terminal', async ({
    sandbox,
  }) => {
    // bash's output is a pipe, not a socket: opening a socket by path fails with ENXIO.
    const byPath = 'echo out > /dev/stdout; echo err > /dev/stderr; printf tee | tee /dev/stderr'
    await using sh = await sandbox.shell()
    expect(await sh.run(byPath)).toMatchObject({ stdout: 'out\ntee', stderr: 'err\ntee', exitCode: 0 })
    expect(await sandbox.exec(byPath)).toMatchObject({ stdout: 'out\ntee', stderr: 'err\ntee', exitCode: 0 })
    expect(await sandbox.exec('cat /dev/stdin; wc -c < /dev/stdin', { stdin: 'in\n' })).toMatchObject({
      stdout: 'in\n3\n',
      exitCode: 0,
    })
    const proc = await sandbox.startProcess(byPath)
    expect(await proc.wait()).toMatchObject({ status: 'exited', exitCode: 0 })
    expect(await proc.output()).toMatchObject({ stdout: 'out\ntee', stderr: 'err\ntee' })
  })

  test('returns bytes losslessly with binary encoding', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    const result = await sh.run("printf '\\x00\\x01\\xff\\xfe\\x80done'", { encoding: 'binary' })
    expect(Array.from(result.stdout)).toEqual([0, 1, 0xff, 0xfe, 0x80, ...new TextEncoder().encode('done')])
  })

  test('reports exact exit codes, including 128+n for a signal', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    expect((await sh.run('false')).exitCode).toBe(1)
    expect((await sh.run('(exit 255)')).exitCode).toBe(255)
    expect((await sh.run('bash -c "kill -TERM \\$\\$"')).exitCode).toBe(143)
  })

  test('returns a syntax error with code 2 and stays usable', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    const bad = await sh.run('echo "unbalanced')
    expect(bad.exitCode).toBe(2)
    expect(bad.stderr).toMatch(/unexpected EOF|syntax error/)
    expect((await sh.run('echo fine')).stdout).toBe('fine\n')
  })

  test('runs multi-line scripts with heredocs, case and functions', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    const script = [
      'f() {',
      '  case "$1" in',
      '    a) echo alpha ;;',
      '    *) echo other ;;',
      '  esac',
      '}',
      'f a; f z',
      'cat <<EOF',
      'heredoc $((1 + 2))',
      'EOF',
      'cat <<-EOF',
      '\tindented',
      '\tEOF',
      'echo done # trailing comment',
    ].join('\n')
    const result = await sh.run(script)
    expect(result).toMatchObject({ stdout: 'alpha\nother\nheredoc 3\nindented\ndone\n', exitCode: 0 })
  })

  test('survives set -u, pipefail, a redefined echo and PROMPT_COMMAND', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    await sh.run('set -uo pipefail; echo() { builtin echo "wrapped: $*"; }; PROMPT_COMMAND="false"; PS1="$ "')
    expect((await sh.run('false | true')).exitCode).toBe(1)
    const unset = await sh.run('builtin echo "$E2E_NOT_SET_ANYWHERE"')
    expect(unset.exitCode).not.toBe(0)
    expect(unset.stderr).toMatch(/unbound variable/)
    expect((await sh.run('echo hi')).stdout).toBe('wrapped: hi\n')
  })

  test('reports the code of a failure under set -e, as a result or as the closed shell', async ({
    sandbox,
  }) => {
    // An interactive bash exits on a failing command under set -e, as a terminal tab would.
    await using sh = await sandbox.shell()
    await sh.run('set -e')
    const outcome = await sh.run('false').then(
      (result) => ({ code: result.exitCode, closed: false }),
      (err: unknown) => {
        if (!(err instanceof ShellClosedError)) throw err
        return { code: err.exitCode, closed: true }
      },
    )
    expect(outcome.code).toBe(1)
    if (outcome.closed) await expect(sh.run('true')).rejects.toBeInstanceOf(ShellClosedError)
  })

  test('reads stdin data when given and /dev/null otherwise', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    expect((await sh.run('cat', { stdin: 'line one\nline two\n' })).stdout).toBe('line one\nline two\n')
    const noStdin = await sh.run('cat; echo "read $?"', { timeoutMs: 10_000 })
    expect(noStdin).toMatchObject({ stdout: 'read 0\n', timedOut: false })
  })
})
