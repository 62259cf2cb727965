// Forks as overlays of a snapshot's shared read-only tree (namespace driver, root runner), as
// ATTACKS from inside a fork: nothing a fork does reaches the shared tree or a sibling fork,
// the tree's host path is not shown inside, a snapshot of a fork follows no link its upper
// layer holds, and the tree outlives the snapshot while forks use it.
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, vi } from 'vitest'
import { isMountPoint } from '../src/snapshots/workspace-overlay.ts'
import { GVISOR_LIVE_TIMEOUT_MS, gvisorRunner } from './gvisor-runner.ts'
import { exec, nsRunner } from './namespace-runner.ts'
import type { TestRunner } from './runner-fixture.ts'

async function call<T>(runner: TestRunner, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) {
  const res = await runner.app.inject({ method, url, headers: runner.auth, ...(payload ? { payload } : {}) })
  if (res.statusCode !== 200) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`)
  return res.json() as T
}

const create = (runner: TestRunner, body: object = {}) =>
  call<{ id: string; restoredFrom?: unknown }>(runner, 'POST', '/v1/sandboxes', body).then((r) => r.id)
const snapshot = (runner: TestRunner, id: string) =>
  call<{ id: string; storedBytes: number; entries: number }>(
    runner,
    'POST',
    `/v1/sandboxes/${id}/snapshots`,
    {},
  )

/** Every path, type, mode and content hash under `root` (never following a link). */
function treeDigest(root: string): string {
  const lines: string[] = []
  const visit = (dir: string, rel: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name)
      const st = lstatSync(path)
      const what = st.isSymbolicLink()
        ? `link ${readlinkSync(path)}`
        : st.isFile()
          ? `file ${createHash('sha256').update(readFileSync(path)).digest('hex')}`
          : st.isDirectory()
            ? 'dir'
            : 'other'
      lines.push(`${rel}${name} ${st.mode.toString(8)} ${st.uid} ${st.nlink} ${what}`)
      if (st.isDirectory()) visit(path, `${rel}${name}/`)
    }
  }
  visit(root, '')
  return lines.join('\n')
}

function lowerTrees(runner: TestRunner): string[] {
  const dir = join(runner.stateDir, 'snapshots', 'lowers')
  return existsSync(dir)
    ? readdirSync(dir)
        .map((n) => join(dir, n, 'tree'))
        .filter(existsSync)
    : []
}

function hostWorkspace(runner: TestRunner, id: string): string {
  const record = runner.app.conch.manager.get(id).record
  return runner.driver.hostWorkspace!({ id, workdir: record.workdir, state: record.driverState })
}

const SEED = [
  'mkdir -p keep/deep gone && echo base > keep/a && echo base > keep/deep/b && echo gone > gone/x',
  'echo victim > victim && chmod 644 victim && ln -s keep/a rel-link',
].join(' && ')

describe('forks as overlays (namespace driver, root)', () => {
  it('a fork mounts the shared tree; writes, deletes, chmod, renames, hardlinks, whiteouts and overlay xattrs from inside never reach it or a sibling', async () => {
    await using runner = await nsRunner({ snapshots: true })
    const source = await create(runner)
    expect((await exec(runner, source, SEED)).exitCode).toBe(0)
    const snap = await snapshot(runner, source)
    const a = await create(runner, { fromSnapshot: snap.id })
    const b = await create(runner, { fromSnapshot: snap.id })
    expect(isMountPoint(hostWorkspace(runner, a))).toBe(true)
    const [tree] = lowerTrees(runner)
    expect(tree).toBeDefined()
    const before = treeDigest(tree!)

    const attacks = [
      'echo owned > keep/a',
      'rm -rf gone',
      'chmod 777 keep victim',
      'mv keep/deep moved || cp -a keep/deep moved',
      'ln victim hard && echo more >> hard',
      'mknod wh c 0 0; mknod keep/a2 c 0 0; true',
      'rm victim && mkdir victim && echo dir > victim/in',
      'ls /proc/self/fd/ >/dev/null; cat /proc/self/mountinfo > mountinfo.txt',
    ]
    for (const attack of attacks) await exec(runner, a, attack)
    // The overlay's own xattrs cannot be set through it (the fork has no CAP_SYS_ADMIN, and
    // overlayfs refuses its own prefix), on the root or a directory of the lower tree.
    const xattrs = await exec(
      runner,
      a,
      `python3 -c "import os
for name in ('trusted.overlay.opaque', 'trusted.overlay.redirect', 'trusted.overlay.origin', 'trusted.overlay.metacopy'):
    for target in ('keep', '.', 'keep/deep/b'):
        try:
            os.setxattr(target, name, b'y'); print('set', name, target)
        except OSError as e:
            print('refused', name, target, e.errno)"`,
    )
    expect(xattrs.stdout.match(/^refused /gm)).toHaveLength(12)
    expect(treeDigest(tree!)).toBe(before)
    // The fork sees its own changes.
    expect((await exec(runner, a, 'cat keep/a; ls gone 2>&1; cat victim/in')).stdout).toMatch(
      /owned\n.*No such file.*\ndir\n/s,
    )
    // Its sibling still sees the snapshot.
    expect((await exec(runner, b, 'cat keep/a keep/deep/b gone/x victim; stat -c %a victim')).stdout).toBe(
      'base\nbase\ngone\nvictim\n644\n',
    )
    // mountinfo inside shows the overlay with relative layer names, never the runner's paths.
    const mountinfo = (await exec(runner, a, 'cat mountinfo.txt')).stdout
    expect(mountinfo).toMatch(/ \/workspace .* overlay overlay .*lowerdir=lower,upperdir=upper,workdir=work/)
    expect(mountinfo).not.toContain(runner.stateDir)
    expect(mountinfo).not.toContain('snapshots')
    // The tree cannot be reached from inside: no path of the host's state dir exists there.
    expect(
      (await exec(runner, a, `ls ${runner.stateDir} 2>&1; ls /proc/1/root/${tree} 2>&1`)).stdout,
    ).toMatch(/No such file|Permission denied/)
  })

  it("two forks diverge; a fork's snapshot stores only what it changed and keeps its deletions; the next fork sees exactly that", async () => {
    await using runner = await nsRunner({ snapshots: true })
    const source = await create(runner)
    await exec(runner, source, `${SEED} && head -c 3000000 /dev/urandom > big`)
    const snap = await snapshot(runner, source)
    const a = await create(runner, { fromSnapshot: snap.id })
    const b = await create(runner, { fromSnapshot: snap.id })
    await exec(
      runner,
      a,
      'echo A > keep/a && rm -r gone && mkdir newdir && echo n > newdir/f && chmod 600 keep/deep/b',
    )
    await exec(runner, b, 'echo B > keep/a && rm big')
    const fromA = await snapshot(runner, a)
    expect(fromA.storedBytes).toBeLessThan(10_000)
    // Its tree shares the files A did not change with the tree below A, and copies the rest.
    const treeOf = (id: string) => lowerTrees(runner).find((t) => t.includes(`${id}-`))
    await vi.waitFor(() => expect(treeOf(fromA.id)).toBeDefined(), { timeout: 60_000 })
    const inode = (id: string, path: string) => lstatSync(join(treeOf(id)!, path)).ino
    expect(inode(fromA.id, 'big')).toBe(inode(snap.id, 'big'))
    expect(inode(fromA.id, 'victim')).toBe(inode(snap.id, 'victim'))
    expect(inode(fromA.id, 'keep/a')).not.toBe(inode(snap.id, 'keep/a'))
    expect(inode(fromA.id, 'keep/deep/b')).not.toBe(inode(snap.id, 'keep/deep/b'))
    expect(readFileSync(join(treeOf(snap.id)!, 'keep/a'), 'utf8')).toBe('base\n')
    const c = await create(runner, { fromSnapshot: fromA.id })
    const seen = await exec(
      runner,
      c,
      'cat keep/a newdir/f; ls gone 2>&1 | head -c 0; test -e gone || echo no-gone; stat -c %a keep/deep/b; md5sum < big | cut -c1-8',
    )
    const bigA = (await exec(runner, a, 'md5sum < big | cut -c1-8')).stdout
    expect(seen.stdout).toBe(`A\nn\nno-gone\n600\n${bigA}`)
    expect((await exec(runner, b, 'cat keep/a; test -e big || echo no-big; cat gone/x')).stdout).toBe(
      'B\nno-big\ngone\n',
    )
  })

  it('a snapshot of a fork follows no link its upper layer holds, while the fork swaps links and folders', async () => {
    await using runner = await nsRunner({ snapshots: true })
    const source = await create(runner)
    await exec(runner, source, SEED)
    const snap = await snapshot(runner, source)
    const a = await create(runner, { fromSnapshot: snap.id })
    await exec(
      runner,
      a,
      'rm -r keep && ln -s /etc keep && ln -sf /etc/shadow victim2 && (while :; do rm -rf sw; ln -s /etc sw; rm -f sw; mkdir sw; echo in > sw/f; done) >/dev/null 2>&1 &',
    )
    for (let i = 0; i < 3; i++) {
      const taken = await snapshot(runner, a)
      const manifest = JSON.parse(
        readFileSync(join(runner.stateDir, 'snapshots', 'manifests', `${taken.id}.json`), 'utf8'),
      ) as { workspace: { entries: Array<{ type: string; path: string[]; size?: number }> } }
      const named = (entry: { path: string[] }) =>
        entry.path.map((p) => Buffer.from(p, 'base64').toString()).join('/')
      const keep = manifest.workspace.entries.find((e) => named(e) === 'keep')
      expect(keep?.type).toBe('symlink')
      expect(manifest.workspace.entries.some((e) => named(e).startsWith('keep/'))).toBe(false)
      for (const e of manifest.workspace.entries.filter((x) => named(x).startsWith('sw/'))) {
        expect(e.type === 'file' && e.size).toBe(3)
      }
      await call(runner, 'DELETE', `/v1/snapshots/${taken.id}`)
    }
  })

  it('deleting the snapshot keeps its forks working; the tree goes with the last fork; 10 forks share one tree', async () => {
    await using runner = await nsRunner({ snapshots: true, limits: { maxSandboxes: 16 } })
    const source = await create(runner)
    await exec(runner, source, SEED)
    const snap = await snapshot(runner, source)
    const forks = await Promise.all(
      Array.from({ length: 10 }, () => create(runner, { fromSnapshot: snap.id })),
    )
    expect(lowerTrees(runner)).toHaveLength(1)
    await call(runner, 'DELETE', `/v1/snapshots/${snap.id}`)
    expect(lowerTrees(runner)).toHaveLength(1)
    for (const id of forks.slice(0, 9)) {
      expect((await exec(runner, id, 'cat keep/a && echo more >> keep/a && cat keep/deep/b')).stdout).toBe(
        'base\nbase\n',
      )
      await call(runner, 'DELETE', `/v1/sandboxes/${id}`)
    }
    expect(lowerTrees(runner)).toHaveLength(1)
    // A snapshot of a fork whose snapshot is gone reads its whole workspace.
    const again = await snapshot(runner, forks[9]!)
    const last = await create(runner, { fromSnapshot: again.id })
    expect((await exec(runner, last, 'cat keep/a victim')).stdout).toBe('base\nvictim\n')
    await call(runner, 'DELETE', `/v1/sandboxes/${forks[9]}`)
    expect(lowerTrees(runner).some((t) => t.includes(snap.id))).toBe(false)
  })

  it('the tree is a cache: deleted by hand while no fork uses it, the next fork writes it again from the store', async () => {
    await using runner = await nsRunner({ snapshots: true })
    const source = await create(runner)
    await exec(runner, source, SEED)
    const snap = await snapshot(runner, source)
    const first = await create(runner, { fromSnapshot: snap.id })
    await call(runner, 'DELETE', `/v1/sandboxes/${first}`)
    const [tree] = lowerTrees(runner)
    rmSync(tree!, { recursive: true, force: true })
    const again = await create(runner, { fromSnapshot: snap.id })
    expect((await exec(runner, again, 'cat keep/a keep/deep/b gone/x victim')).stdout).toBe(
      'base\nbase\ngone\nvictim\n',
    )
    expect(lowerTrees(runner)).toHaveLength(1)
  })

  it('a fork on a disk limit: a full upper layer is ENOSPC inside and the host spends no more than the limit', async () => {
    await using runner = await nsRunner({ snapshots: true })
    const source = await create(runner)
    await exec(runner, source, SEED)
    const snap = await snapshot(runner, source)
    const limit = 64 * 1024 * 1024
    const a = await create(runner, { fromSnapshot: snap.id, limits: { diskBytes: limit } })
    const out = await exec(runner, a, 'head -c 100000000 /dev/zero > fill; echo rc=$?; cat keep/a')
    expect(out.stdout + out.stderr).toMatch(/No space left on device/)
    expect(out.stdout).toContain('base')
    const dir = join(hostWorkspace(runner, a), '..', '..')
    const { blocks } = lstatSync(join(dir, 'disk.img'))
    expect(blocks * 512).toBeLessThanOrEqual(limit)
    expect(treeDigest(lowerTrees(runner)[0]!)).not.toContain('fill')
  })

  it('a runner restart with forks mounted keeps them, their count on the tree, and their snapshots', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'conch-ns-'))
    const first = await nsRunner({ snapshots: true, keepAgents: true, stateDir, removeStateDir: false })
    const source = await create(first, {})
    await exec(first, source, SEED)
    const snap = await snapshot(first, source)
    const a = await create(first, { fromSnapshot: snap.id })
    await exec(first, a, 'echo changed > keep/a')
    await first[Symbol.asyncDispose]()
    await using second = await nsRunner({ snapshots: true, stateDir, removeStateDir: true })
    const store = second.app.conch.manager
    expect(store.get(a).record.status).toBe('running')
    expect((await exec(second, a, 'cat keep/a keep/deep/b')).stdout).toBe('changed\nbase\n')
    await call(second, 'DELETE', `/v1/snapshots/${snap.id}`)
    // The host lost the fork's mount (the sandbox keeps its own): the snapshot mounts it again
    // rather than read the bare folder under it.
    const workspace = hostWorkspace(second, a)
    expect(spawnSync('umount', ['-l', workspace]).status).toBe(0)
    expect(isMountPoint(workspace)).toBe(false)
    const taken = await snapshot(second, a)
    expect(isMountPoint(workspace)).toBe(true)
    expect(taken.entries).toBeGreaterThan(5)
    const b = await create(second, { fromSnapshot: taken.id })
    expect((await exec(second, b, 'cat keep/a keep/deep/b victim')).stdout).toBe('changed\nbase\nvictim\n')
    await call(second, 'DELETE', `/v1/sandboxes/${a}`)
    expect(lowerTrees(second).some((t) => t.includes(snap.id))).toBe(false)
  })
})

