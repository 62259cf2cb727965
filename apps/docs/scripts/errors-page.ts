// Renders the errors reference: one section, and so one anchor, per `ErrorCode`, with its HTTP
// status and the hand-written guide entry. test/errors-drift.test.ts checks the built page.
import { ERROR_DETAILS, ERROR_STATUS, ERROR_SUGGESTIONS, ErrorCode } from '@conch/protocol'
import { ERROR_GUIDE } from '../src/error-guide.ts'

/** The anchor of a code on the errors page: the code in lower case (`#output_lost`). */
export function errorAnchor(code: ErrorCode): string {
  return code.toLowerCase()
}

/** The fields of a code's `details`, as inline code (`earliestOffset`, `requestedOffset?`), or `none`. */
export function detailFields(code: ErrorCode): string {
  const shape = ERROR_DETAILS[code].shape
  const fields = Object.entries(shape).map(
    ([name, schema]) => `\`${name}${schema.safeParse(undefined).success ? '?' : ''}\``,
  )
  return fields.length === 0 ? 'none' : fields.join(', ')
}

/** The markdown of the errors page. */
export function renderErrorsPage(): string {
  let out = `---\ntitle: Errors\nslug: reference/errors\ndescription: Every conch error code, its HTTP status, when it happens and what to do.\n---\n\n`
  out += `Every error that crosses a process boundary has one code from this list. REST answers carry it in the body \`{ "error": { "code", "message", "details"? } }\` with the HTTP status below. On the shell WebSocket it arrives as an \`error\` frame with the same fields and the \`id\` of the run it is about. In \`@conch/sdk\`, every error is a \`ConchError\` with a \`code\` property holding one of these codes; the codes that callers usually branch on have their own subclass, listed per code below. \`message\` says what happened, with the ids involved. \`details\` holds the facts listed per code below (in the SDK, typed by the code). The SDK ends every message with one suggestion of what to do, the same text for every error of a code, and keeps it in \`suggestion\`; the runner's own bodies carry no suggestion, so a client of the REST API finds it here.\n\n`
  out += `Link to a code with its name in lower case, for example [\`/reference/errors/#output_lost\`](#output_lost).\n\n`
  out += '| Code | HTTP status | SDK class |\n| --- | --- | --- |\n'
  for (const code of ErrorCode.options) {
    out += `| [\`${code}\`](#${errorAnchor(code)}) | ${ERROR_STATUS[code]} | \`${ERROR_GUIDE[code].sdkClass}\` |\n`
  }
  out += '\n'
  for (const code of ErrorCode.options) {
    const guide = ERROR_GUIDE[code]
    out += `## ${code}\n\nHTTP status **${ERROR_STATUS[code]}**. The SDK rejects with \`${guide.sdkClass}\`.\n\n**When**: ${guide.when}\n\n**What to do**: ${guide.fix}\n\n**The SDK suggests**: ${ERROR_SUGGESTIONS[code]}.\n\n**Details**: ${detailFields(code)}.\n\n`
  }
  return out
}
