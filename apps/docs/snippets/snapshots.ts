import { Sandbox } from '@conch/sdk'

const connection = {
  url: process.env.CONCH_URL ?? 'http://127.0.0.1:7878',
  apiKey: process.env.CONCH_API_KEY,
}
await using sb = await Sandbox.create(connection)
await using sh = await sb.shell()

// #region setup
await sh.run('mkdir -p app && cd app && echo "v1" > VERSION')
await sh.run('export STAGE=before; build() { echo "building $(cat VERSION)"; }')
// #endregion setup

// #region checkpoint
// Before a risky step: the workspace and every session's shell state, in one id.
const checkpoint = await sb.snapshot({ name: 'before-migration' })
console.log(checkpoint.id, checkpoint.sessions)
// #endregion checkpoint

// #region risky
await sh.run('echo "v2-broken" > VERSION; rm -f ./*; export STAGE=after')
// #endregion risky

// #region roll-back
// Roll back: a new sandbox from the checkpoint. Same session ids, same cwd, variables,
// functions and history; the broken one can go.
await using retry = await Sandbox.create({ ...connection, fromSnapshot: checkpoint.id })
await using again = await retry.reattachShell(sh.sessionId)
const r = await again.run('basename "$PWD"; cat VERSION; echo "$STAGE"; build')
console.log(r.stdout) // "app\nv1\nbefore\nbuilding v1\n"
console.log(again.resumed) // { snapshotId: 'snap_...', processesRestarted: 0 }
// #endregion roll-back

// #region manage
for (const s of await sb.listSnapshots()) console.log(s.id, s.name, s.workspaceBytes, s.storedBytes)
await Sandbox.deleteSnapshot(checkpoint.id, connection)
// #endregion manage

// #region lifetimes
// Asleep after 5 idle minutes, deleted after a day idle; awake while the build runs.
await using worker = await Sandbox.create({
  ...connection,
  hibernateAfterMs: 5 * 60_000,
  idleTimeoutMs: 24 * 60 * 60_000,
})
const build = await worker.startProcess('sleep 1; echo built', { keepAlive: true })
await worker.keepAlive(60 * 60_000) // or hold the whole sandbox for an hour
await build.wait()
await worker.hibernate() // what the idle timer does after 5 minutes
const woke = await worker.exec('echo awake')
console.log(woke.stdout) // "awake\n": the request woke it
// #endregion lifetimes
