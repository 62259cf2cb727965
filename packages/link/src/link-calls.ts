// Requests over the link, typed by a method table (`AGENT_METHODS`: name → params and result
// schemas). The caller side numbers calls, settles each on exactly one `result` or `fail`,
// parses the result with the method's schema before resolving, and fails calls on timeout or
// link loss. The answering side parses params with its `CallParser` (zod's schemas in
// `schemaCallParser`, or the agent's zod-free checker of the same schemas), runs the handler
// from a table with one typed handler per method, and answers. Neither side trusts the other:
// a bad result is INTERNAL on the caller, bad params are BAD_REQUEST to the caller.
import type { ErrorCode, ParseResult, WireError } from '@conch/protocol'
import type { z } from 'zod'

/** Method name → params and result schemas. */
export type MethodTable = Readonly<Record<string, { params: z.ZodType; result: z.ZodType }>>

/** The params of method `M`. */
export type ParamsOf<T extends MethodTable, M extends keyof T> = z.infer<T[M]['params']>
/** The result of method `M`. */
export type ResultOf<T extends MethodTable, M extends keyof T> = z.infer<T[M]['result']>

/** A call frame on the link. */
export interface CallFrame {
  /** Discriminator. */
  type: 'call'
  /** Request id. */
  id: number
  /** Method name. */
  method: string
  /** Method params, parsed by the answering side. */
  params: unknown
}

/** The answer to a call. */
export type AnswerFrame =
  | { type: 'result'; id: number; result: unknown }
  | { type: 'fail'; id: number; error: WireError }

/** Options of one call. */
export interface CallOptions<R> {
  /** Fail with DEADLINE_EXCEEDED when no answer came in this time. */
  timeoutMs?: number
  /** A narrower result schema than the method's (e.g. `{}` for a run that streams). */
  result?: z.ZodType<R>
}

/** How the caller's role makes its errors (the runner's RunnerError, say). */
export interface CallErrors {
  /** An error for `code` with `message`. */
  make(code: ErrorCode, message: string): Error
  /** The error a `fail` frame carries. */
  fromWire(error: WireError): Error
}

/** What an unawaited call does with its result once checked. */
const IGNORE_RESULT = (): void => {}

interface Pending {
  method: string
  result: z.ZodType
  resolve: (value: unknown) => void
  reject: (error: Error, context: unknown) => void
  timer: NodeJS.Timeout | undefined
  /** What an unawaited call's `onFail` gets with the error. */
  context: unknown
}

/** The calling side: typed `call`, settled by the role handing it `result` and `fail` frames. */
export class LinkCalls<T extends MethodTable> {
  readonly #methods: T
  readonly #send: (frame: CallFrame) => void
  readonly #errors: CallErrors
  readonly #pending = new Map<number, Pending>()
  #nextId = 1
  #failed: Error | null = null

  /** `send` writes a call frame on the link. */
  constructor(methods: T, send: (frame: CallFrame) => void, errors: CallErrors) {
    this.#methods = methods
    this.#send = send
    this.#errors = errors
  }

