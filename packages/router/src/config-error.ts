/** Bad flags or environment for `conch-router`; the message is one line for the operator. */
export class ConfigError extends Error {
  /** Creates a config error with a message for the operator. */
  constructor(message: string) {
    super(message)
    this.name = 'ConfigError'
  }
}
