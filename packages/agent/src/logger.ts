/** Structured fields of a log line. */
export type LogFields = Record<string, unknown>

/** A structured logger with pino's call shape (`log.warn({ sessionId }, 'message')`). */
export interface Logger {
  /** Detail for debugging. */
  debug(fields: LogFields, message: string): void
  /** Normal operation. */
  info(fields: LogFields, message: string): void
  /** Something unexpected that the agent handled. */
  warn(fields: LogFields, message: string): void
  /** Something failed. */
  error(fields: LogFields, message: string): void
}

/** A logger that drops everything. */
export const silentLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
}

const LEVELS = { debug: 20, info: 30, warn: 40, error: 50 } as const

/** A logger that writes one JSON line per entry to `write`, at `minLevel` and above. */
export function jsonLineLogger(
  write: (line: string) => void,
  minLevel: keyof typeof LEVELS = 'info',
): Logger {
  const min = LEVELS[minLevel]
  const at =
    (level: keyof typeof LEVELS) =>
    (fields: LogFields, message: string): void => {
      if (LEVELS[level] < min) return
      write(`${JSON.stringify({ level, time: Date.now(), msg: message, ...fields })}\n`)
    }
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }
}
