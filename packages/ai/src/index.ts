// @conch/ai: conch's agent tools, defined once (schemas, descriptions, bodies over @conch/sdk),
// for the MCP server and the agent-framework adapters (`@conch/ai/ai-sdk`).
export { ConchClient, type ConchClientOptions } from './conch-client.ts'
export {
  type ConchTool,
  defineTool,
  errorText,
  runTool,
  type ToolHints,
  type ToolOutcome,
  type ToolProgress,
  type ToolRunContext,
} from './conch-tool.ts'
export { CONCH_TOOLS, SANDBOX_TOOLS } from './conch-tools.ts'
export { type BudgetedText, DEFAULT_OUTPUT_BUDGET_BYTES, OutputBudget } from './output-budget.ts'
