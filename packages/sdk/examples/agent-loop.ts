// The classic agent loop, for real: set up a small git repository in a sandbox, `cd` into it
// once, then walk its files running a checker and applying a fix where the checker complains,
// committing each fix. Every command runs in the same bash, so the `cd` and the git identity
// stick; each line printed shows how long the command took end to end.
//
//   CONCH_URL=http://127.0.0.1:7878 CONCH_API_KEY=conch_... node examples/agent-loop.ts

import { type CommandResult, Sandbox, type Shell } from '@conch/sdk'

const url = process.env.CONCH_URL
const apiKey = process.env.CONCH_API_KEY
if (!url || !apiKey) {
  console.error('set CONCH_URL and CONCH_API_KEY to a running conch runner')
  process.exit(2)
}

/** Quotes a value for bash. */
const quote = (value: string): string => `'${value.replaceAll("'", `'\\''`)}'`

const timings: number[] = []

/** Runs a command, prints its wall time and exit code, and returns its result. */
async function step(sh: Shell, command: string): Promise<CommandResult> {
  const started = performance.now()
  const result = await sh.run(command)
  const ms = performance.now() - started
  timings.push(ms)
  const label = command.split('\n')[0]?.slice(0, 60)
  console.log(`${ms.toFixed(2).padStart(8)} ms  exit ${String(result.exitCode).padStart(3)}  ${label}`)
  return result
}

/** Fails the example with the command's output when it did not succeed. */
function expectOk(result: CommandResult, what: string): void {
  if (result.exitCode !== 0) throw new Error(`${what} failed (exit ${result.exitCode}): ${result.stderr}`)
}

// Files with trailing whitespace: the "bug" this agent knows how to fix.
const FILES: Record<string, string> = {
  'README.md': '# demo   \n\nA tiny project.\t\n',
  'src/main.sh': '#!/bin/sh\necho "hello"  \n',
  'src/util.sh': 'greet() {\n  echo "hi $1"\n}\n',
  'docs/notes.txt': 'first line \nsecond line\nthird line    \n',
}
const CHECK = (file: string) => `grep -n '[[:space:]]$' ${quote(file)}`
const FIX = (file: string) => `sed -i 's/[[:space:]]*$//' ${quote(file)}`

await using sb = await Sandbox.create({ url, apiKey })
await using sh = await sb.shell()
console.log(`sandbox ${sb.id}, shell ${sh.sessionId}`)

// Set up the repository with the shell, then write the files through the files API.
expectOk(await step(sh, 'rm -rf demo && mkdir -p demo && cd demo && git init -q'), 'git init')
expectOk(
  await step(sh, 'git config user.email agent@example.com && git config user.name agent'),
  'git config',
)
// The files API takes paths relative to the workspace, where the shell started.
for (const [path, content] of Object.entries(FILES)) await sb.files.write(`demo/${path}`, content)
expectOk(await step(sh, 'git add -A && git commit -qm "initial import"'), 'initial commit')

// The loop: check each tracked file, fix it when the checker finds something, verify, commit.
const files = (await step(sh, 'git ls-files')).stdout.split('\n').filter(Boolean)
let fixed = 0
for (const file of files) {
  const check = await step(sh, CHECK(file))
  if (check.exitCode === 1) continue // grep found nothing: the file is clean
  expectOk(check, `checking ${file}`)
  expectOk(await step(sh, FIX(file)), `fixing ${file}`)
  const recheck = await step(sh, CHECK(file))
  if (recheck.exitCode !== 1) throw new Error(`the fix did not fix ${file}: ${recheck.stdout}`)
  expectOk(
    await step(sh, `git commit -qam ${quote(`fix trailing whitespace in ${file}`)}`),
    `committing ${file}`,
  )
  fixed++
}

// Final verification, pipelined: every check is on the wire at once and runs in order.
const started = performance.now()
const finals = await Promise.all(files.map((file) => sh.run(CHECK(file))))
console.log(`${(performance.now() - started).toFixed(2).padStart(8)} ms  ${files.length} checks, pipelined`)
if (finals.some((r) => r.exitCode !== 1)) throw new Error('some files still have trailing whitespace')

const log = await step(sh, 'git log --oneline | wc -l && git status --porcelain | wc -l')
const [commits, dirty] = log.stdout.trim().split('\n').map(Number)
if (commits !== fixed + 1 || dirty !== 0) throw new Error(`unexpected repository state: ${log.stdout}`)

const sorted = [...timings].sort((a, b) => a - b)
const p50 = sorted[Math.floor(sorted.length / 2)] ?? 0
console.log(
  `fixed ${fixed} of ${files.length} files in ${timings.length} commands; p50 ${p50.toFixed(2)} ms per command`,
)
