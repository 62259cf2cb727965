// The JSON text of a `shell_exit` frame, written out field by field. Every run sends one, and
// `JSON.stringify` of the frame object took 0.47-0.67 us where this takes 0.40-0.46 (two runs of
// 500,000 frames on the loaded 2-core machine): the generic serializer walks the object's
// properties, this only escapes the run id (with `JSON.stringify`, so any id comes out exactly
// as it would). The text equals `JSON.stringify(exit)` for a frame built in the schema's field
// order (a test holds it to that over hostile ids and edge numbers); a number JSON cannot hold
// goes the generic way.
import type { ShellExit } from '@conch/protocol'

/** `JSON.stringify(exit)`, for an exit built in the order type, id, code, timedOut, durationMs, offset, oomKilled, startOffset. */
export function shellExitJson(exit: ShellExit): string {
  const { id, code, timedOut, durationMs, offset, oomKilled, startOffset } = exit
  if (
    !Number.isFinite(code) ||
    !Number.isFinite(durationMs) ||
    !Number.isFinite(offset) ||
    (startOffset !== undefined && !Number.isFinite(startOffset)) ||
    typeof timedOut !== 'boolean' ||
    (oomKilled !== undefined && typeof oomKilled !== 'boolean')
  ) {
    return JSON.stringify(exit)
  }
  let text = `{"type":"shell_exit","id":${JSON.stringify(id)},"code":${code},"timedOut":${timedOut},"durationMs":${durationMs},"offset":${offset}`
  if (oomKilled !== undefined) text += `,"oomKilled":${oomKilled}`
  if (startOffset !== undefined) text += `,"startOffset":${startOffset}`
  return `${text}}`
}
