// REST exec with the real agent: buffered, streamed as NDJSON, in a session, truncation,
// timeouts and the per-sandbox run queue limit.
import { ErrorBody, ExecEvent, LIMITS, RunResult } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { baseUrl, createSandbox, startRunner } from './runner-fixture.ts'

describe('exec (real agent)', () => {
  it('runs a buffered command with exact output and exit code', async () => {
    await using runner = await startRunner()
    const id = await createSandbox(runner)
    const res = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/exec`,
      headers: runner.auth,
      payload: { command: 'printf "no newline"; printf "\\x00\\xff" >&2; exit 7', encoding: 'base64' },
    })
    const result = RunResult.parse(res.json())
    expect(Buffer.from(result.stdout, 'base64').toString()).toBe('no newline')
    expect(Buffer.from(result.stderr, 'base64')).toEqual(Buffer.from([0, 0xff]))
    expect(result).toMatchObject({ exitCode: 7, timedOut: false, encoding: 'base64' })
  })

  it('streams NDJSON events that end with one exit event', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const res = await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { ...runner.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ command: 'echo a; echo b >&2; echo c; exit 3', stream: true }),
    })
    expect(res.headers.get('content-type')).toContain('application/x-ndjson')
    const events = (await res.text())
      .trim()
      .split('\n')
      .map((line) => ExecEvent.parse(JSON.parse(line)))
    const text = (type: string) =>
      events
        .filter((e) => e.type === type)
        .map((e) => ('data' in e ? e.data : ''))
        .join('')
    expect(text('stdout')).toBe('a\nc\n')
    expect(text('stderr')).toBe('b\n')
    expect(events.at(-1)).toMatchObject({ type: 'exit', exitCode: 3 })
    expect(events.filter((e) => e.type === 'exit')).toHaveLength(1)
  })

  it('streams large output as events of at most one data chunk, exact and at their offsets', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    // 1 MiB of a 3-byte character with one leading byte: every 64 KiB cut splits a character.
    const res = await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { ...runner.auth, 'content-type': 'application/json' },
      // In a session: its output leaves the agent in frames of up to 256 KiB (session-attach.ts).
      body: JSON.stringify({
        command: "printf x; yes '€' | tr -d '\\n' | head -c 1048575",
        sessionId: 'default',
        stream: true,
      }),
    })
    const events = (await res.text())
      .trim()
      .split('\n')
      .map((line) => ExecEvent.parse(JSON.parse(line)))
    const out = events.filter((e) => e.type === 'stdout')
    // A chunk, plus at most the 3 bytes of a character begun in the chunk before.
    expect(Math.max(...out.map((e) => Buffer.byteLength(e.data)))).toBeLessThanOrEqual(
      LIMITS.maxDataChunkBytes + 3,
    )
    expect(out.map((e) => e.data).join('')).toBe(`x${'€'.repeat(349525)}`)
    expect(out.length).toBeGreaterThanOrEqual(16)
    // Each event is at the offset where its bytes began (a character cut at a chunk's end goes
    // with the next event), so offsets rise by at most one chunk and never go back.
    for (let i = 1; i < out.length; i++) {
      const step = out[i]!.offset - out[i - 1]!.offset
      expect(step).toBeGreaterThan(0)
      expect(step).toBeLessThanOrEqual(LIMITS.maxDataChunkBytes)
    }
    expect(events.at(-1)).toMatchObject({ type: 'exit', exitCode: 0 })
  })

  it('routes exec with sessionId to that shell, buffered and streamed', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const inject = (payload: object) =>
      runner.app.inject({ method: 'POST', url: `/v1/sandboxes/${id}/exec`, headers: runner.auth, payload })
    await inject({ command: 'cd /tmp; export KEEP=yes', sessionId: 'default' })
    expect(
      RunResult.parse((await inject({ command: 'pwd; echo $KEEP', sessionId: 'default' })).json()).stdout,
    ).toBe('/tmp\nyes\n')
    const streamed = await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { ...runner.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ command: 'echo $KEEP', sessionId: 'default', stream: true }),
    })
    const lines = (await streamed.text())
      .trim()
      .split('\n')
      .map((l) => ExecEvent.parse(JSON.parse(l)))
    expect(lines[0]).toMatchObject({ type: 'stdout', data: 'yes\n' })
    expect(lines.at(-1)).toMatchObject({ type: 'exit', exitCode: 0 })
  })

  it('cuts buffered output at the cap and reports the total', async () => {
    await using runner = await startRunner({ limits: { outputCapBytes: 1000 } })
    const id = await createSandbox(runner)
    const res = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/exec`,
      headers: runner.auth,
      payload: { command: 'head -c 5000 /dev/zero | tr "\\0" a' },
    })
    const result = RunResult.parse(res.json())
    expect(result).toMatchObject({ truncated: true, stdoutBytes: 5000 })
    expect(result.stdout.length).toBeLessThanOrEqual(1000)
  })

  it('clamps a tiny timeout to the 1 s minimum and reports timedOut', async () => {
    await using runner = await startRunner()
    const id = await createSandbox(runner)
    const res = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/exec`,
      headers: runner.auth,
      payload: { command: 'echo started; sleep 30', timeoutMs: 1 },
    })
    expect(RunResult.parse(res.json())).toMatchObject({ timedOut: true, stdout: 'started\n' })
  })

  it('answers RATE_LIMITED once the run queue of a sandbox is full', async () => {
    await using runner = await startRunner({ listen: true, limits: { maxQueuedRunsPerSandbox: 1 } })
    const id = await createSandbox(runner)
    const first = await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { ...runner.auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        command: 'echo go; read -t 30 x < /dev/zero; sleep 30',
        stream: true,
        timeoutMs: 30_000,
      }),
    })
    const reader = first.body!.getReader()
    await reader.read()
    const second = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/exec`,
      headers: runner.auth,
      payload: { command: 'true' },
    })
    expect(second.statusCode).toBe(429)
    expect(ErrorBody.parse(second.json()).error.code).toBe('RATE_LIMITED')
    await reader.cancel()
  })
})
