// The driver conformance suite: one table of cases every SandboxDriver must pass, driven through
// a real runner's HTTP API. A target names its driver, declares which limits it enforces (a case
// that needs a limit runs only on targets that declare it) and starts runners. The cases use
// only HTTP and the target's host view of a sandbox, so the same table runs against a runner in
// this process (host-driver-target.ts) or inside the VM tier's guest.
import { RunResult, SandboxInfo } from '@conch/protocol'
import { expect, vi } from 'vitest'

/** A limit a driver may enforce. */
export type EnforcedLimit = 'pids' | 'memory' | 'cpu'

/** An HTTP answer: status and parsed JSON body (null when empty). */
export interface ConformanceResponse {
  /** HTTP status. */
  status: number
  /** The body, parsed as JSON. */
  body: unknown
}

/** What of one sandbox exists on its host, captured while it lives. */
export interface SandboxFootprint {
  /** Sandbox id. */
  id: string
  /** Its processes (the agent and everything below it, and its cgroups' members), with start times. */
  processes: Array<{ pid: number; startTime: string }>
  /** Its cgroup dirs. */
  cgroupDirs: string[]
}

/** A runner under test, with a view of its host. */
export interface ConformanceRunner extends AsyncDisposable {
  /** Calls the runner's API with its API key. */
  request(method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown): Promise<ConformanceResponse>
  /** Closes this runner leaving its agents running, and starts a new one on the same state. */
  restart(): Promise<ConformanceRunner>
  /** Captures the host-side footprint of a live sandbox. */
  footprint(sandboxId: string): Promise<SandboxFootprint>
  /** What of a footprint is still on the host: live processes, processes in the sandbox's cgroups, cgroup dirs, state files. */
  leftovers(footprint: SandboxFootprint): Promise<string[]>
}

/** A driver as the suite sees it. */
export interface ConformanceTarget {
  /** Driver name, for the test titles. */
  name: string
  /** The limits this driver enforces; cases needing others do not run for it. */
  enforces: readonly EnforcedLimit[]
  /** Starts a runner on a fresh state dir whose default driver is this one. */
  start(): Promise<ConformanceRunner>
}

/** One conformance case. */
export interface ConformanceCase {
  /** Behaviour, in the present tense. */
  name: string
  /** The limit the case exercises, when it needs one. */
  needs?: EnforcedLimit
  /** Test timeout. */
  timeoutMs: number
  /** Runs the case against a target. */
  run(target: ConformanceTarget): Promise<void>
}

const MiB = 1024 * 1024

/** Creates a sandbox and returns its id; throws with the body on a non-200. */
async function create(runner: ConformanceRunner, body: Record<string, unknown> = {}): Promise<string> {
  const res = await runner.request('POST', '/v1/sandboxes', body)
  if (res.status !== 200) throw new Error(`create sandbox: ${res.status} ${JSON.stringify(res.body)}`)
  return SandboxInfo.parse(res.body).id
}

/** The sandbox as the API shows it. */
async function info(runner: ConformanceRunner, id: string): Promise<SandboxInfo> {
  const res = await runner.request('GET', `/v1/sandboxes/${id}`)
  if (res.status !== 200) throw new Error(`get sandbox: ${res.status} ${JSON.stringify(res.body)}`)
  return SandboxInfo.parse(res.body)
}

/** Runs `command` in the `default` session's shell (state persists between calls). */
async function shell(runner: ConformanceRunner, id: string, command: string): Promise<RunResult> {
  const res = await runner.request('POST', `/v1/sandboxes/${id}/exec`, { command, sessionId: 'default' })
  if (res.status !== 200) throw new Error(`exec ${command}: ${res.status} ${JSON.stringify(res.body)}`)
  return RunResult.parse(res.body)
}

/** Runs `command` in a fresh process of the sandbox. */
async function fresh(runner: ConformanceRunner, id: string, command: string): Promise<RunResult> {
  const res = await runner.request('POST', `/v1/sandboxes/${id}/exec`, { command })
  if (res.status !== 200) throw new Error(`exec ${command}: ${res.status} ${JSON.stringify(res.body)}`)
  return RunResult.parse(res.body)
}

/** Forks sleepers until the kernel refuses, reports how many it got, and reaps them. */
const FORK_BOMB = `perl -e 'my @k; for (1 .. 2000) { my $p = fork; last unless defined $p; if ($p == 0) { sleep 300; exit 0 } push @k, $p } print "forked ", scalar(@k), "\\n"; kill 9, @k; waitpid($_, 0) for @k'`

/**
 * Forks sleepers in its own process group until the kernel refuses, then writes its pid, the
 * count and the refusal to `$HOME/.bomb` and holds every pid it got.
 */
const HOLDING_FORK_BOMB = `perl -e 'setpgrp(0, 0); my $n = 0; for (1 .. 5000) { my $p = fork; last unless defined $p; if ($p == 0) { sleep 600; exit 0 } $n++ } my $why = "$!"; open(my $f, ">", "$ENV{HOME}/.bomb.tmp") or die; print $f "$$ $n $why\n"; close $f; rename("$ENV{HOME}/.bomb.tmp", "$ENV{HOME}/.bomb"); sleep 600' > /dev/null 2>&1 &`

