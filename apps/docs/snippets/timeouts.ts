import { Sandbox } from '@conch/sdk'

await using sb = await Sandbox.create({
  url: process.env.CONCH_URL ?? 'http://127.0.0.1:7878',
  apiKey: process.env.CONCH_API_KEY,
})

// #region timeout
await using sh = await sb.shell({ commandTimeoutMs: 60_000 }) // the session's default
await sh.run('cd /tmp && export STAGE=test')

const slow = await sh.run('echo started; sleep 600', { timeoutMs: 2_000 }) // this call only
console.log(slow.timedOut, slow.exitCode, slow.stdout) // true 130 "started\n"

const after = await sh.run('echo $STAGE in $(pwd)')
console.log(after.stdout) // "test in /tmp\n": the shell kept its state
// #endregion timeout

// #region interrupt
const running = sh.run('while true; do :; done') // a busy loop inside bash itself
setTimeout(() => void sh.interrupt(), 500)
const stopped = await running
console.log(stopped.exitCode, stopped.timedOut) // 130 false
// #endregion interrupt

// #region abort
const controller = new AbortController()
setTimeout(() => controller.abort(), 1_000)
const aborted = await sh.run('sleep 30', { signal: controller.signal }).catch((error: unknown) => error)
console.log(aborted)
// #endregion abort
