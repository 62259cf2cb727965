// The agent parses with the zod-free checker of JSON Schema generated from the protocol's zod
// schemas. These tests hold it to zod's answers: the generated files are fresh, every hostile
// value (wrong types, missing and extra keys, huge strings, NUL, `__proto__` and `constructor`
// keys, deep nesting, numbers past the safe range) gets the same verdict, the same error code
// and the same parsed value from both, and each refinement is enforced without zod.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { schemaOf, zodFreeSchemas } from '../scripts/generate-zod-free-schemas.ts'
import { AgentArgs } from './agent-args.ts'
import { HOST_FRAME_TYPES, HostFrame } from './agent-frames.ts'
import { HOST_FRAME_TYPE_NAMES, parseAgentArgs, parseAgentParams, parseHostFrame } from './agent-inbound.ts'
import { AGENT_ARGS_SCHEMA, AGENT_PARAM_SCHEMAS, HOST_FRAME_SCHEMAS } from './agent-inbound-schemas.ts'
import { AGENT_METHODS, type AgentMethod } from './agent-methods.ts'
import { ERROR_DETAILS_SCHEMAS } from './error-details-schemas.ts'
import { parseFrame } from './frame-parse.ts'

type Json = unknown

/** Values that break a field: each is tried in place of every field of every example. */
const HOSTILE: Json[] = [
  undefined,
  null,
  true,
  0,
  -1,
  1.5,
  2 ** 31 + 1,
  2 ** 53,
  -(2 ** 53),
  '',
  '5',
  'x'.repeat(70_000),
  'a\0b',
  '/workspace/a\0b',
  [],
  ['x', 'y'],
  {},
  JSON.parse('{"__proto__": {"polluted": true}}'),
  { constructor: { prototype: { polluted: true } } },
  JSON.parse(`${'['.repeat(2000)}${']'.repeat(2000)}`),
  JSON.parse(`${'{"a":'.repeat(2000)}1${'}'.repeat(2000)}`),
]

/** A valid value of each method's params, with every field the schema has where it matters. */
const EXAMPLES: { [M in AgentMethod]?: unknown } = {
  'session.create': {
    id: 's-1',
    env: { A: 'b', __proto__x: 'c' },
    cwd: '/w',
    commandTimeoutMs: 5,
    cleanEnv: true,
  },
  'session.run': {
    sessionId: 'default',
    id: 'r1',
    command: 'echo hi',
    timeoutMs: 1000,
    stdin: 'aGk=',
    buffer: true,
    outputCapBytes: 10,
    stdinPipe: false,
  },
  'session.attach': { sessionId: 'default', ch: 3, offset: 0 },
  'session.stdin': { sessionId: 'default', id: 'r1', data: 'aGk=', end: true },
  'session.interrupt': { sessionId: 'default', id: 'r1' },
  'session.env.set': { sessionId: 'default', name: 'FOO', value: 'bar' },
  'session.alias.add': { sessionId: 'default', name: 'll', value: 'ls -l' },
  'session.history': { sessionId: 'default', prefix: 'e', contains: 'c', limit: 3 },
  'session.history.replay': { sessionId: 'default', index: 0, id: 'r2', outputCapBytes: 5 },
  exec: { command: 'true', cwd: '/', env: { X: 'y' }, stdin: '', timeoutMs: 100, ch: 1, outputCapBytes: 1 },
  'process.start': { command: 'sleep 1', cwd: '/w', env: { A: 'b' } },
  'process.output': { id: 'proc_abcd', since: 1 },
  'process.kill': { id: 'proc_abcd', signal: 'SIGKILL' },
  'process.wait': { id: 'proc_abcd', timeoutMs: 10 },
  'terminal.open': { cols: 80, rows: 24, env: { TERM: 'xterm' }, cwd: '/w', command: ['bash', '-l'] },
  'terminal.attach': { terminal: 't_0123456789abcdef', ch: 2, offset: 0 },
  'terminal.resize': { terminal: 't_0123456789abcdef', cols: 100, rows: 40 },
  'terminal.signal': { terminal: 't_0123456789abcdef', signal: 'SIGINT' },
  'file.write': { path: '/workspace/a', ch: 1, mode: 0o644 },
  'file.mkdir': { path: 'a/b', recursive: true },
  'file.rename': { from: 'a', to: 'b' },
  'tcp.connect': { port: 8080, ch: 4 },
  'snapshot.restore': {
    restartProcesses: true,
    state: {
      formatVersion: 1,
      sessions: [],
      processes: [],
    },
  },
}

