// Attack: an API-key holder asks for `driver: "local"` on a root runner, to run as root on the
// host with no isolation. The runner offers only the drivers the operator allowed, never local
// as root without --unsafe-local, and refuses to start rather than fall back to no isolation.
import { spawnSync } from 'node:child_process'
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ErrorBody, SandboxList } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { ConfigError } from '../../src/config-error.ts'
import { generateApiKey } from '../../src/credentials.ts'
import { chooseDrivers, type DriverChoiceInput } from '../../src/driver-choice.ts'
import { GvisorDriver } from '../../src/drivers/gvisor-driver.ts'
import { LocalDriver } from '../../src/drivers/local-driver.ts'
import { NamespaceDriver } from '../../src/drivers/namespace-driver.ts'
import { cli } from '../runner-process.ts'

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url))

function input(
  overrides: Partial<DriverChoiceInput> & { namespaceProblem?: string | null },
): DriverChoiceInput {
  const { namespaceProblem = null, ...rest } = overrides
  return {
    driver: 'auto',
    drivers: undefined,
    unsafeLocal: false,
    root: true,
    candidates: {
      gvisor: { driver: new GvisorDriver({ stateDir: '/nowhere' }), problem: null },
      namespace: { driver: new NamespaceDriver({ stateDir: '/nowhere' }), problem: namespaceProblem },
      local: { driver: new LocalDriver({ stateDir: '/nowhere' }), problem: null },
    },
    ...rest,
  }
}

const names = (choice: ReturnType<typeof chooseDrivers>) => choice.allowed.map((d) => d.name)

describe('chooseDrivers', () => {
  it('offers every isolating driver that works, and auto takes the strongest', () => {
    const choice = chooseDrivers(input({}))
    expect(names(choice)).toEqual(['namespace'])
    expect(choice.defaultDriver.name).toBe('namespace')
    expect(choice.warnings).toEqual([])
  })

  it('offers gVisor only when the operator names it, and then auto takes it as the strongest', () => {
    expect(names(chooseDrivers(input({})))).not.toContain('gvisor')
    const named = chooseDrivers(input({ drivers: ['gvisor', 'namespace'] }))
    expect(names(named)).toEqual(['gvisor', 'namespace'])
    expect(named.defaultDriver.name).toBe('gvisor')
    expect(chooseDrivers(input({ driver: 'gvisor' })).defaultDriver.name).toBe('gvisor')
  })

  it('refuses local as root unless --unsafe-local, and warns when it is allowed', () => {
    expect(() => chooseDrivers(input({ driver: 'local' }))).toThrow(/--unsafe-local/)
    expect(() => chooseDrivers(input({ drivers: ['namespace', 'local'] }))).toThrow(ConfigError)
    const unsafe = chooseDrivers(input({ driver: 'local', unsafeLocal: true }))
    expect(names(unsafe)).toEqual(['namespace', 'local'])
    expect(unsafe.defaultDriver.name).toBe('local')
    expect(unsafe.warnings.join('\n')).toMatch(/as root with no isolation/)
  })

  it('allows local without the flag when the runner is not root', () => {
    const choice = chooseDrivers(input({ root: false, namespaceProblem: 'needs root', driver: 'local' }))
    expect(names(choice)).toEqual(['local'])
  })

  it('refuses to start, naming what is missing and how to get it, when nothing isolates', () => {
    const problem = 'bwrap is not installed'
    expect(() => chooseDrivers(input({ namespaceProblem: problem }))).toThrow(
      /no isolating sandbox driver works on this host \(namespace: bwrap is not installed\); install bubblewrap \(apt-get install bubblewrap\) and run the runner as root or with cgroup delegation, or for development only pass --drivers local --unsafe-local/,
    )
    expect(() => chooseDrivers(input({ namespaceProblem: problem, root: false }))).toThrow(
      /pass --drivers local \(no isolation\)/,
    )
  })

  it('refuses an allowed driver that cannot run here and a default outside the allowed set', () => {
    expect(() => chooseDrivers(input({ namespaceProblem: 'no cgroups', driver: 'namespace' }))).toThrow(
      /--driver namespace: the namespace driver cannot run on this host: no cgroups/,
    )
    expect(() =>
      chooseDrivers(input({ drivers: ['namespace'], driver: 'local', unsafeLocal: true })),
    ).toThrow(/--driver local is not among the allowed drivers \(--drivers namespace\)/)
  })
})

