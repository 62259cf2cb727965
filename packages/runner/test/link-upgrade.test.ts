// A runner upgraded across a link change restarts onto agents an older conch started: agents
// outlive their runner by design. Such an agent proves the sandbox's secret but speaks a link
// this runner cannot use, so the sandbox is reported dead with a reason that says what to do,
// once, and never retried. A peer that cannot prove the secret gains nothing by claiming an
// old link. Real runner apps, a real state dir, real Unix sockets; the agents are peers.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LINK_VERSION, SandboxInfo } from '@conch/protocol'
import { linkProof, mintLinkSecret } from '@conch/protocol/link-proof'
import { describe, expect, it, vi } from 'vitest'
import { LegacyAgent, link1Hello } from './legacy-agent.ts'
import { PeerDriver } from './peer-agent.ts'
import { createSandbox, startRunner, type TestRunner } from './runner-fixture.ts'

/** A log line as pino writes it. */
interface LogLine {
  level: number
  msg: string
  sandboxId?: string
  reason?: string
}

/**
 * Creates a sandbox on a first runner, stops that runner, replaces the sandbox's agent with one
 * that answers hellos with `hello(secret, nonce)`, and starts a second runner on the same state.
 */
async function restartOnto(hello: (secret: string, nonce: string) => Record<string, unknown>) {
  await using owned = new AsyncDisposableStack()
  const stateDir = mkdtempSync(join(tmpdir(), 'conch-link-upgrade-'))
  owned.defer(() => rmSync(stateDir, { recursive: true, force: true }))
  const driver = owned.use(new PeerDriver())
  let id: string
  let secret: string
  {
    await using first = await startRunner({ driver, stateDir, keepAgents: true })
    id = await createSandbox(first)
    secret = String(first.app.conch.manager.get(id).record.driverState.linkSecret)
  }
  // The agent keeps running in the driver's eyes; only the link it speaks changes.
  const peer = driver.peers.get(id)
  if (!peer) throw new Error('no peer for the sandbox')
  await peer.close()
  rmSync(peer.path, { force: true })
  const agent = new LegacyAgent(peer.path, (nonce) => hello(secret, nonce))
  owned.defer(() => agent.close())
  await agent.listen()
  const logs: LogLine[] = []
  const runner: TestRunner = owned.use(
    await startRunner({
      driver,
      stateDir,
      logger: { level: 'info', stream: { write: (line: string) => void logs.push(JSON.parse(line)) } },
    }),
  )
  const resources = owned.move()
  const info = async () =>
    SandboxInfo.parse((await runner.app.inject({ url: `/v1/sandboxes/${id}`, headers: runner.auth })).json())
  return {
    id,
    runner,
    agent,
    logs,
    info,
    // The caller's `await using` owns the runner, the agent, the driver and the dir.
    [Symbol.asyncDispose]: () => resources.disposeAsync(),
  }
}

describe('a runner restarted onto agents of another link version', () => {
  it('reports an agent of link 1 dead with what to do, logs it once, and never retries it', async () => {
    await using t = await restartOnto(link1Hello)
    await vi.waitFor(async () => expect((await t.info()).status).toBe('dead'), {
      timeout: 15_000,
      interval: 50,
    })
    const { deadReason } = await t.info()
    expect(deadReason).toBe(
      `its agent was started by an older conch and speaks link protocol 1, which this runner (link protocol ${LINK_VERSION}) cannot use; destroy the sandbox and create a new one (its workspace goes with it)`,
    )
    // The runner's hello was one link 1 could read: the old agent answered it.
    expect(t.agent.received).toHaveLength(1)
    expect(t.agent.received[0]).toMatchObject({ t: 'hello', type: 'hello', linkVersion: LINK_VERSION })
    expect(t.agent.connections).toBe(1)

    // Requests fail at once with the reason, without another connection.
    const exec = await t.runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${t.id}/exec`,
      headers: t.runner.auth,
      payload: { command: 'true' },
    })
    expect(exec.statusCode).toBe(409)
    expect(exec.json().error).toMatchObject({ code: 'SANDBOX_NOT_RUNNING' })
    expect(exec.json().error.message).toContain('speaks link protocol 1')
    expect(t.agent.connections).toBe(1)

    const about = t.logs.filter((l) => l.sandboxId === t.id && l.reason === deadReason)
    expect(about.map((l) => l.msg)).toEqual(['sandbox agent speaks another link protocol; marked dead'])
    expect(t.logs.some((l) => /bad frame/.test(l.msg))).toBe(false)

    // Destroying it works and frees the slot.
    const destroyed = await t.runner.app.inject({
      method: 'DELETE',
      url: `/v1/sandboxes/${t.id}`,
      headers: t.runner.auth,
    })
    expect(destroyed.statusCode).toBeLessThan(300)
    expect(t.runner.app.conch.manager.list().map((s) => s.id)).not.toContain(t.id)
  })

  it('reports an agent of a newer link dead too, naming it as newer', async () => {
    await using t = await restartOnto((secret, nonce) => ({
      type: 'hello',
      linkVersion: LINK_VERSION + 1,
      agentVersion: '9.0.0',
      pid: 1,
      startedAt: 1,
      nonce: 'b'.repeat(64),
      proof: linkProof(secret, 'agent', nonce),
    }))
    await vi.waitFor(async () => expect((await t.info()).status).toBe('dead'), {
      timeout: 15_000,
      interval: 50,
    })
    expect((await t.info()).deadReason).toMatch(
      new RegExp(`^its agent was started by a newer conch and speaks link protocol ${LINK_VERSION + 1},`),
    )
    expect(t.agent.connections).toBe(1)
  })

  it('attack: a peer claiming link 1 without the sandbox secret cannot get the sandbox marked dead', async () => {
    const forged = mintLinkSecret()
    await using t = await restartOnto((_secret, nonce) => link1Hello(forged, nonce))
    await vi.waitFor(async () => expect((await t.info()).status).toBe('unreachable'), {
      timeout: 15_000,
      interval: 50,
    })
    const info = await t.info()
    expect(info.deadReason).toMatch(/could not prove it is this sandbox's agent/)
    expect(t.logs.some((l) => /marked dead/.test(l.msg))).toBe(false)
  })
})
