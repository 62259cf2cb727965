// The streaming phase's product client in a process of its own (stream-client-process.ts).

import { join } from 'node:path'
import { LineProtocolChild } from './line-protocol-child.ts'
import type { StreamedBytes } from './pipe-shell-child.ts'

/** What one stream through `shell.stream` measured in the client's process. */
export interface ClientStream extends StreamedBytes {
  /** CPU the client process used while it streamed, in ms. */
  cpuMs: number
}

/** Where the client connects and how much it streams. */
export interface StreamClientOptions {
  url: string
  apiKey: string
  sandboxId: string
  /** Bytes each measured stream carries. */
  bytes: number
  /** Bytes of the one stream it runs before it says it is ready. */
  warmupBytes: number
}

/** An SDK client streaming from one sandbox. */
export class StreamClientChild extends LineProtocolChild {
  constructor(options: StreamClientOptions) {
    super(join(import.meta.dirname, 'stream-client-process.ts'), [], [JSON.stringify(options)])
  }

  /** Streams once and reports it. */
  async stream(): Promise<ClientStream> {
    const [bytes, ms, cpuMs] = await this.request('go', 'streamed')
    return { bytes: Number(bytes), ms: Number(ms), cpuMs: Number(cpuMs) }
  }
}
