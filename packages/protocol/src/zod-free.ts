// `@conch/protocol/zod-free`: the part of the protocol a process can hold without zod (the
// agent, one process per sandbox, and the link it speaks). Every module reachable from here
// imports no zod at runtime (types only); a test walks the imports and fails when one does. Its
// checks of untrusted input run on JSON Schema generated from the zod schemas (see
// agent-inbound.ts). Types come from the main entry with `import type`.
export {
  HOST_FRAME_TYPE_NAMES,
  isAgentMethodName,
  parseAgentArgs,
  parseAgentParams,
  parseHostFrame,
} from './agent-inbound.ts'
export {
  AGENT_ENV_PREFIX,
  AGENT_NODE_FLAGS,
  agentCommand,
  argvToRecord,
  compileCacheFlag,
  WORKSPACE_PATH,
} from './agent-launch.ts'
export { assertNever } from './assert-never.ts'
export { boundedErrorDetails, MAX_ERROR_DETAILS_BYTES } from './bounded-error-details.ts'
export { CodedError, type CodedErrorOptions } from './coded-error.ts'
export { DEFAULT_SESSION_ID } from './default-session.ts'
export { ERROR_STATUS } from './error-status.ts'
export { check, type JsonSchema, type Shape, ShapeError, shapeOf } from './json-shape.ts'
export { clampTimeout, DEFAULT_SANDBOX_LIMITS, LIMITS } from './limits.ts'
export { isLinkHello, LINK_VERSION, linkVersionOf } from './link-version.ts'
export { REFINEMENTS, type Refinement, type RefinementName } from './refinements.ts'
