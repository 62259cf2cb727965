// The VM harness's one error class: a code the test report can show and a message that says
// what happened and what to do.

/** Codes of the VM harness's errors. */
export type VmErrorCode =
  | 'VM_TOOL_MISSING'
  | 'VM_IMAGE_BUILD_FAILED'
  | 'VM_BOOT_FAILED'
  | 'VM_BOOT_TIMEOUT'
  | 'VM_COMMAND_FAILED'

/** A failure to build, boot or drive the test VM. */
export class VmError extends Error {
  /** What failed. */
  readonly code: VmErrorCode

  /** Creates an error with a code and a message saying what to do. */
  constructor(code: VmErrorCode, message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'VmError'
    this.code = code
  }
}
