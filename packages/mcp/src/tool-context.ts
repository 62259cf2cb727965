// What every tool needs besides its arguments: the caller's conch client and the output budget.
import type { ConchClient } from './conch-client.ts'

/** Shared by the tools of one MCP server (one caller). */
export interface ToolContext {
  /** The caller's conch client. */
  readonly client: ConchClient
  /** Bytes of each output stream a result may carry (head and tail). */
  readonly outputBudgetBytes: number
}
