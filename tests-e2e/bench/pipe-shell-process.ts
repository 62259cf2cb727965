// The soak benchmark's memory reference: a bare Node process that holds one bash over pipes
// (`PipeShell`), started the way drivers start the agent (same Node, same node flags, same
// `--conditions=source`), so its RSS is what a process doing nothing but owning a shell costs.
// Protocol on stdio: it prints `ready` once bash answered; each `run` line on stdin makes it
// run `echo` in a loop until the next `stop` line, printing `runs <n>` every 200 ms and after
// stopping; stdin closing ends it.

import { createInterface } from 'node:readline'
import { PipeShell } from './pipe-shell.ts'

const shell = new PipeShell()
await shell.run('true')
process.stdout.write('ready\n')

let runs = 0
let running = false
let loop: Promise<void> = Promise.resolve()
const report = (): void => {
  process.stdout.write(`runs ${runs}\n`)
}

const lines = createInterface({ input: process.stdin })
lines.on('line', (line) => {
  if (line === 'run' && !running) {
    running = true
    const timer = setInterval(report, 200)
    loop = (async () => {
      while (running) {
        const code = await shell.run(`echo ref-${runs}`)
        if (code !== 0) throw new Error(`reference run ${runs} exited with ${code}`)
        runs += 1
      }
      clearInterval(timer)
      report()
    })()
  } else if (line === 'stop') {
    running = false
  }
})
lines.on('close', () => {
  running = false
  void loop.finally(() => shell[Symbol.asyncDispose]())
})
