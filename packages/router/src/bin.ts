#!/usr/bin/env node
// `conch-router`, the command: checks the Node version, then loads the CLI (main.ts). The check
// comes first and imports nothing, so an older Node gets a message that says what to install
// instead of a syntax or module error from deep inside a dependency.

/** The oldest Node the router runs on: the runner's minimum, since both ship in one image and one release. */
const MINIMUM_NODE = [22, 13, 0] as const

const current = process.versions.node.split('.').map(Number)
const tooOld = MINIMUM_NODE.findIndex((want, i) => (current[i] ?? 0) !== want)
if (tooOld !== -1 && (current[tooOld] ?? 0) < MINIMUM_NODE[tooOld]!) {
  process.stderr.write(
    `conch-router: this router needs Node.js ${MINIMUM_NODE.join('.')} or newer, and this is ${process.version} (${process.execPath}); install Node 22 LTS or 24 LTS and run it again\n`,
  )
  process.exit(1)
}
await import('./main.ts')
