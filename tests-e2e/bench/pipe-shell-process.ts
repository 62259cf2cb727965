// A bare Node process that holds one bash over pipes (`PipeShell`), driven by the bench through
// pipe-shell-child.ts. The soak's memory reference: started the way drivers start the agent
// (same Node, same node flags, same `--conditions=source`), so its RSS is what a process doing
// nothing but owning a shell costs. The streaming phase's throughput reference: started with
// Node's defaults, so it reads as a plain Node client would.
// Protocol on stdio: it prints `ready` once bash answered; a `run <n>` line on stdin queues n
// more `echo` runs, and it prints `runs <total>` after each batch (the soak paces it to the runs
// one agent does, so both are compared at the same count); a `stream <bytes>` line runs
// `head -c <bytes> /dev/zero` behind them and prints `streamed <bytes read> <ms>`; stdin
// closing ends it.

import { createInterface } from 'node:readline'
import { PipeShell } from './pipe-shell.ts'

const shell = new PipeShell()
await shell.run('true')
process.stdout.write('ready\n')

let runs = 0
/** The requests in order: each starts when the one before it is done. */
let turn: Promise<void> = Promise.resolve()

async function runBatch(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const code = await shell.run(`echo ref-${runs}`)
    if (code !== 0) throw new Error(`reference run ${runs} exited with ${code}`)
    runs += 1
  }
  process.stdout.write(`runs ${runs}\n`)
}

async function streamOnce(bytes: number): Promise<void> {
  const before = shell.bytesOut
  const start = performance.now()
  const code = await shell.run(`head -c ${bytes} /dev/zero`)
  const ms = performance.now() - start
  if (code !== 0) throw new Error(`head -c ${bytes} exited with ${code}`)
  process.stdout.write(`streamed ${shell.bytesOut - before} ${ms}\n`)
}

const lines = createInterface({ input: process.stdin })
lines.on('line', (line) => {
  const match = /^(run|stream) (\d+)$/.exec(line)
  if (match === null) return
  const n = Number(match[2])
  turn = turn.then(() => (match[1] === 'run' ? runBatch(n) : streamOnce(n)))
})
lines.on('close', () => {
  void turn.finally(() => shell[Symbol.asyncDispose]())
})
