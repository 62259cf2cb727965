import { describe, expect, test } from 'vitest'
import { containerExec, docker, tier } from './tier-fixture.ts'

describe('image healthcheck', () => {
  test('reports the running container healthy through the image HEALTHCHECK', async () => {
    const status = await docker().run(['inspect', '--format', '{{.State.Health.Status}}', tier().name])
    expect(status.trim()).toBe('healthy')
    const log = await docker().run([
      'inspect',
      '--format',
      '{{range .State.Health.Log}}{{.ExitCode}} {{end}}',
      tier().name,
    ])
    expect(log.trim().split(' ')).toContain('0')
  })

  test('fails the check when nothing answers on the runner port', async () => {
    // The same command the HEALTHCHECK runs, pointed at a port no runner listens on.
    const result = await docker().result([
      'exec',
      '--env',
      'CONCH_PORT=1',
      tier().name,
      '/usr/local/bin/node',
      '/usr/local/lib/conch/deploy/healthcheck.mjs',
    ])
    expect(result.code).toBe(1)
  })

  test('stops with SIGTERM and runs tini as PID 1', async () => {
    const signal = await docker().run(['inspect', '--format', '{{.Config.StopSignal}}', tier().name])
    expect(signal.trim()).toBe('SIGTERM')
    expect((await containerExec(tier().name, 'cat /proc/1/comm')).trim()).toBe('tini')
  })
})
