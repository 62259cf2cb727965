// A rootless runner on a real cgroup v2 kernel: a second runner in the guest, started as an
// unprivileged user inside a cgroup delegated to that user the way systemd's `Delegate=yes` does
// it (the dir and its cgroup.procs, cgroup.subtree_control and cgroup.threads chowned to the
// user). Its namespace driver runs rootless and must enforce memory and pids through that
// subtree: a memory hog is OOM-killed, a fork bomb stops at the limit, and destroy removes the
// sandbox's groups. The runner listens on the guest's loopback only, so the guest inspector (a
// root shell in the guest) is its client, through Node's fetch.
import { describe, expect, vi } from 'vitest'
import { GUEST_NODE } from '../harness/app-archive.ts'
import type { GuestInspector } from '../harness/guest-inspector.ts'
import { GUEST_COMPILE_CACHE } from '../harness/vm.ts'
import { test as base, guestInspector } from './vm-fixture.ts'

const USER = 'conch-rootless'
const DELEGATED = '/sys/fs/cgroup/conch-rootless-delegated'
const STATE_DIR = '/var/lib/conch-rootless'
const LOG = '/var/lib/conch-rootless.log'
const PORT = 7900
const API_KEY = `conch_${'r'.repeat(48)}`
const MiB = 1024 * 1024

/** Makes the user and its delegated cgroup, and starts the rootless runner in that cgroup. */
const START = `
set -e
id ${USER} > /dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin ${USER}
mkdir -p ${DELEGATED}
chown ${USER}: ${DELEGATED} ${DELEGATED}/cgroup.procs ${DELEGATED}/cgroup.subtree_control ${DELEGATED}/cgroup.threads
rm -rf ${STATE_DIR} && mkdir -p ${STATE_DIR} && chown ${USER}: ${STATE_DIR} && chmod 700 ${STATE_DIR}
# The warm-up filled Node's compile cache as uid 0, in a dir whose name ends in the uid. The
# rootless agents run as uid 1000 inside their namespace, so they get a copy under that name
# (without it, every agent compiles its modules anew, which under TCG outlasts the hello deadline).
# No warm pool: its agents would start beside the runner and slow it under TCG; a hog test needs none.
for d in ${GUEST_COMPILE_CACHE}/*-0; do rm -rf "\${d%-0}-1000"; cp -a "$d" "\${d%-0}-1000"; done
chmod -R a+rX ${GUEST_COMPILE_CACHE}
cd /conch/repo
setsid sh -c 'echo $$ > ${DELEGATED}/cgroup.procs && exec setpriv --reuid=${USER} --regid=${USER} --clear-groups -- env -i PATH=/usr/bin:/bin CONCH_API_KEY=${API_KEY} NODE_COMPILE_CACHE=${GUEST_COMPILE_CACHE} ${GUEST_NODE} --conditions=source packages/runner/src/main.ts runner --port ${PORT} --state-dir ${STATE_DIR} --warm-pool 0' > ${LOG} 2>&1 < /dev/null &
`

/** Stops the rootless runner and what it started, and removes its cgroups and state. */
const STOP = `
for p in $(cat ${DELEGATED}/cgroup.procs $(find ${DELEGATED} -mindepth 1 -name cgroup.procs) 2> /dev/null); do kill -9 $p 2> /dev/null; done
sleep 1
find ${DELEGATED} -mindepth 1 -depth -type d -exec rmdir {} \\; 2> /dev/null
rmdir ${DELEGATED} 2> /dev/null
rm -rf ${STATE_DIR}
true
`

/** Node run by the inspector (the script comes as $1): one API call, its status and body on stdout. */
const CALL = `${GUEST_NODE} --input-type=module -e "$1"`

