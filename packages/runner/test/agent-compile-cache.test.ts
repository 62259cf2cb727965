// The agent bundle loads from V8's compile cache under every driver that can carry one: the
// namespace driver's runtime image holds a cache built when the image is made, bound read-only;
// the local driver's agents share one in the state dir. Node's own debug log (asked for through
// the sandbox env, which is the agent's env) says whether the cache was accepted. From inside a
// namespace sandbox the cache cannot be written: a poisoned code cache would run in every agent.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { exec, nsRunner } from './namespace-runner.ts'
import { createSandbox, startRunner } from './runner-fixture.ts'

const DEBUG = { env: { NODE_DEBUG_NATIVE: 'COMPILE_CACHE' } }

function agentLog(stateDir: string, id: string): string {
  return readFileSync(join(stateDir, 'sandboxes', id, 'agent.log'), 'utf8')
}

describe('agent compile cache', () => {
  it('namespace: the agent loads its bundle from the image cache, which sandbox code cannot write', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner, DEBUG)
    expect(agentLog(runner.stateDir, id)).toMatch(
      /V8 code cache for ESM file:\/\/\/opt\/conch\/conch-agent\.mjs was accepted/,
    )
    // /opt/conch is out of the sandbox user's reach, and the cache is a read-only bind besides.
    const attack = await exec(
      runner,
      id,
      'touch /opt/conch/compile-cache/new && echo created; mkdir /opt/conch/compile-cache/v0 && echo made; for f in /opt/conch/compile-cache/*/*; do echo x >> "$f" && echo wrote; done; true',
    )
    expect(attack.stdout).toBe('')
    expect(attack.stderr).toMatch(/touch: cannot touch '\/opt\/conch\/compile-cache\/new'/)
    // The env variable that asked for the debug log reached the agent; the cache flag did not
    // add any variable of its own to the session.
    const env = await exec(runner, id, 'env | grep -c COMPILE_CACHE; env | grep -c NODE_OPTIONS; true')
    expect(env.stdout).toBe('1\n0\n')
  })

  it("local: every agent loads its bundle from the cache the driver filled in the runner's state dir", async () => {
    await using runner = await startRunner()
    for (const id of [await createSandbox(runner, DEBUG), await createSandbox(runner, DEBUG)]) {
      expect(agentLog(runner.stateDir, id)).toMatch(
        /V8 code cache for ESM file:\S+conch-agent\S*\.mjs was accepted/,
      )
    }
  })
})
