// Tools on a sandbox's ports: which servers listen inside it, and a URL that opens one in a
// browser through the runner (the sandbox itself has no network).
import { z } from 'zod'
import { defineTool } from './conch-tool.ts'
import { sandboxArg } from './tool-arguments.ts'

/** port_list: the listening TCP ports. */
export const portList = defineTool({
  name: 'port_list',
  title: 'List listening ports',
  description: 'Lists the TCP ports servers listen on inside the sandbox.',
  input: { sandbox: sandboxArg },
  hints: { readOnly: true },
  async execute(args, context) {
    const ports = await (await context.client.sandbox(args.sandbox)).ports()
    const text =
      ports.length === 0
        ? 'nothing listens'
        : ports.map((p) => `${p.port}\t${p.address}\t${p.family}`).join('\n')
    return { text, structured: { ports } }
  },
})

/** port_expose: a browser URL for a port. */
export const portExpose = defineTool({
  name: 'port_expose',
  title: 'Expose a port',
  description:
    'Returns a URL that opens a port of the sandbox (a dev server on 127.0.0.1) in a browser, through the runner, with a token for that port only. Start the server first, e.g. with process_start.',
  input: {
    sandbox: sandboxArg,
    port: z.number().int().min(1).max(65_535).describe('The port the server listens on inside the sandbox.'),
  },
  hints: { idempotent: true },
  async execute(args, context) {
    const exposed = await (await context.client.sandbox(args.sandbox)).exposePort(args.port)
    return {
      text: `${exposed.url} (until ${new Date(exposed.expiresAt).toISOString()})`,
      structured: { url: exposed.url, expiresAt: exposed.expiresAt },
    }
  },
})
