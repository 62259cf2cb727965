// The soak benchmark's memory reference: a bare Node process that holds one bash over pipes
// (`PipeShell`), started the way drivers start the agent (same Node, same node flags, same
// `--conditions=source`), so its RSS is what a process doing nothing but owning a shell costs.
// Protocol on stdio: it prints `ready` once bash answered; a `run <n>` line on stdin queues n
// more `echo` runs, and it prints `runs <total>` after each batch; stdin closing ends it. The
// soak paces it to the runs one agent does, so both are compared at the same count.

import { createInterface } from 'node:readline'
import { PipeShell } from './pipe-shell.ts'

const shell = new PipeShell()
await shell.run('true')
process.stdout.write('ready\n')

let runs = 0
let queued = 0
let loop: Promise<void> | null = null

async function drain(): Promise<void> {
  while (queued > 0) {
    queued -= 1
    const code = await shell.run(`echo ref-${runs}`)
    if (code !== 0) throw new Error(`reference run ${runs} exited with ${code}`)
    runs += 1
  }
  process.stdout.write(`runs ${runs}\n`)
  loop = null
}

const lines = createInterface({ input: process.stdin })
lines.on('line', (line) => {
  const match = /^run (\d+)$/.exec(line)
  if (match === null) return
  queued += Number(match[1])
  loop ??= drain()
})
lines.on('close', () => {
  queued = 0
  void (loop ?? Promise.resolve()).finally(() => shell[Symbol.asyncDispose]())
})
