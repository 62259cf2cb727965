import { describe, expect } from 'vitest'
import { test } from './runner-fixture.ts'

describe('pipelining and ordering', () => {
  test('runs concurrent calls one at a time in call order with their own output', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    await sh.run('rm -f e2e-order.txt')
    const runs = Array.from({ length: 60 }, (_, i) => sh.run(`echo ${i} >> e2e-order.txt; echo "run ${i}"`))
    const results = await Promise.all(runs)
    results.forEach((result, i) => {
      expect(result.stdout).toBe(`run ${i}\n`)
    })
    const order = await sh.run('cat e2e-order.txt')
    expect(order.stdout).toBe(Array.from({ length: 60 }, (_, i) => `${i}\n`).join(''))
  })

  test('delivers background output between runs as unattributed, never in a later run', async ({
    sandbox,
  }) => {
    let sawLate: () => void = () => {}
    const late = new Promise<void>((resolve) => {
      sawLate = resolve
    })
    const unattributed: string[] = []
    const decoder = new TextDecoder()
    await using sh = await sandbox.shell({
      onOutput: (output) => {
        unattributed.push(decoder.decode(output.data))
        if (output.runId === null && unattributed.join('').includes('late\n')) sawLate()
      },
    })
    await sh.run('rm -f e2e-bg-go')
    const start = await sh.run('(while [ ! -e e2e-bg-go ]; do sleep 0.02; done; echo late) &')
    expect(start.stdout).toBe('')
    expect((await sh.run('echo now')).stdout).toBe('now\n')

    await sandbox.exec('touch e2e-bg-go')
    await late
    expect(unattributed.join('')).toBe('late\n')
    expect((await sh.run('echo after')).stdout).toBe('after\n')
  })

  test('interrupts the running command and keeps the shell', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    await sh.run('export E2E_KEEP=1')
    let started: () => void = () => {}
    const ready = new Promise<void>((resolve) => {
      started = resolve
    })
    const pending = sh.run('echo ready; sleep 30', {
      onStdout: (chunk: string) => {
        if (chunk.includes('ready')) started()
      },
    })
    await ready
    await sh.interrupt()
    const result = await pending
    expect(result.exitCode).toBe(130)
    expect(result.timedOut).toBe(false)
    expect(result.stdout).toBe('ready\n')
    expect((await sh.run('echo "$E2E_KEEP"')).stdout).toBe('1\n')
  })
})
