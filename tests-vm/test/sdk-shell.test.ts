import { Sandbox } from '@conch/sdk'
import { describe, expect } from 'vitest'
import { test, vmConnection } from './vm-fixture.ts'

describe('a shell through the forwarded port', () => {
  test('runs commands and keeps cwd and variables between them', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    expect((await sh.run('cd /tmp && export GREETING=hello')).exitCode).toBe(0)
    const result = await sh.run('pwd; echo "$GREETING from $(uname -s)"')
    expect(result).toMatchObject({ stdout: '/tmp\nhello from Linux\n', stderr: '', exitCode: 0 })
  })

  test('reports exit codes and stderr', async ({ sandbox }) => {
    await using sh = await sandbox.shell()
    const result = await sh.run('echo oops >&2; (exit 3)')
    expect(result).toMatchObject({ stdout: '', stderr: 'oops\n', exitCode: 3 })
  })

  test('lists the sandbox and reaches it again by id', async ({ sandbox }) => {
    const listed = await Sandbox.list(vmConnection())
    expect(listed.map((s) => s.id)).toContain(sandbox.id)
    const again = await Sandbox.connect(sandbox.id, vmConnection())
    await using sh = await again.shell()
    expect((await sh.run('echo again')).stdout).toBe('again\n')
  })
})
