// Generates src/wire-schemas.ts: the JSON Schema of every runner answer and server frame the
// SDK reads, made from the protocol's own zod schemas with `z.toJSONSchema`, so the SDK checks
// untrusted input exactly as the protocol defines it without shipping zod. Run it with
// `pnpm --filter @conch/sdk generate` after changing a schema; a test fails while the file is
// stale. Fields a newer runner may grow additively (error codes, capabilities) are opened to
// any string, so an older SDK keeps reading them.
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  AccessToken,
  AliasMap,
  EnvMap,
  EnvValue,
  ERROR_DETAILS,
  ERROR_SUGGESTIONS,
  ErrorBody,
  ExecEvent,
  ExposedPort,
  FileInfo,
  FileList,
  HistoryList,
  Ok,
  PortEvent,
  PortList,
  ProcessInfo,
  ProcessList,
  ProcessOutput,
  RunResult,
  SandboxInfo,
  SandboxList,
  ServerFrame,
  SessionInfo,
  SessionList,
  SnapshotInfo,
  SnapshotList,
  TerminalInfo,
  TerminalList,
} from '@conch/protocol'
import { compactSchema, compactSchemasByType, type Json } from '@conch/protocol/checker-json-schema'
import { z } from 'zod'

/** The REST answers the SDK reads, by the name the SDK's shapes use. */
const REST = {
  errorBody: ErrorBody,
  ok: Ok,
  sandboxInfo: SandboxInfo,
  sandboxList: SandboxList,
  accessToken: AccessToken,
  runResult: RunResult,
  sessionInfo: SessionInfo,
  sessionList: SessionList,
  envMap: EnvMap,
  envValue: EnvValue,
  aliasMap: AliasMap,
  historyList: HistoryList,
  processInfo: ProcessInfo,
  processList: ProcessList,
  processOutput: ProcessOutput,
  fileInfo: FileInfo,
  fileList: FileList,
  snapshotInfo: SnapshotInfo,
  snapshotList: SnapshotList,
  portList: PortList,
  exposedPort: ExposedPort,
  portEvent: PortEvent,
  terminalInfo: TerminalInfo,
  terminalList: TerminalList,
} satisfies Record<string, z.ZodType>

/** Sets the schema at `keys` inside `schema` to any string (an open, additively growing field). */
function open(schema: Json, keys: string[], to: Json): void {
  let node = schema
  for (const key of keys.slice(0, -1)) {
    if (node === null || typeof node !== 'object' || Array.isArray(node))
      throw new Error(`no ${keys.join('.')}`)
    node = node[key] as Json
  }
  const last = keys.at(-1)
  if (
    node === null ||
    typeof node !== 'object' ||
    Array.isArray(node) ||
    last === undefined ||
    !(last in node)
  )
    throw new Error(`no ${keys.join('.')}`)
  node[last] = to
}

const anyString: Json = { type: 'string' }

/** The schema as zod outputs it, which is what a runner sends. */
function toJson(schema: z.ZodType): Json {
  return z.toJSONSchema(schema, { io: 'output', unrepresentable: 'throw' }) as Json
}

/** The checker's compact JSON Schema of one zod schema. */
function jsonSchema(schema: z.ZodType, path: string): Json {
  return compactSchema(toJson(schema), path)
}

/** Object schemas of a discriminated union, keyed by their `type` constant. */
function byType(schema: z.ZodType, path: string): { [type: string]: Json } {
  return compactSchemasByType(toJson(schema), path)
}

/** The four tables of the generated module. */
interface WireSchemas {
  rest: { [name: string]: Json }
  exec: { [type: string]: Json }
  frames: { [type: string]: Json }
  details: { [code: string]: Json }
}

