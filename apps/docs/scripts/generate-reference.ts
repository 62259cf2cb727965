// Writes the generated reference pages into src/content/docs/reference/generated/ (git-ignored)
// before `astro build`: the REST API from the protocol's OpenAPI document, the WebSocket frames
// from the frame JSON Schemas, and the errors page from `ErrorCode`, `ERROR_STATUS` and the
// hand-written ERROR_GUIDE. Run: node --conditions=source scripts/generate-reference.ts
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as protocol from '@conch/protocol'
import { renderErrorsPage } from './errors-page.ts'
import { cell, fieldRows, fieldTable, type JsonSchema } from './json-schema-table.ts'
import { readProtocolDocs, type SchemaDoc } from './protocol-docs.ts'

const {
  API_KEY_PREFIX,
  API_ROUTES,
  BEARER_SUBPROTOCOL_PREFIX,
  buildOpenApiDocument,
  ClientFrame,
  LIMITS,
  PROTOCOL_VERSION,
  SANDBOX_TOKEN_PREFIX,
  ServerFrame,
  SHELL_SUBPROTOCOL,
  ShellQuery,
} = protocol

const outDir = join(
  dirname(fileURLToPath(import.meta.url)),
  '..',
  'src',
  'content',
  'docs',
  'reference',
  'generated',
)
const docs = readProtocolDocs()

/** The exported name of every protocol schema, by identity, so a route's body can be named. */
const schemaNames = new Map<unknown, string>()
for (const [name, value] of Object.entries(protocol)) {
  if (value && typeof value === 'object' && 'safeParse' in value) schemaNames.set(value, name)
}

function frontmatter(title: string, slug: string, description: string): string {
  return `---\ntitle: ${JSON.stringify(title)}\nslug: ${slug}\ndescription: ${JSON.stringify(description)}\n---\n\n`
}

// ---------------------------------------------------------------- REST

interface Operation {
  operationId: string
  summary: string
  parameters: { name: string; in: 'path' | 'query'; required: boolean; schema: JsonSchema }[]
  requestBody?: { content: Record<string, { schema: JsonSchema }> }
  responses: Record<string, { content?: Record<string, { schema: JsonSchema }> }>
  security?: unknown[]
}

const GROUPS: { title: string; intro: string; test: (path: string) => boolean }[] = [
  {
    title: 'Health',
    intro: 'Unauthenticated probes for load balancers and process supervisors.',
    test: (p) => !p.startsWith('/v1'),
  },
  {
    title: 'Sessions',
    intro:
      'Each session is one long-lived bash in the sandbox. These routes drive it without a WebSocket; the shell socket is in the [WebSocket reference](/reference/websocket/).',
    test: (p) => p.includes('/sessions'),
  },
  {
    title: 'Processes',
    intro: 'Background processes run next to the shells and keep a byte-offset output log.',
    test: (p) => p.includes('/processes'),
  },
  {
    title: 'Terminals',
    intro:
      'Programs on a pseudo-terminal in the sandbox. Attach to one on its WebSocket, `/v1/sandboxes/:id/terminals/:terminalId/socket`; see the [Terminals guide](/guides/terminals/).',
    test: (p) => p.includes('/terminals'),
  },
  {
    title: 'Files',
    intro: 'Paths are absolute under `/workspace` or relative to it; nothing outside it is reachable.',
    test: (p) => p.includes('/files'),
  },
  {
    title: 'Sandboxes, tokens and exec',
    intro: 'Create and destroy sandboxes, mint sandbox-scoped tokens, and run one-off commands.',
    test: () => true,
  },
]

function paramTable(params: Operation['parameters'], where: 'path' | 'query', routeSchema: unknown): string {
  const rows = params.filter((p) => p.in === where)
  if (rows.length === 0) return ''
  const name = schemaNames.get(routeSchema) ?? null
  const own: SchemaDoc | undefined = name ? docs.get(name) : undefined
  const lines = [
    `**${where === 'path' ? 'Path' : 'Query'} parameters**\n`,
    '| Name | Type | Required | Description |',
    '| --- | --- | --- | --- |',
  ]
  for (const p of rows) {
    const doc = own?.fields.get(p.name)?.doc ?? ''
    lines.push(
      `| \`${p.name}\` | \`${cell(fieldRows({ properties: { x: p.schema } }, null, docs)[0]?.type ?? '')}\` | ${p.required ? 'yes' : 'no'} | ${cell(doc)} |`,
    )
  }
  return `${lines.join('\n')}\n\n`
}

