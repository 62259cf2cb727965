import { Sandbox } from '@conch/sdk'

await using sb = await Sandbox.create({
  url: process.env.CONCH_URL ?? 'http://127.0.0.1:7878',
  apiKey: process.env.CONCH_API_KEY,
})

// #region setup
await sb.files.write(
  '/workspace/app/package.json',
  JSON.stringify({ scripts: { build: 'echo built', test: 'echo tests passed', lint: 'echo lint clean' } }),
)
// #endregion setup

// #region create
// Three bash processes in one sandbox: they share files and processes, not cwd or env.
const build = await sb.createSession({ id: 'build', cwd: '/workspace/app', env: { NODE_ENV: 'production' } })
const test = await sb.createSession({ id: 'test', cwd: '/workspace/app', commandTimeoutMs: 300_000 })
const app = await sb.createSession({ id: 'app', cwd: '/workspace/app' })
// #endregion create

// #region use
await build.exec('npm run build')
const [unit, lint] = await Promise.all([
  test.exec('npm test'), // runs in parallel with...
  sb.exec('npm run lint', { sessionId: 'build' }), // ...this, which queues behind nothing in "build"
])
console.log(unit.exitCode, lint.exitCode)
// #endregion use

// #region state
const sh = await sb.reattachShell('app')
await sh.env.set('PORT', '8080')
await sh.aliases.add('ll', 'ls -la')
const gitCommands = await sh.history({ contains: 'git' })
console.log(gitCommands)
// #endregion state

// #region list
for (const s of await sb.listSessions()) console.log(s.id, s.status, s.cwd, s.running)
await sb.deleteSession('test')
// #endregion list

void app