/** The script of one API call to the rootless runner. */
function call(method: string, path: string, body?: unknown): string {
  const init = JSON.stringify({
    method,
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return `const r = await fetch('http://127.0.0.1:${PORT}${path}', ${init}); console.log(JSON.stringify({ status: r.status, body: await r.text() }))`
}

/** The rootless runner's API, through the inspector. */
async function api(
  inspector: GuestInspector,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const out = JSON.parse((await inspector.run(CALL, [call(method, path, body)])).trim()) as {
    status: number
    body: string
  }
  return { status: out.status, body: out.body ? (JSON.parse(out.body) as Record<string, unknown>) : {} }
}

/** Runs a command in a sandbox of the rootless runner through POST /exec. */
async function exec(
  inspector: GuestInspector,
  id: string,
  command: string,
): Promise<Record<string, unknown>> {
  const res = await api(inspector, 'POST', `/v1/sandboxes/${id}/exec`, { command, timeoutMs: 50_000 })
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  return res.body
}

const test = base.extend<{ rootless: GuestInspector }>({
  rootless: [
    // biome-ignore lint/correctness/noEmptyPattern: vitest reads fixture dependencies from this pattern
    async ({}, use) => {
      const inspector = await guestInspector()
      await inspector.run(STOP)
      await inspector.run(START)
      try {
        // A second runner starting under TCG on a loaded host can take minutes. One that has
        // written nothing at all after half the wait never got going (seen once in a loaded
        // run, with an empty log), and one that V8 aborted at start (`Fatal error`, seen once:
        // a JIT page lookup failing under TCG's emulated CPU, in V8's own check) is gone: either
        // is started once more, and the failure says what ran.
        const listening = (timeout: number) =>
          vi.waitFor(() => inspector.run(`grep -q 'listening on' ${LOG}`), { timeout, interval: 2_000 })
        await listening(200_000)
          .catch(async () => {
            const log = await inspector.run(`cat ${LOG}`).catch(() => '')
            if (log.trim() !== '' && !log.includes('# Fatal error')) return listening(200_000)
            await inspector.run(STOP)
            await inspector.run(START)
            return listening(200_000)
          })
          .catch(async (error: unknown) => {
            const seen = await inspector.run(
              `tail -20 ${LOG}; echo '--- processes'; ps -eo pid,user,stat,etime,args | grep -v ' \\[' | tail -30`,
            )
            throw new Error(`the rootless runner did not listen: ${seen}`, { cause: error })
          })
        await use(inspector)
      } finally {
        await inspector.run(STOP)
      }
    },
    { scope: 'file' },
  ],
})

describe('a rootless runner with a delegated cgroup v2 subtree', () => {
  test('enforces memory and pids through the subtree: a hog is OOM-killed, a fork bomb stops, destroy removes its groups', async ({
    rootless,
  }) => {
    const log = await rootless.run(`cat ${LOG}`)
    expect(log).toMatch(/namespace driver runs rootless: disk limits are not enforced/)
    expect(log).not.toMatch(/memory, CPU and disk limits are not enforced/)

    const created = await api(rootless, 'POST', '/v1/sandboxes', {
      limits: { memoryBytes: 128 * MiB, pids: 64 },
      env: { NODE_COMPILE_CACHE: GUEST_COMPILE_CACHE },
    })
    expect(created.status, `${JSON.stringify(created.body)}\n${await rootless.run(`tail -20 ${LOG}`)}`).toBe(
      200,
    )
    const id = String(created.body.id)
    expect(created.body.limits).toEqual({ memoryBytes: 128 * MiB, pids: 64, cpus: 1 })
    expect(String(created.body.description)).toMatch(
      /rootless.*pids, memory and CPU are limited \(delegated cgroup v2\) but disk limits are NOT enforced/,
    )

    // Its groups are in the delegated subtree, made by the unprivileged user. The commands' group
    // holds the pids limit; the sandbox's allows the agent's reserve of 64 more.
    const groups = await rootless.run(
      `stat -c '%U %n' ${DELEGATED}/${id} ${DELEGATED}/${id}/work; cat ${DELEGATED}/${id}/work/pids.max ${DELEGATED}/${id}/pids.max ${DELEGATED}/${id}/work/memory.max`,
    )
    expect(groups).toBe(
      `${USER} ${DELEGATED}/${id}\n${USER} ${DELEGATED}/${id}/work\n64\n${64 + 64}\n${128 * MiB}\n`,
    )

    const hog = await exec(rootless, id, `perl -e '$x = "a" x (512 * 1024 * 1024); print "survived\\n"'`)
    expect(hog).toMatchObject({ exitCode: 137, oomKilled: true })
    expect(hog.stdout).not.toContain('survived')

    const bomb = await exec(
      rootless,
      id,
      `perl -e 'my @k; for (1 .. 2000) { my $p = fork; last unless defined $p; if ($p == 0) { sleep 300; exit 0 } push @k, $p } print "forked ", scalar(@k), "\\n"; kill 9, @k; waitpid($_, 0) for @k'`,
    )
    const forked = Number(/forked (\d+)/.exec(String(bomb.stdout))?.[1])
    expect(forked).toBeGreaterThan(0)
    expect(forked).toBeLessThan(64)
    expect(await exec(rootless, id, 'echo served')).toMatchObject({ stdout: 'served\n', exitCode: 0 })

    const info = await api(rootless, 'GET', `/v1/sandboxes/${id}`)
    expect((info.body.usage as { oomKills: number }).oomKills).toBeGreaterThanOrEqual(1)

    expect((await api(rootless, 'DELETE', `/v1/sandboxes/${id}`)).status).toBeLessThan(300)
    expect(await rootless.run(`ls -d ${DELEGATED}/${id} ${STATE_DIR}/sandboxes/${id} 2>&1 || true`)).toMatch(
      /No such file or directory[\s\S]*No such file or directory/,
    )
    // Each step starts Node in the guest; under TCG on a loaded host that takes its time.
  }, 600_000)

  test('refuses a disk limit with LIMITS_NOT_ENFORCEABLE', async ({ rootless }) => {
    const res = await api(rootless, 'POST', '/v1/sandboxes', { limits: { diskBytes: 1024 * MiB } })
    expect(res.status).toBe(400)
    expect(res.body.error).toMatchObject({ code: 'LIMITS_NOT_ENFORCEABLE' })
  })
})