function schemaSection(title: string, schema: JsonSchema | undefined, zodSchema: unknown): string {
  if (!schema) return ''
  const name = schemaNames.get(zodSchema) ?? null
  const summary = name ? docs.get(name)?.summary : undefined
  const rows = fieldRows(schema, name, docs)
  const heading = `**${title}**${name ? ` (\`${name}\`)` : ''}${summary ? `: ${summary}` : ''}\n\n`
  return rows.length ? `${heading}${fieldTable(rows)}\n` : `${heading}\`${JSON.stringify(schema)}\`\n\n`
}

function renderRestPage(): string {
  const doc = buildOpenApiDocument(String(PROTOCOL_VERSION)) as {
    paths: Record<string, Record<string, Operation>>
  }
  const routeById = new Map<string, protocol.ApiRoute>(API_ROUTES.map((r) => [r.operationId, r]))
  const sections = new Map<string, string[]>(GROUPS.map((g) => [g.title, []]))
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const route = routeById.get(op.operationId)
      if (!route) throw new Error(`operation ${op.operationId} has no route in API_ROUTES`)
      const group = GROUPS.find((g) => g.test(path))!
      let md = `### ${op.summary}\n\n\`\`\`http\n${method.toUpperCase()} ${path}\n\`\`\`\n\n`
      md += `Operation id \`${op.operationId}\`. ${op.security ? 'No authentication.' : 'Needs `Authorization: Bearer <API key or sandbox token>`.'}\n\n`
      md += paramTable(op.parameters, 'path', route.params)
      md += paramTable(op.parameters, 'query', route.query)
      if (op.requestBody) {
        const json = op.requestBody.content['application/json']
        if (json) md += schemaSection('Request body', json.schema, route.body)
        else md += `**Request body**: raw bytes (\`${Object.keys(op.requestBody.content)[0]}\`).\n\n`
      }
      const ok = op.responses['200']?.content ?? {}
      for (const [type, body] of Object.entries(ok)) {
        if (type === 'application/json') {
          md += schemaSection(
            route.produces ? 'Response with `?encoding=`' : 'Response `200`',
            body.schema,
            route.response,
          )
        } else if (type === 'application/x-ndjson') {
          md += `**Response \`200\`**: \`${type}\`, one [\`ExecEvent\`](#execevent) per line, until the process ends.\n\n`
        } else {
          md += `**Response \`200\`**: raw bytes (\`${type}\`).\n\n`
        }
      }
      sections.get(group.title)!.push(md)
    }
  }

  const execEvent = protocol.ExecEvent.toJSONSchema({ io: 'output' }) as {
    oneOf?: JsonSchema[]
    anyOf?: JsonSchema[]
  }
  let events = ''
  for (const variant of execEvent.oneOf ?? execEvent.anyOf ?? []) {
    const type = String(variant.properties?.type?.const)
    events += `#### \`${type}\`\n\n${fieldTable(fieldRows(variant, `ExecEvent.${type}`, docs))}\n`
  }

  let out = frontmatter(
    'REST API',
    'reference/rest-api',
    'Every route of the conch runner, generated from its OpenAPI document.',
  )
  out += `Generated from the runner's OpenAPI 3.1 document (\`buildOpenApiDocument\` in \`@conch/protocol\`, protocol version ${PROTOCOL_VERSION}). Every request and response is JSON unless a route says otherwise.\n\n`
  out += `- **Base URL**: the runner's address, for example \`http://127.0.0.1:7878\`.\n`
  out += `- **Auth**: \`Authorization: Bearer <secret>\`, where the secret is the runner's API key (\`${API_KEY_PREFIX}…\`) or a sandbox-scoped token (\`${SANDBOX_TOKEN_PREFIX}…\`) that works only for its sandbox's routes.\n`
  out += `- **Errors**: every non-2xx answer has the body \`{ "error": { "code", "message", "details"? } }\`; the codes, their statuses and the fields of \`details\` per code are on the [errors page](/reference/errors/).\n`
  out += `- **Timeouts**: \`timeoutMs\` values are clamped between ${LIMITS.minCommandTimeoutMs} ms and the runner's maximum (default ${LIMITS.maxCommandTimeoutMs} ms).\n\n`
  for (const group of GROUPS.slice().reverse()) {
    const items = sections.get(group.title) ?? []
    if (items.length === 0) continue
    out += `## ${group.title}\n\n${group.intro}\n\n${items.join('')}`
  }
  out += `## ExecEvent\n\nOne line of a streamed exec (\`stream: true\`) or of a process stream, as NDJSON.\n\n${events}`
  return out
}

