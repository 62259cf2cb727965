import { describe, expect, it } from 'vitest'
import { wireSchemas } from '../scripts/generate-wire-schemas.ts'
import {
  ERROR_DETAILS_SCHEMAS,
  EXEC_EVENT_SCHEMAS,
  REST_SCHEMAS,
  SERVER_FRAME_SCHEMAS,
} from './wire-schemas.ts'

// The SDK checks what it reads against JSON Schema generated from the protocol's zod schemas.
// A protocol change without regenerating fails here.

describe('generated wire schemas', () => {
  it('match the protocol schemas (regenerate with `pnpm --filter @conch/sdk generate`)', () => {
    const fresh = wireSchemas()
    expect(REST_SCHEMAS).toEqual(fresh.rest)
    expect(EXEC_EVENT_SCHEMAS).toEqual(fresh.exec)
    expect(SERVER_FRAME_SCHEMAS).toEqual(fresh.frames)
    expect(ERROR_DETAILS_SCHEMAS).toEqual(fresh.details)
  })
})
