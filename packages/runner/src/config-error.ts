/** Bad flags, environment or host setup for `conch runner`; the message is one line for the operator. */
export class ConfigError extends Error {
  /** Creates a config error with a message for the operator. */
  constructor(message: string) {
    super(message)
    this.name = 'ConfigError'
  }
}
