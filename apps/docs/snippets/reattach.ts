import { Sandbox } from '@conch/sdk'

const opts = {
  url: process.env.CONCH_URL ?? 'http://127.0.0.1:7878',
  apiKey: process.env.CONCH_API_KEY,
}

// #region first
// Process A: start a long build in a named session, and keep its ids.
const sb = await Sandbox.create(opts)
await sb.createSession({ id: 'build' })
const shell = await sb.reattachShell('build')
const build = shell.run('for i in $(seq 1 10); do echo "compiling $i"; sleep 0.5; done', {
  onStdout: (chunk) => process.stdout.write(chunk),
})
console.log(`sandbox ${sb.id}, session ${shell.sessionId}`)
// From here on, process A may exit or crash: the build keeps running in the sandbox.
// #endregion first
void build

// #region second
// Process B, on any machine that can reach the runner: attach by id.
const again = await Sandbox.connect(sb.id, opts)
const sh = await again.reattachShell('build')
const after = await sh.run('echo "build finished with $?"') // queues behind the build
console.log(after.stdout)
// #endregion second

await again.destroy()
