import { Sandbox } from '@conch/sdk'

await using sb = await Sandbox.create({
  url: process.env.CONCH_URL ?? 'http://127.0.0.1:7878',
  apiKey: process.env.CONCH_API_KEY,
})

// #region start
await sb.files.write(
  '/workspace/server.js',
  "require('http').createServer((q, s) => s.end('ok\\n')).listen(8080, () => console.log('listening'))",
)
const server = await sb.startProcess('node server.js', { cwd: '/workspace', env: { PORT: '8080' } })
// #endregion start

// #region probe
await using sh = await sb.shell()
const probe = await sh.run('for i in $(seq 50); do curl -fsS localhost:8080 && break; sleep 0.1; done')
console.log(probe.stdout) // "ok\n"
const { stdout } = await server.output()
console.log(stdout) // "listening\n"
// #endregion probe

// #region stop
console.log(await sb.listProcesses())
await server.kill() // SIGTERM to the process tree, SIGKILL after 3 s
console.log(await server.wait())
// #endregion stop
