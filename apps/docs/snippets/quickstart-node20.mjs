// quickstart.mjs: the quickstart for Node 20 and 22, which cannot run .ts files or `await using`.
import { Sandbox } from '@conch/sdk'

const sb = await Sandbox.create({
  url: process.env.CONCH_URL ?? 'http://127.0.0.1:7878',
  apiKey: process.env.CONCH_API_KEY,
})
try {
  const sh = await sb.shell()
  await sh.run('cd /tmp && export GREETING=hi')
  const { stdout, exitCode } = await sh.run('echo $GREETING from $(pwd)')
  console.log(JSON.stringify(stdout), exitCode) // "hi from /tmp\n" 0

  const failed = await sh.run('ls /nope')
  console.log(failed.exitCode, failed.stderr) // 2 "ls: cannot access '/nope': No such file or directory\n"

  for await (const ev of sh.stream('for i in 1 2 3; do echo step $i; sleep 0.2; done')) {
    if (ev.type === 'stdout') process.stdout.write(ev.data)
    else if (ev.type === 'stderr') process.stderr.write(ev.data)
    else if (ev.type === 'exit') console.log('exit code', ev.exitCode)
  }
  sh.close()
} finally {
  await sb.destroy()
}