  /** Calls `method`; resolves with its parsed result, rejects with the peer's error. */
  call<M extends keyof T & string>(
    method: M,
    params: ParamsOf<T, M>,
    options: CallOptions<ResultOf<T, M>> = {},
  ): Promise<ResultOf<T, M>> {
    if (this.#failed) return Promise.reject(this.#failed)
    const schema = Object.hasOwn(this.#methods, method) ? this.#methods[method] : undefined
    if (!schema) return Promise.reject(this.#errors.make('BAD_REQUEST', `unknown method "${method}"`))
    return new Promise<ResultOf<T, M>>((resolve, reject) =>
      this.#start(method, params, options, schema.result, resolve as (v: unknown) => void, reject),
    )
  }

  /**
   * Calls `method` without a promise, for calls whose answer only acknowledges (a streamed run,
   * whose events follow on a channel): a result is still parsed by the method's schema (or
   * `options.result`) and then dropped; a failure, an invalid result, a timeout or the link's
   * loss goes to `onFail` with `context`, at most once. Saves the promise and its reaction jobs
   * on a hot path, and with `context` a caller can pass one `onFail` for all its calls instead
   * of a closure per call.
   */
  callUnawaited<M extends keyof T & string, C = undefined>(
    method: M,
    params: ParamsOf<T, M>,
    onFail: (error: Error, context: C) => void,
    options: CallOptions<ResultOf<T, M>> = {},
    context?: C,
  ): void {
    if (this.#failed) {
      onFail(this.#failed, context as C)
      return
    }
    const schema = Object.hasOwn(this.#methods, method) ? this.#methods[method] : undefined
    if (!schema) {
      onFail(this.#errors.make('BAD_REQUEST', `unknown method "${method}"`), context as C)
      return
    }
    this.#start(
      method,
      params,
      options,
      schema.result,
      IGNORE_RESULT,
      onFail as (error: Error, context: unknown) => void,
      context,
    )
  }

  #start(
    method: string,
    params: unknown,
    options: CallOptions<unknown>,
    methodResult: z.ZodType,
    resolve: (value: unknown) => void,
    reject: (error: Error, context: unknown) => void,
    context?: unknown,
  ): void {
    const id = this.#nextId++
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            this.#pending.delete(id)
            reject(
              this.#errors.make(
                'DEADLINE_EXCEEDED',
                `the agent did not answer ${method} within ${options.timeoutMs} ms`,
              ),
              context,
            )
          }, options.timeoutMs)
    const result = options.result ?? methodResult
    this.#pending.set(id, { method, result, resolve, reject, timer, context })
    this.#send({ type: 'call', id, method, params })
  }

  /**
   * Settles the call a `result` or `fail` frame answers (an unknown id is ignored). Returns the
   * method and the result's schema issues when a result did not match its schema, for the log.
   */
  settle(frame: AnswerFrame): { method: string; issues: string[] } | undefined {
    const pending = this.#pending.get(frame.id)
    if (!pending) return undefined
    this.#pending.delete(frame.id)
    if (pending.timer) clearTimeout(pending.timer)
    if (frame.type === 'fail') {
      pending.reject(this.#errors.fromWire(frame.error), pending.context)
      return undefined
    }
    const parsed = pending.result.safeParse(frame.result)
    if (parsed.success) {
      pending.resolve(parsed.data)
      return undefined
    }
    pending.reject(
      this.#errors.make('INTERNAL', `the agent sent an invalid result for ${pending.method}`),
      pending.context,
    )
    return { method: pending.method, issues: parsed.error.issues.slice(0, 3).map((i) => i.path.join('.')) }
  }

  /** Fails every pending call and every later one with `error` (the link is gone). */
  failAll(error: Error): void {
    this.#failed = error
    for (const pending of this.#pending.values()) {
      if (pending.timer) clearTimeout(pending.timer)
      pending.reject(error, pending.context)
    }
    this.#pending.clear()
  }
}

/** What a handler gives back: its result, or a promise of it when it has to wait. */
export type CallAnswer<R> = R | Promise<R>

/**
 * One handler per method of `T`, typed by its schemas; `C` is what the role hands each call. A
 * handler that needs nothing asynchronous may return its result as is: the answer then leaves
 * in the same turn, without a promise.
 */
export type HandlerTable<T extends MethodTable, C> = {
  [M in keyof T]: (params: ParamsOf<T, M>, context: C) => CallAnswer<ResultOf<T, M>>
}

/**
 * How the answering side checks a call: whether it names a method of `T`, and its params
 * parsed by that method's schema. Never throws.
 */
export interface CallParser<T extends MethodTable> {
  /** Whether `method` is one of `T`'s (own keys only: `__proto__` and `constructor` are not). */
  has(method: string): method is keyof T & string
  /** The params of `method`, or BAD_REQUEST naming the fields that do not match. */
  params<M extends keyof T & string>(method: M, params: unknown): ParseResult<ParamsOf<T, M>>
}

/** The BAD_REQUEST of params that did not parse; `fields` lists `path: problem` entries. */
function invalidParams(method: string, fields: readonly string[]): WireError {
  return { code: 'BAD_REQUEST', message: `invalid params for ${method}: ${fields.slice(0, 5).join('; ')}` }
}

/** A `CallParser` that parses with the zod schemas of `methods` (the runner, tests). */
export function schemaCallParser<T extends MethodTable>(methods: T): CallParser<T> {
  return {
    has: (method): method is keyof T & string => Object.hasOwn(methods, method),
    params(method, params) {
      const parsed = methods[method]!.params.safeParse(params)
      if (parsed.success) return { ok: true, value: parsed.data as ParamsOf<T, typeof method> }
      const fields = parsed.error.issues.map((i) => `${i.path.join('.') || '(params)'}: ${i.message}`)
      return { ok: false, error: invalidParams(method, fields) }
    },
  }
}

/**
 * Answers one call: checks its method and params with `parser`, runs `handle`, and sends
 * `result` or `fail`. An unknown method or bad params fail with BAD_REQUEST naming the fields;
 * a thrown error (or a rejected promise) becomes the `fail` that `toWire` makes of it. A result
 * `handle` returns as is is answered at once, in the call's turn; a promise, once it settles.
 */
export function answerCall<T extends MethodTable>(
  parser: CallParser<T>,
  frame: CallFrame,
  handle: <M extends keyof T & string>(method: M, params: ParamsOf<T, M>) => CallAnswer<ResultOf<T, M>>,
  reply: (frame: AnswerFrame) => void,
  toWire: (error: unknown) => WireError,
): void {
  const { id, method } = frame
  if (!parser.has(method)) {
    const name: string = frame.method
    reply({
      type: 'fail',
      id,
      error: { code: 'BAD_REQUEST', message: `unknown method "${name.slice(0, 64)}"` },
    })
    return
  }
  const parsed = parser.params(method, frame.params ?? {})
  if (!parsed.ok) {
    reply({ type: 'fail', id, error: parsed.error })
    return
  }
  let answer: CallAnswer<unknown>
  try {
    answer = handle(method, parsed.value)
  } catch (err) {
    reply({ type: 'fail', id, error: toWire(err) })
    return
  }
  if (answer instanceof Promise) {
    answer.then(
      (result: unknown) => replyResult(id, result, reply, toWire),
      (err: unknown) => reply({ type: 'fail', id, error: toWire(err) }),
    )
    return
  }
  replyResult(id, answer, reply, toWire)
}

/** Sends a call's result; a result that cannot be sent (not JSON) fails the call instead. */
function replyResult(
  id: number,
  result: unknown,
  reply: (frame: AnswerFrame) => void,
  toWire: (error: unknown) => WireError,
): void {
  try {
    reply({ type: 'result', id, result })
  } catch (err) {
    reply({ type: 'fail', id, error: toWire(err) })
  }
}
