// The runner's log for a person at a terminal: each pino JSON line becomes one short line,
// `12:03:04 INFO  GET /v1/sandboxes 200 2.1ms`, with the fields the message does not already
// say as `key=value`, and an error's stack under it. A line that is not pino JSON passes through.

/** Where formatted lines go (a pino destination, stderr). */
export interface LineSink {
  /** Writes text. */
  write(text: string): unknown
}

const LEVELS: Record<number, { label: string; color: string }> = {
  10: { label: 'TRACE', color: '90' },
  20: { label: 'DEBUG', color: '90' },
  30: { label: 'INFO', color: '32' },
  40: { label: 'WARN', color: '33' },
  50: { label: 'ERROR', color: '31' },
  60: { label: 'FATAL', color: '31;1' },
}

/** Fields every line has or that a request line's message already says. */
const HIDDEN: ReadonlySet<string> = new Set([
  'level',
  'time',
  'pid',
  'hostname',
  'msg',
  'v',
  'method',
  'url',
  'statusCode',
  'responseTime',
  'err',
])

function show(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=,]+$/.test(value) ? value : JSON.stringify(value)
  if (
    Array.isArray(value) &&
    value.length > 0 &&
    value.every((v) => typeof v === 'string' && /^[^\s"=,]+$/.test(v))
  )
    return value.join(',')
  return JSON.stringify(value) ?? String(value)
}

function clock(time: unknown): string {
  const date = new Date(typeof time === 'number' ? time : Date.now())
  return [date.getHours(), date.getMinutes(), date.getSeconds()]
    .map((n) => String(n).padStart(2, '0'))
    .join(':')
}

/** One pino JSON line as a readable line (plus an indented stack for errors); ANSI colours when `color`. */
export function formatLogLine(line: string, color: boolean): string {
  let record: Record<string, unknown>
  try {
    const parsed: unknown = JSON.parse(line)
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      return line.endsWith('\n') ? line : `${line}\n`
    record = parsed as Record<string, unknown>
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`
  }
  const level = LEVELS[typeof record.level === 'number' ? record.level : 30] ?? {
    label: String(record.level),
    color: '0',
  }
  const paint = (code: string, text: string): string => (color ? `\u001b[${code}m${text}\u001b[0m` : text)
  const fields = Object.entries(record)
    .filter(([key, value]) => !HIDDEN.has(key) && value !== undefined)
    .map(([key, value]) => `${key}=${show(value)}`)
  const err = record.err as { message?: unknown; stack?: unknown } | undefined
  const message = typeof record.msg === 'string' ? record.msg : ''
  const errText = err && typeof err.message === 'string' && err.message !== message ? `: ${err.message}` : ''
  const head = [
    paint('2', clock(record.time)),
    paint(level.color, level.label.padEnd(5)),
    `${message}${errText}`,
  ]
  const tail = fields.length > 0 ? ` ${paint('2', fields.join(' '))}` : ''
  const stack =
    err && typeof err.stack === 'string' && typeof record.level === 'number' && record.level >= 50
      ? `\n${err.stack
          .split('\n')
          .slice(1)
          .map((l) => `    ${l.trim()}`)
          .join('\n')}`
      : ''
  return `${head.join(' ')}${tail}${stack}\n`
}

/** A pino destination that writes each record to `sink` as a readable line. */
export function prettyLogStream(sink: LineSink, options: { color: boolean }): LineSink {
  return {
    write(text: string): void {
      let out = ''
      for (const line of text.split('\n')) if (line.length > 0) out += formatLogLine(line, options.color)
      sink.write(out)
    },
  }
}
