// Attack: an API-key holder asks for `driver: "local"` on a root runner, to run as root on the
// host with no isolation. The runner offers only the drivers the operator allowed, never local
// as root without --unsafe-local, and refuses to start rather than fall back to no isolation.
// Hosts that lack a piece (root, bubblewrap, cgroups) are made for real: the runner runs as an
// unprivileged user, or in a mount namespace where bwrap or the cgroup filesystems are gone.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ErrorBody, SandboxList } from '@conch/protocol'
import { describe, expect, it, vi } from 'vitest'
import { ConfigError } from '../../src/config-error.ts'
import { generateApiKey } from '../../src/credentials.ts'
import { chooseDrivers, type DriverChoiceInput } from '../../src/driver-choice.ts'
import { GvisorDriver } from '../../src/drivers/gvisor-driver.ts'
import { LocalDriver } from '../../src/drivers/local-driver.ts'
import { NamespaceDriver } from '../../src/drivers/namespace-driver.ts'
import { SshDriver } from '../../src/drivers/ssh-driver.ts'
import {
  type RunnerProcessOptions,
  rootlessRunner,
  rootlessStateDir,
  runnerArgv,
  runnerEnv,
} from '../rootless-runner.ts'
import { cli } from '../runner-process.ts'

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
      ssh: { driver: new SshDriver({ hosts: new Map() }), problem: 'no SSH hosts are configured' },
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

  it('offers ssh only when the operator names it and configured hosts; then root needs no --unsafe-local', () => {
    expect(names(chooseDrivers(input({})))).not.toContain('ssh')
    expect(() => chooseDrivers(input({ drivers: ['namespace', 'ssh'] }))).toThrow(
      /the ssh driver cannot run on this host: no SSH hosts are configured/,
    )
    const hosts = new Map([['box', { address: 'a', port: 22, user: 'u', agent: true }]])
    const configured = input({ drivers: ['namespace', 'ssh'] })
    const withHosts = {
      ...configured,
      candidates: { ...configured.candidates, ssh: { driver: new SshDriver({ hosts }), problem: null } },
    }
    const choice = chooseDrivers(withHosts)
    expect(names(choice)).toEqual(['namespace', 'ssh'])
    expect(choice.defaultDriver.name).toBe('namespace')
    expect(choice.warnings).toEqual([])
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

/** A prelude (run as root in the runner's mount namespace) that hides bubblewrap: /usr/bin becomes links to everything else. */
function hideBwrap(dir: string): string {
  return [
    `mkdir -p ${dir}/orig ${dir}/bin`,
    `mount --bind /usr/bin ${dir}/orig`,
    `mount -t tmpfs tmpfs ${dir}/bin`,
    `for f in ${dir}/orig/*; do n=\${f##*/}; [ "$n" = bwrap ] || ln -s "$f" "${dir}/bin/$n"; done`,
    `mount --bind ${dir}/bin /usr/bin`,
    'test ! -e /usr/bin/bwrap',
  ].join(' && ')
}

/** A prelude that unmounts every cgroup filesystem the runner would see. */
const NO_CGROUPS = 'umount -lR /sys/fs/cgroup && ! grep -q cgroup /proc/self/mountinfo'

/** Runs a runner that is expected to refuse to start; returns its exit status and output. */
function refusedRunner(options: RunnerProcessOptions): {
  status: number | null
  stderr: string
  stdout: string
} {
  const stateDir = options.asRoot ? mkdtempSync(join(tmpdir(), 'conch-drivers-')) : rootlessStateDir()
  try {
    const [program, ...args] = runnerArgv(stateDir, options)
    const result = spawnSync(program!, args, {
      encoding: 'utf8',
      timeout: 60_000,
      env: runnerEnv(generateApiKey()),
    })
    return { status: result.status, stderr: result.stderr, stdout: result.stdout }
  } finally {
    rmSync(stateDir, { recursive: true, force: true })
  }
}

describe('conch runner on hosts that lack a piece', () => {
  it('without root: auto picks the namespace driver rootless and says which limits it does not enforce', async () => {
    await using runner = await rootlessRunner()
    await vi.waitFor(() => {
      expect(runner.err()).toMatch(
        /default driver namespace \(isolation: namespace\): namespace driver, rootless/,
      )
      expect(runner.err()).toMatch(
        /"level":40.*runs rootless: memory, CPU and disk limits are not enforced.*cgroups are v1, which only root may manage/,
      )
    })
  })

  it('without root and without cgroups: starts rootless and names the missing cgroup filesystem', async () => {
    await using runner = await rootlessRunner({ prelude: NO_CGROUPS })
    await vi.waitFor(() =>
      expect(runner.err()).toMatch(
        /runs rootless: memory, CPU and disk limits are not enforced.*no cgroup filesystem is mounted/,
      ),
    )
    const sb = await runner.create()
    expect(sb.limits).toEqual({ pids: 1024 })
    expect((await runner.exec(sb.id, 'echo isolated; id -u')).stdout).toBe('isolated\n1000\n')
  })

  it('without root and without bubblewrap: refuses to start in one line naming bwrap and the fix', () => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-nobwrap-'))
    try {
      const result = refusedRunner({ prelude: hideBwrap(dir) })
      expect(result.status, result.stderr).toBe(2)
      expect(result.stderr.trimEnd().split('\n')).toHaveLength(1)
      expect(result.stderr).toMatch(
        /^conch: no isolating sandbox driver works on this host \(namespace: bwrap is not installed .*\); install bubblewrap \(apt-get install bubblewrap\) and allow unprivileged user namespaces, or run the runner as root, or for development only pass --drivers local \(no isolation\)/,
      )
      expect(result.stdout).not.toContain('listening')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('as root without bubblewrap: refuses to start, naming bwrap and --drivers local --unsafe-local', () => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-nobwrap-'))
    try {
      const result = refusedRunner({ prelude: hideBwrap(dir), asRoot: true })
      expect(result.status, result.stderr).toBe(2)
      expect(result.stderr).toMatch(
        /^conch: no isolating sandbox driver works on this host \(namespace: bwrap is not installed .*\); install bubblewrap .*pass --drivers local --unsafe-local/,
      )
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('as root without cgroups: refuses to start rather than run sandboxes without limits', () => {
    const result = refusedRunner({ prelude: NO_CGROUPS, asRoot: true })
    expect(result.status, result.stderr).toBe(2)
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1)
    expect(result.stderr).toMatch(
      /^conch: no isolating sandbox driver works on this host \(namespace: cannot limit sandboxes on this host: no cgroup filesystem is mounted.*\).*--drivers local --unsafe-local/,
    )
  })

  it('without root, --driver namespace with an explicit limit it cannot enforce is refused per request, not at start', async () => {
    await using runner = await rootlessRunner({ args: ['--driver', 'namespace'] })
    const res = await runner.request('POST', '/v1/sandboxes', { limits: { memoryBytes: 128 * 1024 * 1024 } })
    expect(res.status).toBe(400)
    expect(ErrorBody.parse(res.body).error.code).toBe('LIMITS_NOT_ENFORCEABLE')
  })
})