/** Asks for 512 MiB at once. */
const MEMORY_HOG = `perl -e '$x = "a" x (512 * 1024 * 1024); print "survived\\n"'`

/** Every case, in order. */
export const CONFORMANCE_CASES: readonly ConformanceCase[] = [
  {
    name: 'creates a sandbox whose shell runs commands and keeps cd and export between them',
    timeoutMs: 60_000,
    async run(target) {
      await using runner = await target.start()
      const id = await create(runner)
      expect((await info(runner, id)).status).toBe('running')
      expect(await shell(runner, id, 'mkdir -p sub && cd sub && export KEPT=yes')).toMatchObject({
        exitCode: 0,
      })
      const r = await shell(runner, id, 'basename "$PWD"; echo "$KEPT"')
      expect(r).toMatchObject({ stdout: 'sub\nyes\n', exitCode: 0 })
      await runner.request('DELETE', `/v1/sandboxes/${id}`)
    },
  },
  {
    name: 'names the user whoami prints in USER and LOGNAME, in sessions and in fresh processes',
    timeoutMs: 60_000,
    async run(target) {
      await using runner = await target.start()
      const id = await create(runner)
      const names = 'echo "$USER:$LOGNAME:$(whoami)"'
      for (const r of [await shell(runner, id, names), await fresh(runner, id, names)]) {
        expect(r.exitCode).toBe(0)
        const [user, logname, whoami] = r.stdout.trim().split(':')
        expect(whoami).toMatch(/^[a-z_][a-z0-9_-]*$/)
        expect([user, logname]).toEqual([whoami, whoami])
      }
      await runner.request('DELETE', `/v1/sandboxes/${id}`)
    },
  },
  {
    name: 'stops a fork bomb at the pids limit; the sandbox and its shell keep serving',
    needs: 'pids',
    timeoutMs: 60_000,
    async run(target) {
      await using runner = await target.start()
      const id = await create(runner, { limits: { pids: 64 } })
      await shell(runner, id, 'export KEPT=yes')
      const bomb = await shell(runner, id, FORK_BOMB)
      const forked = Number(/forked (\d+)/.exec(bomb.stdout)?.[1])
      expect(forked).toBeGreaterThan(0)
      expect(forked).toBeLessThan(64)
      expect(await shell(runner, id, 'echo "$KEPT"')).toMatchObject({ stdout: 'yes\n' })
      expect((await info(runner, id)).status).toBe('running')
      await runner.request('DELETE', `/v1/sandboxes/${id}`)
    },
  },
  {
    name: 'attack: a fork bomb holding every pid it may have cannot keep the agent from opening a session that kills it',
    needs: 'pids',
    timeoutMs: 90_000,
    async run(target) {
      await using runner = await target.start()
      const id = await create(runner, { limits: { pids: 64 } })
      await shell(runner, id, `export KEPT=yes; rm -f "$HOME/.bomb"; ${HOLDING_FORK_BOMB}`)
      // Builtins only: the bomb holds the commands' pids, so the shell cannot fork.
      let held = ''
      await vi.waitFor(
        async () => {
          held = (await shell(runner, id, 'read -r line < "$HOME/.bomb" && echo "$line"')).stdout
          expect(held).not.toBe('')
        },
        { timeout: 60_000, interval: 200 },
      )
      // The bomb stopped because the kernel refused a fork, below the limit it was given.
      const [, pid, forked, why] = /^(\d+) (\d+) (.*)\n$/.exec(held) ?? []
      expect(why).toMatch(/Resource temporarily unavailable/)
      expect(Number(forked)).toBeGreaterThan(32)
      expect(Number(forked)).toBeLessThan(64)
      const session = await runner.request('POST', `/v1/sandboxes/${id}/sessions`, { id: 'rescue' })
      expect(session.status).toBe(200)
      const rescue = await runner.request('POST', `/v1/sandboxes/${id}/exec`, {
        sessionId: 'rescue',
        command: `kill -9 -- -${pid} && echo "killed the bomb"`,
      })
      expect(rescue.status).toBe(200)
      expect(RunResult.parse(rescue.body)).toMatchObject({ stdout: 'killed the bomb\n', exitCode: 0 })
      // Its pids are free again: a fresh process starts and forks.
      await vi.waitFor(
        async () => expect((await fresh(runner, id, 'sh -c "echo forked"')).stdout).toBe('forked\n'),
        { timeout: 30_000, interval: 200 },
      )
      expect(await shell(runner, id, 'echo "$KEPT"')).toMatchObject({ stdout: 'yes\n' })
      await runner.request('DELETE', `/v1/sandboxes/${id}`)
    },
  },
  {
    name: 'throttles a CPU-bound command to the cpus limit, as the sandbox usage counts it',
    needs: 'cpu',
    timeoutMs: 60_000,
    async run(target) {
      await using runner = await target.start()
      const id = await create(runner, { limits: { cpus: 0.2 } })
      const before = (await info(runner, id)).usage
      expect(before).not.toBeNull()
      const r = await shell(
        runner,
        id,
        'start=$(date +%s%N); timeout 4 sh -c "while :; do :; done"; end=$(date +%s%N); echo $(( (end - start) / 1000000 ))',
      )
      const wallSeconds = Number(r.stdout.trim()) / 1000
      const after = (await info(runner, id)).usage
      const cpuSeconds = (after?.cpuSeconds ?? 0) - (before?.cpuSeconds ?? 0)
      // The loop ran, and got no more than the limit plus the sandbox's own overhead.
      expect(cpuSeconds).toBeGreaterThan(0.1)
      expect(cpuSeconds / wallSeconds).toBeLessThan(0.5)
      await runner.request('DELETE', `/v1/sandboxes/${id}`)
    },
  },
  {
    name: 'OOM-kills a memory hog inside the memory limit; the sandbox, its shell and their state survive',
    needs: 'memory',
    timeoutMs: 60_000,
    async run(target) {
      await using runner = await target.start()
      const id = await create(runner, { limits: { memoryBytes: 128 * MiB } })
      await shell(runner, id, 'export KEPT=yes')
      const hog = await shell(runner, id, MEMORY_HOG)
      expect(hog.stdout).not.toContain('survived')
      expect(hog.exitCode).toBe(137)
      expect(await shell(runner, id, 'echo "$KEPT"')).toMatchObject({ stdout: 'yes\n' })
      const after = await info(runner, id)
      expect(after.status).toBe('running')
      // A driver that measures usage counts the kill.
      if (after.usage) expect(after.usage.oomKills).toBeGreaterThanOrEqual(1)
      await runner.request('DELETE', `/v1/sandboxes/${id}`)
    },
  },
  {
    name: 'interrupts a running command; the shell keeps its state and serves the next one',
    timeoutMs: 60_000,
    async run(target) {
      await using runner = await target.start()
      const id = await create(runner)
      await shell(runner, id, 'export KEPT=yes; rm -f "$HOME/.conformance-started"')
      const run = runner.request('POST', `/v1/sandboxes/${id}/sessions/default/run`, {
        command: ': > "$HOME/.conformance-started"; sleep 600',
      })
      await vi.waitFor(
        async () =>
          expect((await fresh(runner, id, 'test -e "$HOME/.conformance-started" && echo y')).stdout).toBe(
            'y\n',
          ),
        { timeout: 20_000, interval: 50 },
      )
      expect((await runner.request('POST', `/v1/sandboxes/${id}/sessions/default/interrupt`)).status).toBe(
        200,
      )
      const result = await run
      expect(result.status).toBe(200)
      expect(RunResult.parse(result.body).exitCode).toBe(130)
      expect(await shell(runner, id, 'echo "$KEPT"')).toMatchObject({ stdout: 'yes\n', exitCode: 0 })
      await runner.request('DELETE', `/v1/sandboxes/${id}`)
    },
  },
  {
    name: 'keeps the sandbox and its shell state across a runner restart',
    timeoutMs: 90_000,
    async run(target) {
      const first = await target.start()
      const id = await create(first)
      await shell(first, id, 'mkdir -p kept && cd kept && export KEPT=yes && greet() { echo "hi $1"; }')
      await using second = await first.restart()
      expect((await info(second, id)).status).toBe('running')
      expect(await shell(second, id, 'basename "$PWD"; echo "$KEPT"; greet you')).toMatchObject({
        stdout: 'kept\nyes\nhi you\n',
        exitCode: 0,
      })
      await second.request('DELETE', `/v1/sandboxes/${id}`)
    },
  },
  {
    name: 'destroy leaves no process, cgroup or state file of the sandbox behind',
    timeoutMs: 60_000,
    async run(target) {
      await using runner = await target.start()
      const id = await create(runner)
      // Work that outlives its command: a background job and a detached session leader. bash has
      // forked both before the command returns, so the footprint below sees them.
      await shell(runner, id, 'sleep 600 > /dev/null 2>&1 &')
      await shell(runner, id, 'setsid sleep 601 > /dev/null 2>&1 < /dev/null &')
      const footprint = await runner.footprint(id)
      expect(footprint.processes.length).toBeGreaterThan(0)
      // The check below sees a live sandbox, so an empty answer after destroy means something.
      expect(await runner.leftovers(footprint)).not.toEqual([])
      expect((await runner.request('DELETE', `/v1/sandboxes/${id}`)).status).toBe(200)
      expect(await runner.leftovers(footprint)).toEqual([])
      expect((await runner.request('GET', `/v1/sandboxes/${id}`)).status).toBe(404)
    },
  },
]

/** The cases a target runs: every case whose limit it declares it enforces. */
export function casesFor(target: ConformanceTarget): ConformanceCase[] {
  return CONFORMANCE_CASES.filter((c) => c.needs === undefined || target.enforces.includes(c.needs))
}
