#!/usr/bin/env node
// `conch`, the command: checks the Node version, starts `conch runner` again with the runner's
// node flags when it was started without them, then loads the CLI (main.ts). The check comes
// first and imports nothing but the flags (a file of constants), because the CLI's own imports
// (node:sqlite) fail on an older Node with an error that does not say what to do.
import { runnerRelaunch } from './runner-node-flags.ts'

/** The oldest Node the runner runs on: the first 22.x with node:sqlite unflagged. */
const MINIMUM_NODE = [22, 13, 0] as const

const current = process.versions.node.split('.').map(Number)
const tooOld = MINIMUM_NODE.findIndex((want, i) => (current[i] ?? 0) !== want)
if (tooOld !== -1 && (current[tooOld] ?? 0) < MINIMUM_NODE[tooOld]!) {
  process.stderr.write(
    `conch: this runner needs Node.js ${MINIMUM_NODE.join('.')} or newer, and this is ${process.version} (${process.execPath}); install Node 22 LTS or 24 LTS and run it again\n`,
  )
  process.exit(1)
}
// Node 22 marks node:sqlite experimental and says so on every start; the runner pins its use.
const emitWarning = process.emitWarning.bind(process)
process.emitWarning = ((warning: string | Error, ...rest: never[]) => {
  if (String(warning).startsWith('SQLite is an experimental feature')) return
  emitWarning(warning, ...rest)
}) as typeof process.emitWarning
// V8 sizes its heap at start, so the runner's flags (RUNNER_NODE_FLAGS) must be on Node's command
// line, and glibc reads its malloc settings (RUNNER_MALLOC_TUNABLES) from the environment at
// start; a shebang cannot carry them everywhere (`env -S` is missing from busybox and older
// coreutils). execve keeps the pid (the state dir's lock, systemd and the image's entrypoint
// watch it) and costs one more Node start, only for the long-lived `runner` command. A Node
// without process.execve (22.13, 22.14) runs the runner without either.
const [command, ...rest] = process.argv.slice(2)
if (command === 'runner' && !rest.includes('--help') && !rest.includes('-h') && process.execve) {
  const again = runnerRelaunch(process.execPath, process.execArgv, process.argv, process.env)
  if (again) process.execve(process.execPath, again.argv, again.env)
}
await import('./main.ts')
// A long-lived runner gives back what a burst of work grew once it has gone quiet.
if (command === 'runner') (await import('@conch/protocol/idle-memory-release')).watchIdleMemory()
