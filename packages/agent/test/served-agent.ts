import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { mintLinkSecret } from '@conch/protocol/link-proof'
import { test as base } from 'vitest'
import { type AgentDeps, buildAgent } from '../src/build-agent.ts'
import { systemClock } from '../src/clock.ts'
import { silentLogger } from '../src/logger.ts'
import { nodeSpawn } from '../src/spawner.ts'
import { chooseTempRoot } from '../src/temp-root.ts'
import { AgentClient } from './agent-client.ts'

/** A real agent listening on a Unix socket in a temp dir, for tests that talk the link to it. */
export interface ServedAgent {
  /** The socket the agent listens on. */
  socketPath: string
  /** The sandbox's workspace root. */
  root: string
  /** Connects a client that has proved the link secret; closed after the test. */
  connect(): Promise<AgentClient>
}

/** What a test file sets on its agent beyond the defaults (real bash, a PATH, HOME at the root). */
export type ServedAgentOptions = Partial<Omit<AgentDeps, 'root' | 'linkSecret'>>

/**
 * A vitest `test` with an `agent` fixture: a fresh agent per test, built with the real spawner
 * and clock, that closes its clients and server and removes its dir afterwards.
 */
export function servedAgentTest(options: ServedAgentOptions = {}) {
  const secret = mintLinkSecret()
  return base.extend<{ agent: ServedAgent }>({
    // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take a destructuring pattern
    agent: async ({}, use) => {
      const dir = mkdtempSync(join(tmpdir(), 'conch-agent-served-'))
      const root = join(dir, 'root')
      mkdirSync(root)
      const { server } = buildAgent({
        root,
        baseEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: root },
        spawn: nodeSpawn,
        clock: systemClock,
        logger: silentLogger,
        tempRoot: chooseTempRoot(),
        ...options,
        linkSecret: secret,
      })
      const socketPath = join(dir, 'agent.sock')
      await server.listen({ path: socketPath })
      const clients: AgentClient[] = []
      await use({
        socketPath,
        root,
        connect: async () => {
          const c = await AgentClient.connect(socketPath, secret)
          clients.push(c)
          return c
        },
      })
      for (const c of clients) c.close()
      await server.close()
      rmSync(dir, { recursive: true, force: true })
    },
  })
}