/** Every way to break `value` one field at a time: each field replaced, removed, and a key added. */
function* mutations(value: Json, depth = 0): Generator<Json> {
  yield value
  for (const bad of HOSTILE) yield bad
  if (depth > 3 || value === null || typeof value !== 'object') return
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++)
      for (const m of mutations(value[i], depth + 1)) yield value.map((v, j) => (j === i ? m : v))
    yield [...value, value[0]]
    return
  }
  const record = value as Record<string, Json>
  yield { ...record, unknownKey: 'x', constructor: 'y' }
  yield JSON.parse(`{"__proto__": {"polluted": true}, ${JSON.stringify(record).slice(1)}`)
  for (const key of Object.keys(record)) {
    const { [key]: _, ...without } = record
    yield without
    for (const m of mutations(record[key], depth + 1)) yield { ...record, [key]: m }
  }
}

/** zod's verdict and the checker's, in one comparable form (codes and values, not wording). */
function verdict(result: { ok: true; value: unknown } | { ok: false; error: { code: string } }) {
  return result.ok ? { ok: true, value: result.value } : { ok: false, code: result.error.code }
}

describe('the generated zod-free schemas', () => {
  it('match the protocol schemas (regenerate with `pnpm --filter @conch/protocol generate`)', () => {
    const fresh = zodFreeSchemas()
    expect(HOST_FRAME_SCHEMAS).toEqual(fresh.hostFrames)
    expect(AGENT_PARAM_SCHEMAS).toEqual(fresh.params)
    expect(AGENT_ARGS_SCHEMA).toEqual(fresh.agentArgs)
    expect(ERROR_DETAILS_SCHEMAS).toEqual(fresh.details)
  })

  it('cover every frame type and every method', () => {
    expect(HOST_FRAME_TYPE_NAMES).toEqual(HOST_FRAME_TYPES)
    expect(Object.keys(AGENT_PARAM_SCHEMAS)).toEqual(Object.keys(AGENT_METHODS))
  })

  it('refuse to generate a refinement that is not named in REFINEMENTS', () => {
    expect(() => schemaOf(z.object({ a: z.string().refine((v) => v !== 'x') }))).toThrow(/REFINEMENTS/)
  })

  it('refuse to generate a transform, which the checker cannot run', () => {
    expect(() => schemaOf(z.object({ a: z.string().transform((v) => v.length) }))).toThrow(/pipe/)
    expect(() => schemaOf(z.object({ a: z.string().default('x') }))).toThrow(/default/)
  })
})

describe('parseHostFrame answers as zod does', () => {
  const frames: Json[] = [
    { type: 'hello', linkVersion: 2, protocolVersion: 1, nonce: 'a'.repeat(64) },
    { type: 'hello', t: 'hello', linkVersion: 2, protocolVersion: 1, nonce: 'a'.repeat(64) },
    { type: 'auth', proof: 'b'.repeat(64) },
    { type: 'call', id: 1, method: 'session.list', params: { deep: [[[{}]]] } },
    { type: 'credit', ch: 1, bytes: 10 },
    { type: 'close', ch: 0 },
    { type: 'data', ch: 2 ** 31 },
    { type: 'end', ch: 5 },
    { type: 'ping', n: 1 },
    { type: 'pong', n: -3 },
  ]
  it('for every mutation of every frame type', () => {
    let compared = 0
    for (const frame of frames) {
      for (const value of mutations(frame)) {
        const zod = parseFrame(HostFrame, value, 'type', HOST_FRAME_TYPES)
        const ours = parseHostFrame(value)
        expect(verdict(ours), JSON.stringify(value)?.slice(0, 200)).toEqual(verdict(zod))
        if (!zod.ok && !ours.ok && zod.error.code !== 'INVALID_FRAME' && zod.error.code !== 'BAD_REQUEST')
          expect(ours.error.message).toBe(zod.error.message)
        compared += 1
      }
    }
    expect(compared).toBeGreaterThan(900)
  }, 60_000)

  it('rejects a non-object, a missing type and an unknown type with the same codes', () => {
    for (const value of [
      null,
      [],
      'hello',
      7,
      {},
      { type: 5 },
      { type: '__proto__' },
      { type: 'constructor' },
    ]) {
      expect(verdict(parseHostFrame(value))).toEqual(
        verdict(parseFrame(HostFrame, value, 'type', HOST_FRAME_TYPES)),
      )
    }
    expect(parseHostFrame({ type: 'toString' })).toMatchObject({
      ok: false,
      error: { code: 'UNKNOWN_FRAME_TYPE' },
    })
  })
})

