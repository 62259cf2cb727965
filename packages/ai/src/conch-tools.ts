// Every conch tool, in the order a model reads them, and the subset that acts inside one
// sandbox (what an agent given its own sandbox needs).
import type { ConchTool } from './conch-tool.ts'
import { fileEdit, fileList, fileRead, fileWrite } from './file-tools.ts'
import { portExpose, portList } from './port-tools.ts'
import { processKill, processOutput, processStart } from './process-tools.ts'
import { exec, sandboxCreate, sandboxDestroy, sandboxList } from './sandbox-tools.ts'
import { sessionCreate, sessionList, shellInterrupt, shellRun } from './shell-tools.ts'
import { restore, snapshot } from './snapshot-tools.ts'

/** Tools that act inside a sandbox named by their `sandbox` argument. */
export const SANDBOX_TOOLS: readonly ConchTool[] = [
  shellRun,
  shellInterrupt,
  sessionCreate,
  sessionList,
  exec,
  processStart,
  processOutput,
  processKill,
  fileRead,
  fileWrite,
  fileEdit,
  fileList,
  snapshot,
  portList,
  portExpose,
]

/** Every tool: the sandbox tools and the ones that create, list and destroy sandboxes. */
export const CONCH_TOOLS: readonly ConchTool[] = [
  sandboxCreate,
  sandboxList,
  sandboxDestroy,
  restore,
  ...SANDBOX_TOOLS,
]
