// Calls over a real Unix socket: the runner's end calls through LinkCalls, the agent's end
// answers through answerCall with a typed handler table, both on LinkEndpoints.
import {
  AGENT_FRAME_TYPES,
  AgentFrame,
  type ErrorCode,
  HOST_FRAME_TYPES,
  HostFrame,
  parseFrame,
  type WireError,
} from '@conch/protocol'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { z } from 'zod'
import {
  type AnswerFrame,
  answerCall,
  type CallFrame,
  type HandlerTable,
  LinkCalls,
  schemaCallParser,
} from '../src/link-calls.ts'
import { LinkEndpoint } from '../src/link-endpoint.ts'
import { type SocketPair, socketPair } from './socket-pair.ts'

const METHODS = {
  add: { params: z.object({ a: z.number(), b: z.number() }), result: z.object({ sum: z.number() }) },
  boom: { params: z.object({}), result: z.object({}) },
  lie: { params: z.object({}), result: z.object({ n: z.number() }) },
  slow: { params: z.object({}), result: z.object({}) },
} as const

class CallError extends Error {
  readonly code: ErrorCode
  constructor(code: ErrorCode, message: string) {
    super(message)
    this.code = code
  }
}
const errors = {
  make: (code: ErrorCode, message: string) => new CallError(code, message),
  fromWire: (e: WireError) => new CallError(e.code, e.message),
}

let pair: SocketPair | undefined
afterEach(() => {
  pair?.close()
  pair = undefined
})

async function linked(handlers: HandlerTable<typeof METHODS, null>) {
  pair = await socketPair()
  const answering: LinkEndpoint<AgentFrame, HostFrame> = new LinkEndpoint<AgentFrame, HostFrame>(pair.b, {
    parse: (header) => parseFrame(HostFrame, header, 'type', HOST_FRAME_TYPES),
    onFrame: (frame) => {
      if (frame.type !== 'call') return
      void answerCall(
        schemaCallParser(METHODS),
        frame,
        (method, params) => (handlers[method] as (p: unknown, c: null) => Promise<never>)(params, null),
        (answer) => answering.send(answer),
        (error) => ({ code: 'INTERNAL', message: String((error as Error).message) }),
      )
    },
    onBadFrame: () => {},
  })
  let calls: LinkCalls<typeof METHODS> | undefined
  const answers: AgentFrame[] = []
  const caller = new LinkEndpoint<HostFrame, AgentFrame>(pair.a, {
    parse: (header) => parseFrame(AgentFrame, header, 'type', AGENT_FRAME_TYPES),
    onFrame: (frame) => {
      answers.push(frame)
      if (frame.type === 'result' || frame.type === 'fail') calls?.settle(frame)
    },
    onBadFrame: () => {},
    onClose: (reason) => calls?.failAll(new CallError('CONNECTION_LOST', reason)),
  })
  calls = new LinkCalls(METHODS, (frame) => caller.send(frame), errors)
  return { calls, caller, answering, answers }
}

const handlers: HandlerTable<typeof METHODS, null> = {
  add: async ({ a, b }) => ({ sum: a + b }),
  boom: async () => {
    throw new Error('it broke')
  },
  lie: async () => ({ n: 'not a number' }) as never,
  slow: () => new Promise(() => {}),
}

