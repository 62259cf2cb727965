// `link.suspend`, the agent's half of a live (gVisor checkpoint) snapshot: the agent lets go of
// every link socket, marks its link dir, and listens again only once a new secret file arrives.
// Attacks: an old secret does not connect after the resume, a malformed secret file is thrown
// away, and an agent without a secret file refuses to suspend and keeps serving.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { AgentServer } from '../src/agent-server.ts'
import { buildAgent } from '../src/build-agent.ts'
import { systemClock } from '../src/clock.ts'
import { silentLogger } from '../src/logger.ts'
import { nodeSpawn } from '../src/spawner.ts'
import { chooseTempRoot } from '../src/temp-root.ts'
import { AgentClient } from './agent-client.ts'

const dirs: string[] = []
const servers: AgentServer[] = []
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close()
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

async function startAgent(withSecretFile: boolean): Promise<{ dir: string; socket: string; secret: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'conch-agent-suspend-'))
  dirs.push(dir)
  const root = join(dir, 'root')
  mkdirSync(root)
  const secret = mintLinkSecret()
  const { server } = buildAgent({
    root,
    baseEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    spawn: nodeSpawn,
    clock: systemClock,
    logger: silentLogger,
    tempRoot: chooseTempRoot(),
    linkSecret: secret,
    ...(withSecretFile ? { resumeSecretFile: join(dir, 'secret') } : {}),
  })
  servers.push(server)
  const socket = join(dir, 'agent.sock')
  await server.listen({ path: socket })
  return { dir, socket, secret }
}

/** Whether anything accepts a connection on `path` now. */
function accepts(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(path)
    s.once('connect', () => {
      s.destroy()
      resolve(true)
    })
    s.once('error', () => resolve(false))
  })
}

describe('link.suspend', () => {
  it('closes the link, marks the dir, and listens again only with the new secret, keeping its state', async () => {
    const { dir, socket, secret } = await startAgent(true)
    const client = await AgentClient.connect(socket, secret)
    const before = await client.call<{ pid: number; startedAt: number }>('agent.info', {})
    const closed = new Promise((resolve) => client.socket.once('close', resolve))
    await client.call('link.suspend', {})
    await closed
    await vi.waitFor(() => expect(existsSync(join(dir, 'suspended'))).toBe(true))
    expect(await accepts(socket)).toBe(false)

    // A malformed secret is thrown away; the agent stays suspended.
    writeFileSync(join(dir, 'secret'), 'not a secret')
    await vi.waitFor(() => expect(existsSync(join(dir, 'secret'))).toBe(false))
    expect(existsSync(join(dir, 'suspended'))).toBe(true)
    expect(await accepts(socket)).toBe(false)

    const next = mintLinkSecret()
    writeFileSync(join(dir, 'secret'), next, { mode: 0o400 })
    await vi.waitFor(() => expect(existsSync(join(dir, 'suspended'))).toBe(false))
    expect(existsSync(join(dir, 'secret'))).toBe(false)
    await vi.waitFor(async () => expect(await accepts(socket)).toBe(true))
    // The secret of before the suspend (which a checkpoint image holds) no longer connects.
    await expect(AgentClient.connect(socket, secret)).rejects.toThrow(/did not prove/)
    const resumed = await AgentClient.connect(socket, next)
    const after = await resumed.call<{ pid: number; startedAt: number }>('agent.info', {})
    expect(after).toMatchObject({ pid: before.pid, startedAt: before.startedAt })
    resumed.close()
  })

  it('refuses to suspend without a secret file to resume from, and keeps serving', async () => {
    const { socket, secret } = await startAgent(false)
    const client = await AgentClient.connect(socket, secret)
    await expect(client.call('link.suspend', {})).rejects.toMatchObject({ code: 'BAD_REQUEST' })
    expect(await client.call('agent.info', {})).toHaveProperty('pid')
    client.close()
  })
})
