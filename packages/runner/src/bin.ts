#!/usr/bin/env node
// `conch`, the command: checks the Node version, then loads the CLI (main.ts). The check comes
// first and imports nothing, because the CLI's own imports (node:sqlite) fail on an older Node
// with an error that does not say what to do.

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
await import('./main.ts')