/** Builds the tables from the protocol's schemas. */
export function wireSchemas(): WireSchemas {
  const rest: { [name: string]: Json } = {}
  for (const [name, schema] of Object.entries(REST)) rest[name] = jsonSchema(schema, name)
  open(rest.errorBody as Json, ['properties', 'error', 'properties', 'code'], anyString)
  const exec = byType(ExecEvent, 'ExecEvent')
  open(exec.error as Json, ['properties', 'code'], anyString)
  const frames = byType(ServerFrame, 'ServerFrame')
  open(frames.hello as Json, ['properties', 'capabilities', 'items'], anyString)
  open(frames.error as Json, ['properties', 'code'], anyString)
  const details: { [code: string]: Json } = {}
  for (const [code, schema] of Object.entries(ERROR_DETAILS))
    details[code] = jsonSchema(schema, `details.${code}`)
  return { rest, exec, frames, details }
}

/** The generated module's text (before formatting). */
function generateWireSchemas(): string {
  const { rest, exec, frames, details } = wireSchemas()
  // Compact JSON in a string: smaller in the bundle than an object literal, and parsed once.
  const table = (value: { [name: string]: Json }) =>
    `{ ${Object.keys(value)
      .map((k) => `readonly ${k}: JsonSchema`)
      .join('; ')} } = JSON.parse(${JSON.stringify(JSON.stringify(value))})`
  // Many codes share a form (no facts, a path, a limit): the table names each form once.
  const forms: Json[] = []
  let formOf = ''
  for (const code of Object.keys(ERROR_SUGGESTIONS)) {
    const schema = details[code]
    if (schema === undefined) throw new Error(`no details schema for ${code}`)
    const text = JSON.stringify(schema)
    let index = forms.findIndex((f) => JSON.stringify(f) === text)
    if (index < 0) index = forms.push(schema) - 1
    if (index >= 36) throw new Error('more than 36 forms of error details: widen FORM_OF')
    formOf += index.toString(36)
  }
  return [
    "// Generated by scripts/generate-wire-schemas.ts from the protocol's zod schemas; do not edit.",
    '// JSON Schema of what the SDK reads from a runner, checked by `shapeOf` of @conch/protocol/json-shape.',
    "import { ERROR_SUGGESTIONS } from '@conch/protocol'",
    "import type { JsonSchema } from '@conch/protocol/json-shape'",
    '',
    '/** REST answers by shape name. */',
    `export const REST_SCHEMAS: ${table(rest)}`,
    '',
    '/** Lines of an NDJSON process stream (`ExecEvent`) by `type`. */',
    `export const EXEC_EVENT_SCHEMAS: ${table(exec)}`,
    '',
    '/** Shell socket frames (`ServerFrame`) by `type`. */',
    `export const SERVER_FRAME_SCHEMAS: ${table(frames)}`,
    '',
    '/** The distinct forms of error details; codes share them. */',
    `const DETAIL_FORMS: readonly JsonSchema[] = JSON.parse(${JSON.stringify(JSON.stringify(forms))})`,
    '',
    '/** The form of each code, one base-36 digit per code in the order of `ERROR_SUGGESTIONS`. */',
    `const FORM_OF = ${JSON.stringify(formOf)}`,
    '',
    '/** The `details` of an error (`ErrorDetails`) by code. */',
    'export const ERROR_DETAILS_SCHEMAS: { readonly [code: string]: JsonSchema | undefined } = Object.fromEntries(',
    '  Object.keys(ERROR_SUGGESTIONS).map((code, i) => [code, DETAIL_FORMS[Number.parseInt(FORM_OF[i] ?? "", 36)]]),',
    ')',
    '',
  ].join('\n')
}

/** Where the generated module lives. */
const WIRE_SCHEMAS_FILE = join(import.meta.dirname, '..', 'src', 'wire-schemas.ts')

if (process.argv[1] === import.meta.filename) {
  writeFileSync(WIRE_SCHEMAS_FILE, generateWireSchemas())
  execFileSync('pnpm', ['exec', 'biome', 'format', '--write', WIRE_SCHEMAS_FILE], { stdio: 'inherit' })
}
