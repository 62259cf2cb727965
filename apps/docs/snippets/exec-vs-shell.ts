import { Sandbox } from '@conch/sdk'

await using sb = await Sandbox.create({
  url: process.env.CONCH_URL ?? 'http://127.0.0.1:7878',
  apiKey: process.env.CONCH_API_KEY,
})

// #region exec
// A fresh `bash -c` per call: nothing carries over to the next call.
await sb.exec('cd /tmp')
const fresh = await sb.exec('pwd; echo CI=$CI', { cwd: '/tmp', env: { CI: '1' }, timeoutMs: 10_000 })
console.log(fresh.stdout) // "/tmp\nCI=1\n"
// #endregion exec

// #region shell
// One long-lived bash: cd, export, functions and aliases persist between runs.
await using sh = await sb.shell({ env: { CI: '1' } })
await sh.run('cd /tmp')
await sh.run('greet() { echo "hello $1"; }')
const kept = await sh.run('pwd; greet agent')
console.log(kept.stdout) // "/tmp\nhello agent\n"
// #endregion shell