describe('forks as overlays (gVisor driver: its gofer serves the host overlay)', () => {
  it(
    'two forks of a live snapshot diverge over one shared tree, which neither can change',
    async () => {
      await using runner = await gvisorRunner({ snapshots: true })
      const source = await create(runner)
      expect((await exec(runner, source, SEED)).exitCode).toBe(0)
      const snap = await snapshot(runner, source)
      const a = await create(runner, { fromSnapshot: snap.id })
      const b = await create(runner, { fromSnapshot: snap.id })
      expect(isMountPoint(hostWorkspace(runner, a))).toBe(true)
      const [tree] = lowerTrees(runner)
      const before = treeDigest(tree!)
      await exec(
        runner,
        a,
        'echo owned > keep/a && rm -rf gone && chmod 777 victim && ln victim hard && mv keep/deep moved',
      )
      expect(treeDigest(tree!)).toBe(before)
      expect((await exec(runner, a, 'cat keep/a; test -e gone || echo no-gone')).stdout).toBe(
        'owned\nno-gone\n',
      )
      expect((await exec(runner, b, 'cat keep/a gone/x keep/deep/b')).stdout).toBe('base\ngone\nbase\n')
      const mountinfo = (await exec(runner, a, 'cat /proc/self/mountinfo')).stdout
      expect(mountinfo).not.toContain(runner.stateDir)
      const fromA = await snapshot(runner, a)
      const c = await create(runner, { fromSnapshot: fromA.id })
      expect((await exec(runner, c, 'cat keep/a moved/b; test -e gone || echo no-gone')).stdout).toBe(
        'owned\nbase\nno-gone\n',
      )
    },
    GVISOR_LIVE_TIMEOUT_MS,
  )
})
