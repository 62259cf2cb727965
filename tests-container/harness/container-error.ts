// The container harness's one error class: a code the test report can show and a message that
// says what happened and what to do.

/** Codes of the container harness's errors. */
export type ContainerErrorCode =
  | 'CONTAINER_TOOL_MISSING'
  | 'CONTAINER_DAEMON_FAILED'
  | 'CONTAINER_BUILD_FAILED'
  | 'CONTAINER_START_FAILED'
  | 'CONTAINER_COMMAND_FAILED'

/** A failure to start the daemon, build the image or drive a container. */
export class ContainerError extends Error {
  /** What failed. */
  readonly code: ContainerErrorCode

  /** Creates an error with a code and a message saying what to do. */
  constructor(code: ContainerErrorCode, message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'ContainerError'
    this.code = code
  }
}