// ---------------------------------------------------------------- WebSocket

/** A frame in the example exchange; the script fails when an example does not parse. */
const EXCHANGE: { from: 'client' | 'runner'; note: string; frame: Record<string, unknown> }[] = [
  {
    from: 'client',
    note: 'optional; announces what the client speaks',
    frame: {
      type: 'hello',
      protocolVersion: PROTOCOL_VERSION,
      capabilities: ['shell', 'reattach', 'interrupt'],
    },
  },
  {
    from: 'runner',
    note: 'always first',
    frame: {
      type: 'hello',
      protocolVersion: PROTOCOL_VERSION,
      capabilities: ['shell', 'reattach', 'interrupt', 'stdin', 'base64', 'heartbeat', 'pipelining'],
    },
  },
  {
    from: 'runner',
    note: 'attached to session "default"',
    frame: { type: 'shell_ready', sessionId: 'default', offset: 0, encoding: 'utf8', running: null },
  },
  {
    from: 'runner',
    note: 'nothing to replay on a new attachment',
    frame: { type: 'scrollback_end', offset: 0 },
  },
  {
    from: 'client',
    note: 'state persists in this bash',
    frame: { type: 'shell_run', id: 'r1', command: 'cd /tmp && export GREETING=hi' },
  },
  { from: 'runner', note: '', frame: { type: 'shell_start', id: 'r1', offset: 0 } },
  {
    from: 'runner',
    note: 'no output, exit code 0',
    frame: { type: 'shell_exit', id: 'r1', code: 0, timedOut: false, durationMs: 0.4, offset: 0 },
  },
  {
    from: 'client',
    note: 'pipelined: sent without waiting',
    frame: { type: 'shell_run', id: 'r2', command: 'echo $GREETING from $(pwd); ls /nope' },
  },
  { from: 'runner', note: '', frame: { type: 'shell_start', id: 'r2', offset: 0 } },
  {
    from: 'runner',
    note: '13 bytes at offsets 0–12',
    frame: { type: 'shell_out', id: 'r2', data: 'hi from /tmp\n', offset: 0 },
  },
  {
    from: 'runner',
    note: 'stderr shares the offset space',
    frame: {
      type: 'shell_err',
      id: 'r2',
      data: "ls: cannot access '/nope': No such file or directory\n",
      offset: 13,
    },
  },
  {
    from: 'runner',
    note: '',
    frame: { type: 'shell_exit', id: 'r2', code: 2, timedOut: false, durationMs: 1.9, offset: 66 },
  },
  { from: 'client', note: '', frame: { type: 'shell_run', id: 'r3', command: 'sleep 100', timeoutMs: 2000 } },
  { from: 'runner', note: '', frame: { type: 'shell_start', id: 'r3', offset: 66 } },
  {
    from: 'runner',
    note: 'stopped by SIGINT: 128 + 2',
    frame: { type: 'shell_exit', id: 'r3', code: 130, timedOut: true, durationMs: 2003.1, offset: 66 },
  },
  { from: 'client', note: '', frame: { type: 'shell_run', id: 'r4', command: 'exit 7' } },
  { from: 'runner', note: '', frame: { type: 'shell_start', id: 'r4', offset: 66 } },
  {
    from: 'runner',
    note: 'the shell is gone; later runs fail with SHELL_CLOSED',
    frame: { type: 'shell_closed', code: 7, signal: null, reason: 'exit 7' },
  },
]

function checkExchange(): void {
  for (const { from, frame } of EXCHANGE) {
    const result = (from === 'client' ? ClientFrame : ServerFrame).safeParse(frame)
    if (!result.success) throw new Error(`example ${from} frame does not parse: ${JSON.stringify(frame)}`)
  }
}

function framesOf(schema: { oneOf?: JsonSchema[]; anyOf?: JsonSchema[] }): JsonSchema[] {
  return schema.oneOf ?? schema.anyOf ?? []
}

/** The exported frame schema whose `type` literal is `type`, on the given side. */
function frameSchemaName(side: 'Client' | 'Server', type: string): string | null {
  const union = side === 'Client' ? ClientFrame : ServerFrame
  for (const option of union.options) {
    if (option.shape.type.value === type) return schemaNames.get(option) ?? null
  }
  return null
}

