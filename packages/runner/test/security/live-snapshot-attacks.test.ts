// Attacks on a live snapshot's quiesce under gVisor (`link.suspend`, agent `link-suspend.ts`):
// while the agent has let its link go and waits for a new secret, sandbox code tries, without
// pause, to take the agent's place: bind a socket where the runner connects, connect to the
// agent's socket, plant or read the next secret, and list the link dir. None of it may succeed,
// and after the snapshot the runner must still be talking to its own agent (the same shell).
// A control bind in /tmp shows the probe can win where the sandbox may write.
import { SessionInfo } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { z } from 'zod'
import { gvisorRunner } from '../gvisor-runner.ts'
import { exec } from '../namespace-runner.ts'
import { createSandbox, type TestRunner } from '../runner-fixture.ts'

/** A gVisor checkpoint and restore is seconds on a loaded 2-core host. */
const LIVE_TIMEOUT_MS = 240_000

/** Runs as the sandbox user, in a loop until /tmp/stop exists; counts attempts and successes. */
const ATTACK = `
import json, os, socket, time
link = '/run/conch'
tries = {'bind': 0, 'connect': 0, 'plant': 0, 'read': 0, 'list': 0, 'rounds': 0}
wins = []
def attempt(name, fn):
    try:
        fn()
        wins.append(name)
    except OSError:
        pass
def bind():
    s = socket.socket(socket.AF_UNIX); s.bind(link + '/agent.sock'); s.listen(1)
def connect():
    s = socket.socket(socket.AF_UNIX); s.settimeout(0.2); s.connect(link + '/agent.sock'); s.close()
def plant():
    with open(link + '/secret', 'w') as f: f.write('0' * 64)
def control():
    # The same bind where the sandbox may write: proves the probe can win.
    path = '/tmp/control-%d.sock' % tries['rounds']
    s = socket.socket(socket.AF_UNIX); s.bind(path); s.close(); os.unlink(path)
def read():
    with open(link + '/secret') as f: f.read()
while not os.path.exists('/tmp/stop'):
    for name, fn in (('bind', bind), ('connect', connect), ('plant', plant), ('read', read), ('list', lambda: os.listdir(link)), ('control', control)):
        attempt(name, fn)
    tries['rounds'] += 1
    with open('/tmp/attack.json.tmp', 'w') as f: json.dump({'rounds': tries['rounds'], 'wins': sorted(set(wins))}, f)
    os.replace('/tmp/attack.json.tmp', '/tmp/attack.json')
    time.sleep(0.005)
`

async function attackState(runner: TestRunner, id: string): Promise<{ rounds: number; wins: string[] }> {
  const out = (await exec(runner, id, 'cat /tmp/attack.json', 'probe')).stdout
  return z.object({ rounds: z.number(), wins: z.array(z.string()) }).parse(JSON.parse(out))
}

describe('attack: take the agent’s place while a live snapshot has its link suspended', () => {
  it(
    'binds, connects, plants and reads nothing in the link dir, and the runner keeps its own agent',
    async () => {
      await using runner = await gvisorRunner({ snapshots: true })
      const id = await createSandbox(runner)
      await exec(
        runner,
        id,
        `cat > /tmp/attack.py <<'PY'\n${ATTACK}\nPY\n(python3 /tmp/attack.py &) ; echo started`,
        'default',
      )
      // The attacker is the sandbox user, as any code a client runs.
      expect((await exec(runner, id, 'id -u', 'probe')).stdout).not.toBe('0\n')
      await vi.waitFor(async () => expect((await attackState(runner, id)).rounds).toBeGreaterThan(5), {
        timeout: 60_000,
        interval: 200,
      })
      const before = SessionInfo.parse(
        (
          await runner.app.inject({
            method: 'GET',
            url: `/v1/sandboxes/${id}/sessions/default`,
            headers: runner.auth,
          })
        ).json(),
      )
      const roundsBefore = (await attackState(runner, id)).rounds
      const snap = await runner.app.inject({
        method: 'POST',
        url: `/v1/sandboxes/${id}/snapshots`,
        headers: runner.auth,
        payload: {},
      })
      expect(snap.statusCode, snap.body).toBe(200)
      // The attacker ran on both sides of the suspend, and never won.
      await vi.waitFor(
        async () => expect((await attackState(runner, id)).rounds).toBeGreaterThan(roundsBefore + 5),
        {
          timeout: 60_000,
          interval: 200,
        },
      )
      expect((await attackState(runner, id)).wins).toEqual(['control'])
      // The runner's link is to the agent it had: the same shell answers.
      const after = SessionInfo.parse(
        (
          await runner.app.inject({
            method: 'GET',
            url: `/v1/sandboxes/${id}/sessions/default`,
            headers: runner.auth,
          })
        ).json(),
      )
      expect(after.pid).toBe(before.pid)
      expect((await exec(runner, id, 'echo still-mine', 'default')).stdout).toBe('still-mine\n')
      await exec(runner, id, 'touch /tmp/stop', 'probe')
    },
    LIVE_TIMEOUT_MS,
  )
})