describe('calls over the link', () => {
  it('resolves with the parsed result, many calls in flight at once', async () => {
    const { calls } = await linked(handlers)
    const sums = await Promise.all(Array.from({ length: 200 }, (_, i) => calls.call('add', { a: i, b: 1 })))
    expect(sums.map((r) => r.sum)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1))
  })

  it('types params and results from the method table', async () => {
    const { calls } = await linked(handlers)
    // @ts-expect-error `c` is not a param of `add`.
    await expect(calls.call('add', { a: 1, c: 2 })).rejects.toMatchObject({ code: 'BAD_REQUEST' })
    // @ts-expect-error `nope` is not a method.
    await expect(calls.call('nope', {})).rejects.toMatchObject({ code: 'BAD_REQUEST' })
  })

  it('fails with BAD_REQUEST naming the field for bad params, and an unknown method', async () => {
    const { calls, caller, answers } = await linked(handlers)
    await expect(calls.call('add', { a: 1, b: 'x' as never })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('b:'),
    })
    caller.send({ type: 'call', id: 999, method: 'ghost', params: {} })
    await vi.waitFor(() =>
      expect(answers.find((f) => f.type === 'fail' && f.id === 999)).toMatchObject({
        error: { code: 'BAD_REQUEST', message: 'unknown method "ghost"' },
      }),
    )
  })

  it('turns a thrown handler error into a fail, and an invalid result into INTERNAL', async () => {
    const { calls } = await linked(handlers)
    await expect(calls.call('boom', {})).rejects.toMatchObject({ code: 'INTERNAL', message: 'it broke' })
    await expect(calls.call('lie', {})).rejects.toMatchObject({ code: 'INTERNAL' })
    await expect(calls.call('add', { a: 2, b: 2 })).resolves.toEqual({ sum: 4 })
  })

  it('fails a call that gets no answer in time with DEADLINE_EXCEEDED', async () => {
    const { calls } = await linked(handlers)
    await expect(calls.call('slow', {}, { timeoutMs: 20 })).rejects.toMatchObject({
      code: 'DEADLINE_EXCEEDED',
    })
  })

  it('fails pending and later calls with CONNECTION_LOST when the peer dies', async () => {
    const { calls, answering } = await linked(handlers)
    const pending = calls.call('slow', {})
    answering.close()
    await expect(pending).rejects.toMatchObject({ code: 'CONNECTION_LOST' })
    await expect(calls.call('add', { a: 1, b: 1 })).rejects.toMatchObject({ code: 'CONNECTION_LOST' })
  })

  it('reports an unawaited call only when it fails: bad params, a thrown error, an invalid result, the link lost', async () => {
    const { calls, answering, answers } = await linked(handlers)
    const failures: string[] = []
    const onFail = (error: Error): void => {
      failures.push(`${(error as CallError).code}: ${error.message}`)
    }
    calls.callUnawaited('add', { a: 1, b: 2 }, onFail)
    calls.callUnawaited('add', { a: 'x' } as never, onFail)
    calls.callUnawaited('boom', {}, onFail)
    calls.callUnawaited('lie', {}, onFail)
    calls.callUnawaited('nope' as never, {} as never, onFail)
    await vi.waitFor(() => expect(answers).toHaveLength(4))
    expect(failures).toEqual([
      'BAD_REQUEST: unknown method "nope"',
      expect.stringMatching(/^BAD_REQUEST: invalid params for add: a/),
      'INTERNAL: it broke',
      'INTERNAL: the agent sent an invalid result for lie',
    ])
    // A late answer for a call that already failed, or any answer for an unknown id, changes nothing.
    failures.length = 0
    calls.callUnawaited('slow', {}, onFail)
    calls.callUnawaited('slow', {}, onFail, { timeoutMs: 20 })
    await vi.waitFor(() => expect(failures).toEqual([expect.stringMatching(/^DEADLINE_EXCEEDED/)]))
    expect(calls.settle({ type: 'result', id: 999, result: {} })).toBeUndefined()
    answering.close()
    await vi.waitFor(() => expect(failures).toHaveLength(2))
    expect(failures[1]).toMatch(/^CONNECTION_LOST/)
    calls.callUnawaited('add', { a: 1, b: 1 }, onFail)
    expect(failures).toHaveLength(3)
    expect(failures[2]).toMatch(/^CONNECTION_LOST/)
  })
})

describe('answerCall with handlers that answer at once', () => {
  const parser = schemaCallParser(METHODS)
  const toWire = (error: unknown): WireError => ({ code: 'INTERNAL', message: (error as Error).message })
  /** Answers `frame` with `handle`; returns what was replied before answerCall returned. */
  function answerNow(frame: CallFrame, handle: (method: string, params: unknown) => unknown): AnswerFrame[] {
    const replies: AnswerFrame[] = []
    answerCall(parser, frame, handle as never, (a) => replies.push(a), toWire)
    return [...replies]
  }
  const call = (method: string, params: unknown, id = 1): CallFrame => ({ type: 'call', id, method, params })

  it('replies in the same turn to a handler that returns its result as is', () => {
    expect(answerNow(call('add', { a: 2, b: 3 }), (_m, p) => ({ sum: (p as { a: number }).a + 1 }))).toEqual([
      { type: 'result', id: 1, result: { sum: 3 } },
    ])
  })

  it('fails a handler that throws, and one whose result cannot be sent, with its typed error', () => {
    expect(
      answerNow(call('boom', {}, 2), () => {
        throw new Error('sync break')
      }),
    ).toEqual([{ type: 'fail', id: 2, error: { code: 'INTERNAL', message: 'sync break' } }])
    const replies: AnswerFrame[] = []
    answerCall(
      parser,
      call('add', { a: 1, b: 1 }, 3),
      (() => ({ sum: 1n })) as never,
      (a) => {
        // The link's send encodes the frame; a BigInt cannot be, and throws as JSON.stringify does.
        JSON.stringify(a)
        replies.push(a)
      },
      toWire,
    )
    expect(replies).toEqual([
      { type: 'fail', id: 3, error: { code: 'INTERNAL', message: expect.stringMatching(/BigInt/) } },
    ])
  })

  it('checks method and params before any handler runs, and answers a promise once it settles', async () => {
    let ran = 0
    const handle = () => {
      ran += 1
      return { sum: 0 }
    }
    expect(answerNow(call('__proto__', {}), handle)).toEqual([
      { type: 'fail', id: 1, error: { code: 'BAD_REQUEST', message: 'unknown method "__proto__"' } },
    ])
    expect(answerNow(call('add', { a: 'x' }), handle)[0]).toMatchObject({
      type: 'fail',
      error: { code: 'BAD_REQUEST' },
    })
    expect(ran).toBe(0)
    const replies: AnswerFrame[] = []
    answerCall(
      parser,
      call('add', { a: 1, b: 1 }, 4),
      (async () => ({ sum: 2 })) as never,
      (a) => replies.push(a),
      toWire,
    )
    expect(replies).toEqual([])
    await vi.waitFor(() => expect(replies).toEqual([{ type: 'result', id: 4, result: { sum: 2 } }]))
    answerCall(
      parser,
      call('boom', {}, 5),
      (async () => Promise.reject(new Error('late'))) as never,
      (a) => replies.push(a),
      toWire,
    )
    await vi.waitFor(() =>
      expect(replies[1]).toEqual({ type: 'fail', id: 5, error: { code: 'INTERNAL', message: 'late' } }),
    )
  })
})