function renderFrames(side: 'Client' | 'Server'): string {
  const json = (side === 'Client' ? ClientFrame : ServerFrame).toJSONSchema({
    io: side === 'Client' ? 'input' : 'output',
  }) as { oneOf?: JsonSchema[]; anyOf?: JsonSchema[] }
  let md = ''
  for (const frame of framesOf(json)) {
    const type = String(frame.properties?.type?.const)
    const name = frameSchemaName(side, type)
    const summary = name ? (docs.get(name)?.summary ?? '') : ''
    const rows = fieldRows(frame, name, docs).filter((r) => r.path !== 'type')
    md += `### \`${type}\`${side === 'Client' ? ' (client)' : ''}\n\n${summary}\n\n`
    md += rows.length ? fieldTable(rows) : 'No fields besides `type`.\n'
    md += '\n'
  }
  return md
}

function renderWebSocketPage(): string {
  checkExchange()
  const query = fieldRows(ShellQuery.toJSONSchema({ io: 'input' }) as JsonSchema, 'ShellQuery', docs)
  let out = frontmatter(
    'WebSocket frames',
    'reference/websocket',
    'The shell WebSocket: connection, every client and runner frame, and an example exchange.',
  )
  out += `Generated from the frame JSON Schemas in \`@conch/protocol\` (protocol version ${PROTOCOL_VERSION}). The SDK speaks this for you; read this page to write a client in another language or to debug one.\n\n`
  out += `## Connecting\n\n\`\`\`http\nGET /v1/sandboxes/{id}/shell?sessionId=default&offset=0&encoding=utf8\n\`\`\`\n\n`
  out += `Every frame is one JSON text message, discriminated on \`type\`. Send the credential as \`Authorization: Bearer <secret>\`, or, from a browser (which cannot set headers on a WebSocket), as the subprotocol \`${BEARER_SUBPROTOCOL_PREFIX}<secret>\` next to \`${SHELL_SUBPROTOCOL}\`. The runner answers with \`${SHELL_SUBPROTOCOL}\` and never echoes the secret.\n\n`
  out += `**Query parameters**\n\n${fieldTable(query)}\n`
  out += `On connect the runner sends \`hello\`, then \`shell_ready\`, then any replayed output from \`offset\`, then \`scrollback_end\`, then live frames. Without \`sessionId\` the runner creates a new session and names it in \`shell_ready\`; with a \`sessionId\` that does not exist yet, it creates the session under that id.\n\n`
  out += `## Example exchange\n\nEach line is one message; \`→\` is client to runner, \`←\` runner to client. Every frame below is parsed against the schema when the docs are built.\n\n`
  out += '```text\n'
  for (const { from, note, frame } of EXCHANGE) {
    out += `${from === 'client' ? '→' : '←'} ${JSON.stringify(frame)}${note ? `   # ${note}` : ''}\n`
  }
  out += '```\n\n'
  out += `Runs on one shell execute one at a time in arrival order, so a client may send several \`shell_run\` frames without waiting. Each run yields exactly one terminal frame: \`shell_exit\` for its id, or an \`error\` naming its id, or \`shell_closed\` for the whole shell.\n\n`
  out += `## Offsets\n\nEvery session has one output log. Each byte of stdout or stderr gets the next offset, and \`shell_out\`/\`shell_err\` carry the offset of their first byte (in bytes of the original output, also with \`encoding=utf8\`). A client that has seen everything before offset *n* reconnects with \`?offset=n\` and misses nothing. \`shell_start\` and \`shell_exit\` sit at an offset too, so a replay may repeat one at the boundary; treat them idempotently by run id. An offset older than the scrollback gets \`error { code: "OUTPUT_LOST", details: { earliestOffset } }\`. See [reattach and byte offsets](/concepts/reattach/).\n\n`
  out += `## Client frames\n\n${renderFrames('Client')}`
  out += `## Runner frames\n\n${renderFrames('Server')}`
  out += `## Heartbeats\n\nEither side may send \`ping\`; the other answers \`pong\` with the same \`t\`. The runner pings every ${LIMITS.heartbeatIntervalMs / 1000} s and closes a socket that stops answering. A dropped socket never stops the shell or its run.\n`
  return out
}

// ---------------------------------------------------------------- write

rmSync(outDir, { recursive: true, force: true })
mkdirSync(outDir, { recursive: true })
const pages: [string, string][] = [
  ['rest-api.md', renderRestPage()],
  ['websocket.md', renderWebSocketPage()],
  ['errors.md', renderErrorsPage()],
]
for (const [file, text] of pages) writeFileSync(join(outDir, file), text)
console.log(`generated ${pages.length} reference pages`)
