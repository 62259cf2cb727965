// Attacks on the runner↔agent link, written as the attacker would try them: from inside a
// sandbox (look for the agent's socket to redirect), and from the host side with socket access
// but no secret (connect to an agent, swap one sandbox's socket for another's). Every attack
// must fail, and the victim sandbox must keep answering its own runner.
import { lstatSync, renameSync, rmSync, symlinkSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { join } from 'node:path'
import { encodeFrame, FrameDecoder } from '@conch/link'
import { AGENT_FRAME_TYPES, AgentFrame, parseFrame } from '@conch/protocol'
import { linkNonce, linkProof, mintLinkSecret } from '@conch/protocol/link-proof'
import { describe, expect, it, vi } from 'vitest'
import { exec, nsRunner } from '../namespace-runner.ts'
import { createSandbox, type TestRunner } from '../runner-fixture.ts'

/** The host folder holding a sandbox's agent socket. */
function socketDir(runner: TestRunner, id: string): string {
  const state = runner.app.conch.manager.get(id).record.driverState
  if (typeof state.socketDir !== 'string') throw new Error('no socketDir in the driver state')
  return state.socketDir
}

/** A raw link client: collects decoded agent frames and notices when the agent hangs up. */
async function rawLink(
  path: string,
): Promise<{ socket: Socket; frames: AgentFrame[]; closed: Promise<void> }> {
  const socket = connect(path)
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  const frames: AgentFrame[] = []
  const decoder = new FrameDecoder()
  socket.on('data', (chunk) => {
    for (const r of decoder.push(chunk)) {
      if (!r.ok) continue
      const parsed = parseFrame(AgentFrame, r.frame.header, 'type', AGENT_FRAME_TYPES)
      if (parsed.ok) frames.push(parsed.value)
    }
  })
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
  socket.on('error', () => {})
  return { socket, frames, closed }
}

describe('attack: redirect or hijack the agent link', () => {
  it('finds no agent socket inside the sandbox and cannot write where the runner looks', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner)
    const r = await exec(
      runner,
      id,
      'find / -xdev -type s 2>/dev/null | wc -l; ls /run/conch; touch /run/conch/agent.sock 2>&1; ln -s /tmp /run/conch/x 2>&1; grep -c agent.sock /proc/self/mountinfo',
    )
    expect(r.stdout).toMatch(/^0\ncgroup\.procs\noom_events\n/)
    expect(r.stdout).toMatch(
      /touch: cannot touch '\/run\/conch\/agent\.sock': (Read-only file system|Permission denied)/,
    )
    expect(r.stdout).toMatch(
      /ln: failed to create symbolic link '\/run\/conch\/x': (Read-only file system|Permission denied)/,
    )
    expect(r.stdout.trim().endsWith('\n0')).toBe(true)
  })

  it('drops a connection that cannot prove the link secret, and the runner keeps its link', async () => {
    await using runner = await nsRunner()
    const id = await createSandbox(runner)
    const path = join(socketDir(runner, id), 'agent.sock')

    // A call before the handshake: dropped without an answer.
    const early = await rawLink(path)
    early.socket.write(encodeFrame({ type: 'call', id: 1, method: 'session.list', params: {} }))
    await early.closed
    expect(early.frames).toEqual([])

    // A full handshake with the wrong secret: the agent answers hello, then drops the proof.
    const forger = await rawLink(path)
    forger.socket.write(encodeFrame({ type: 'hello', protocolVersion: 1, nonce: linkNonce() }))
    await expect.poll(() => forger.frames.length).toBe(1)
    const hello = forger.frames[0]
    if (hello?.type !== 'hello') throw new Error('expected the agent hello')
    forger.socket.write(
      encodeFrame({ type: 'auth', proof: linkProof(mintLinkSecret(), 'runner', hello.nonce) }),
    )
    forger.socket.write(encodeFrame({ type: 'call', id: 2, method: 'session.list', params: {} }))
    await forger.closed
    expect(forger.frames.map((f) => f.type)).toEqual(['hello'])

    // The runner's own link was never displaced.
    expect(runner.app.conch.manager.get(id).currentLink?.open).toBe(true)
    expect((await exec(runner, id, 'echo still-mine')).stdout).toBe('still-mine\n')
  })

  it('never links one sandbox id to another sandbox agent, by symlink or by moving the socket', async () => {
    await using runner = await nsRunner()
    const victim = await createSandbox(runner)
    const attacker = await createSandbox(runner)
    await exec(runner, victim, 'echo victim-data > secret.txt')
    const attackerSocket = join(socketDir(runner, attacker), 'agent.sock')
    const victimSocket = join(socketDir(runner, victim), 'agent.sock')

    // The attacker's socket path now points at the victim's agent, and its link drops.
    rmSync(attackerSocket)
    symlinkSync(victimSocket, attackerSocket)
    runner.app.conch.manager.get(attacker).detach()
    const viaSymlink = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${attacker}/exec`,
      headers: runner.auth,
      payload: { command: 'cat secret.txt' },
    })
    expect(viaSymlink.statusCode).toBeGreaterThanOrEqual(500)
    expect(viaSymlink.body).not.toContain('victim-data')
    expect(viaSymlink.json().error.message).toMatch(/not the agent socket the runner made/)

    // The victim's real socket moved into the attacker's place: the agent cannot prove the
    // attacker sandbox's secret, so the runner refuses it.
    rmSync(attackerSocket)
    renameSync(victimSocket, attackerSocket)
    expect(lstatSync(attackerSocket).isSocket()).toBe(true)
    // The runner retries an unreachable sandbox; every retry meets the victim's agent and fails.
    await vi.waitFor(
      async () => {
        const viaMove = await runner.app.inject({
          method: 'POST',
          url: `/v1/sandboxes/${attacker}/exec`,
          headers: runner.auth,
          payload: { command: 'cat secret.txt' },
        })
        expect(viaMove.body).not.toContain('victim-data')
        expect(viaMove.statusCode).toBeGreaterThanOrEqual(500)
        expect(viaMove.json().error.message).toMatch(/could not prove it is this sandbox's agent/)
      },
      { timeout: 30_000, interval: 200 },
    )

    // The victim's own link is untouched and its data is its own.
    expect((await exec(runner, victim, 'cat secret.txt')).stdout).toBe('victim-data\n')
  })
})
