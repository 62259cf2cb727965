// What the runner says of an agent that speaks another link version than its own. Agents outlive
// their runner, so an upgraded runner meets agents an older conch started (and a downgraded one
// meets newer agents). Neither can be spoken to, and retrying will not change that: the sandbox is
// reported dead with this message as its reason.
import { LINK_VERSION } from '@conch/protocol'
import { RunnerError } from './runner-error.ts'

/**
 * The error for an agent that proved the sandbox's link secret but speaks link `version`; its
 * message becomes the sandbox's `deadReason`.
 */
export function linkMismatch(version: number): RunnerError<'UNSUPPORTED_PROTOCOL_VERSION'> {
  const by = version < LINK_VERSION ? 'an older' : 'a newer'
  return new RunnerError(
    'UNSUPPORTED_PROTOCOL_VERSION',
    `its agent was started by ${by} conch and speaks link protocol ${version}, which this runner (link protocol ${LINK_VERSION}) cannot use; destroy the sandbox and create a new one (its workspace goes with it)`,
  )
}
