// #region hello
import { Sandbox } from '@conch/sdk'

// #region create
// `await using`: the sandbox is destroyed when this scope ends.
await using sb = await Sandbox.create({
  url: process.env.CONCH_URL ?? 'http://127.0.0.1:7878',
  apiKey: process.env.CONCH_API_KEY,
})
// #endregion create

// #region run
await using sh = await sb.shell()
await sh.run('cd /tmp && export GREETING=hi')
const { stdout, exitCode } = await sh.run('echo $GREETING from $(pwd)')
console.log(JSON.stringify(stdout), exitCode) // "hi from /tmp\n" 0
// #endregion run
// #endregion hello

// #region failing
const failed = await sh.run('ls /nope')
console.log(failed.exitCode, failed.stderr) // 2 "ls: cannot access '/nope': No such file or directory\n"
// #endregion failing

// #region stream
for await (const ev of sh.stream('for i in 1 2 3; do echo step $i; sleep 0.2; done')) {
  if (ev.type === 'stdout') process.stdout.write(ev.data)
  else if (ev.type === 'stderr') process.stderr.write(ev.data)
  else if (ev.type === 'exit') console.log('exit code', ev.exitCode)
}
// #endregion stream