describe('conch runner as root', () => {
  it('answers a create request for the local driver with a 400 listing the allowed drivers, and says what isolates its default', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-drivers-'))
    const apiKey = generateApiKey()
    try {
      await using run = cli(['runner', '--port', '0', '--state-dir', stateDir], { CONCH_API_KEY: apiKey })
      const [, url] = await run.waitFor(/listening on (http:\/\/[\d.:]+)/)
      const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }
      const res = await fetch(`${url}/v1/sandboxes`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ driver: 'local' }),
      })
      expect(res.status).toBe(400)
      const { error } = ErrorBody.parse(await res.json())
      expect(error).toMatchObject({ code: 'BAD_REQUEST', details: { allowed: ['namespace'] } })
      expect(error.message).toMatch(/driver "local" is not allowed on this runner; allowed: namespace/)
      const list = SandboxList.parse(await (await fetch(`${url}/v1/sandboxes`, { headers })).json())
      expect(list.sandboxes).toEqual([])
      await vi.waitFor(() => expect(run.err()).toMatch(/default driver namespace \(isolation: namespace\)/))
    } finally {
      rmSync(stateDir, { recursive: true, force: true })
    }
  })

  it('refuses to start with --driver local without --unsafe-local', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-drivers-'))
    try {
      await using run = cli(['runner', '--port', '0', '--state-dir', stateDir, '--driver', 'local'], {
        CONCH_API_KEY: generateApiKey(),
      })
      expect(await run.exited).toBe(2)
      expect(run.err().trimEnd().split('\n')).toHaveLength(1)
      expect(run.err()).toMatch(/^conch: the local driver .* refused unless you pass --unsafe-local/)
    } finally {
      rmSync(stateDir, { recursive: true, force: true })
    }
  })

  it('starts with --drivers local --unsafe-local and repeats the flag as a warning', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-drivers-'))
    try {
      await using run = cli(
        ['runner', '--port', '0', '--state-dir', stateDir, '--drivers', 'local', '--unsafe-local'],
        { CONCH_API_KEY: generateApiKey() },
      )
      await run.waitFor(/listening on/)
      // stderr and stdout are separate pipes: the log lines may arrive after the URL.
      await vi.waitFor(() => {
        expect(run.err()).toMatch(/"level":40.*--unsafe-local: the local driver may run sandbox code as root/)
        expect(run.err()).toMatch(/"level":40.*default driver local \(isolation: none\)/)
      })
    } finally {
      rmSync(stateDir, { recursive: true, force: true })
    }
  })
})

describe('conch runner where nothing isolates', () => {
  it('refuses to start in one line naming what is missing, instead of running sandboxes unisolated', () => {
    // Not root: the namespace driver cannot run, and local was not asked for.
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-drivers-'))
    chownSync(stateDir, 1000, 1000)
    chmodSync(stateDir, 0o700)
    try {
      const result = spawnSync(
        process.execPath,
        ['--conditions=source', MAIN, 'runner', '--port', '0', '--state-dir', stateDir],
        {
          encoding: 'utf8',
          uid: 1000,
          gid: 1000,
          timeout: 30_000,
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', CONCH_API_KEY: generateApiKey() },
        },
      )
      expect(result.status, result.stderr).toBe(2)
      expect(result.stderr.trimEnd().split('\n')).toHaveLength(1)
      expect(result.stderr).toMatch(
        /^conch: no isolating sandbox driver works on this host \(namespace: .*root.*\); install bubblewrap \(apt-get install bubblewrap\).*pass --drivers local/,
      )
      expect(result.stdout).not.toContain('listening')
    } finally {
      rmSync(stateDir, { recursive: true, force: true })
    }
  })
})