describe('parseAgentParams answers as zod does', () => {
  it('for every mutation of every method example, and for hostile params of every method', () => {
    let compared = 0
    for (const method of Object.keys(AGENT_METHODS) as AgentMethod[]) {
      const schema = AGENT_METHODS[method].params as z.ZodType
      const values = EXAMPLES[method] === undefined ? [{}, ...HOSTILE] : mutations(EXAMPLES[method])
      for (const value of values) {
        const zod = schema.safeParse(value)
        const ours = parseAgentParams(method, value)
        expect(verdict(ours), `${method} ${JSON.stringify(value)?.slice(0, 200)}`).toEqual(
          zod.success ? { ok: true, value: zod.data } : { ok: false, code: 'BAD_REQUEST' },
        )
        compared += 1
      }
    }
    expect(compared).toBeGreaterThan(2000)
  }, 60_000)

  it('never lets a __proto__ key reach the parsed value or Object.prototype', () => {
    const parsed = parseAgentParams(
      'session.create',
      JSON.parse('{"env": {"__proto__": {"polluted": "yes"}, "A": "b"}, "__proto__": {"polluted": "yes"}}'),
    )
    expect(parsed).toEqual({ ok: true, value: { env: { A: 'b' } } })
    expect(Object.getPrototypeOf(parsed.ok ? parsed.value.env : null)).toBe(Object.prototype)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })

  it('names the method and the field in a BAD_REQUEST', () => {
    expect(
      parseAgentParams('session.run', { sessionId: 'default', id: 'r', command: 1, buffer: true }),
    ).toEqual({
      ok: false,
      error: { code: 'BAD_REQUEST', message: 'invalid params for session.run: command: expected a string' },
    })
  })
})

describe('refinements run without zod', () => {
  it('envValueWithoutNul: an environment value with NUL is refused', () => {
    const value = { env: { A: 'x\0y' } }
    expect(AGENT_METHODS['session.create'].params.safeParse(value).success).toBe(false)
    expect(parseAgentParams('session.create', value)).toEqual({
      ok: false,
      error: {
        code: 'BAD_REQUEST',
        message: 'invalid params for session.create: env.A: values may not contain NUL',
      },
    })
  })

  it('pathWithoutNul: a sandbox path with NUL is refused', () => {
    const value = { path: '/workspace/a\0/etc/passwd' }
    expect(AGENT_METHODS['file.stat'].params.safeParse(value).success).toBe(false)
    expect(parseAgentParams('file.stat', value)).toEqual({
      ok: false,
      error: {
        code: 'BAD_REQUEST',
        message: 'invalid params for file.stat: path: paths may not contain NUL',
      },
    })
  })

  it('oneListener: the agent needs exactly one of --listenFd and --socket', () => {
    const cases: Record<string, string>[] = [
      { root: '/r', secretFd: '3' },
      { root: '/r', secretFd: '3', listenFd: '4', socket: '/s' },
    ]
    for (const args of cases) {
      expect(AgentArgs.safeParse(args).success).toBe(false)
      expect(parseAgentArgs(args)).toEqual({
        ok: false,
        message: '(value): give exactly one of --listenFd and --socket',
      })
    }
  })

  it('oneSecretSource: the agent needs exactly one of --secretFd and --secretFile', () => {
    const cases: Record<string, string>[] = [
      { root: '/r', socket: '/s' },
      { root: '/r', socket: '/s', secretFd: '3', secretFile: '/f' },
    ]
    for (const args of cases) {
      expect(AgentArgs.safeParse(args).success).toBe(false)
      expect(parseAgentArgs(args)).toEqual({
        ok: false,
        message: '(value): give exactly one of --secretFd and --secretFile',
      })
    }
  })

  it('coerces numbers as z.coerce.number() does (argv values and a history limit)', () => {
    const args = { root: '/r', listenFd: '5', secretFd: '3', maxSessions: '7', sandboxUid: '0' }
    expect(parseAgentArgs(args)).toEqual({ ok: true, value: AgentArgs.parse(args) })
    expect(parseAgentArgs({ ...args, maxSessions: 'seven' })).toMatchObject({ ok: false })
    expect(parseAgentArgs({ ...args, listenFd: '2' })).toMatchObject({ ok: false })
    const history = { sessionId: 'default', limit: '12' }
    expect(parseAgentParams('session.history', history)).toEqual({
      ok: true,
      value: AGENT_METHODS['session.history'].params.parse(history),
    })
  })
})

describe('the zod-free entry', () => {
  it('reaches no module that imports zod at runtime', () => {
    const dir = import.meta.dirname
    const seen = new Set<string>()
    const visit = (file: string): void => {
      if (seen.has(file)) return
      seen.add(file)
      const text = readFileSync(join(dir, file), 'utf8')
      for (const match of text.matchAll(/^(?:import|export)\s+(type\s+)?[^'"]*?from\s+'([^']+)'/gm)) {
        const [, isType, from] = match
        if (isType || from === undefined) continue
        expect(from, `${file} imports ${from}`).not.toBe('zod')
        if (from.startsWith('./')) visit(from.slice(2))
      }
    }
    visit('zod-free.ts')
    expect(seen.size).toBeGreaterThan(10)
    expect([...seen].every((file) => readdirSync(dir).includes(file))).toBe(true)
  })
})
