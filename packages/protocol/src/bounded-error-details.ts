import type { ErrorCode } from './error-codes.ts'
import type { ErrorDetails } from './error-details.ts'
import { ERROR_DETAILS_SCHEMAS } from './error-details-schemas.ts'
import { check, type Shape, shapeOf } from './json-shape.ts'

// Every error's details are checked against its code's schema as the error is made. The check
// runs on the JSON Schema generated from `ERROR_DETAILS` (error-details-schemas.ts), so an error
// can be made in a process without zod (the agent).

/** The most bytes of JSON a forwarded error's details may take; larger details are dropped. */
export const MAX_ERROR_DETAILS_BYTES = 4096

const utf8 = new TextEncoder()

const shapes = new Map<string, Shape<unknown>>()

/** The checker of `code`'s details, made on first use. */
function shapeOfCode(code: ErrorCode): Shape<unknown> | undefined {
  let shape = shapes.get(code)
  if (shape === undefined) {
    const schema = Object.hasOwn(ERROR_DETAILS_SCHEMAS, code) ? ERROR_DETAILS_SCHEMAS[code] : undefined
    if (schema === undefined) return undefined
    shape = shapeOf(schema)
    shapes.set(code, shape)
  }
  return shape
}

/**
 * `details` checked against `code`'s schema: unknown keys are dropped, and details that do not
 * match, or take more than `MAX_ERROR_DETAILS_BYTES` as JSON, become `undefined`.
 */
export function boundedErrorDetails<C extends ErrorCode>(
  code: C,
  details: unknown,
): ErrorDetails[C] | undefined {
  if (details === undefined) return undefined
  const shape = shapeOfCode(code)
  if (shape === undefined) return undefined
  const parsed = check(shape, details) as Record<string, unknown> | undefined
  if (parsed === undefined || Object.keys(parsed).length === 0) return undefined
  if (utf8.encode(JSON.stringify(parsed)).byteLength > MAX_ERROR_DETAILS_BYTES) return undefined
  return parsed as ErrorDetails[C]
}
