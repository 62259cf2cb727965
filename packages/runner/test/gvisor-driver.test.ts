// The gVisor driver with the real runner, real runsc and the real agent. These tests fail (never
// skip) when the host cannot run gVisor sandboxes: runsc comes from apt; the runner must be root.
import { SandboxInfo } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { gvisorRunner } from './gvisor-runner.ts'
import { exec } from './namespace-runner.ts'
import { createSandbox } from './runner-fixture.ts'

describe('gvisor driver', () => {
  it('runs a shell at /workspace whose cd and export persist, and says what isolates it', async () => {
    await using runner = await gvisorRunner()
    const id = await createSandbox(runner)
    const info = SandboxInfo.parse(
      (await runner.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}`, headers: runner.auth })).json(),
    )
    expect(info).toMatchObject({ driver: 'gvisor', workdir: '/workspace' })
    expect((await exec(runner, id, 'pwd')).stdout).toBe('/workspace\n')
    await exec(runner, id, 'mkdir -p sub && cd sub && export KEPT=yes', 'default')
    expect(await exec(runner, id, 'pwd; echo $KEPT; echo $HOME; id -u', 'default')).toMatchObject({
      stdout: '/workspace/sub\nyes\n/workspace\n1000\n',
      exitCode: 0,
    })
    const kernel = await exec(runner, id, 'dmesg 2>&1 | head -1; ls -ld /workspace/sub; stat -c %U /workspace/sub')
    expect(kernel.stdout).toMatch(/gVisor/)
    expect(kernel.stdout).toMatch(/sandbox\n$/)
  })
})
