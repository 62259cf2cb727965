// A bash over pipes held by a Node process of its own (pipe-shell-process.ts). The soak uses it
// as its memory reference (started with the agent's node flags, paced to one agent's runs); the
// streaming phase as its throughput reference, so the reference's reads (a string per read, a
// GiB of them) leave their garbage in that process's heap, not in the bench's.

import { join } from 'node:path'
import { LineProtocolChild } from './line-protocol-child.ts'

/** What one stream measured inside the process that read it. */
export interface StreamedBytes {
  /** Bytes of output read. */
  bytes: number
  /** Wall time from starting the command to reading its end, in ms. */
  ms: number
}

/** The reference process. */
export class PipeShellChild extends LineProtocolChild {
  /** Runs done so far, as the process last reported. */
  runs = 0

  /** Starts the process with `nodeFlags` (the soak passes the agent's). */
  constructor(nodeFlags: readonly string[] = []) {
    super(join(import.meta.dirname, 'pipe-shell-process.ts'), nodeFlags)
    this.onNotice('runs', ([total]) => {
      this.runs = Number(total)
    })
  }

  /** Queues `n` more runs. */
  run(n: number): void {
    if (n > 0) this.send(`run ${n}`)
  }

  /** Runs `head -c <bytes> /dev/zero` in the reference's bash. */
  async stream(bytes: number): Promise<StreamedBytes> {
    const [read, ms] = await this.request(`stream ${bytes}`, 'streamed')
    return { bytes: Number(read), ms: Number(ms) }
  }
}
