// Tools on snapshots: checkpoint a sandbox (workspace and every shell's state) and fork a new
// sandbox from a checkpoint, so a model can try something risky and roll back.
import { Sandbox } from '@conch/sdk'
import { z } from 'zod'
import { defineTool } from './conch-tool.ts'
import { sandboxArg } from './tool-arguments.ts'

/** snapshot: a checkpoint of the sandbox. */
export const snapshot = defineTool({
  name: 'snapshot',
  title: 'Checkpoint a sandbox',
  description:
    "Saves the sandbox's workspace and every session's shell state (cwd, variables, functions, aliases, history) and returns a snapshot id. Restore it with restore to get a new sandbox where the same sessions continue; background processes are listed, not continued.",
  input: {
    sandbox: sandboxArg,
    name: z.string().min(1).max(256).optional().describe('A name to recognise the snapshot by.'),
  },
  hints: {},
  async execute(args, context) {
    const sb = await context.client.sandbox(args.sandbox)
    const snap = await sb.snapshot(args.name === undefined ? {} : { name: args.name })
    return {
      text: `snapshot ${snap.id} of ${snap.sessions.length} session(s), ${snap.workspaceBytes} bytes of workspace`,
      structured: { snapshot: snap.id, sessions: snap.sessions, workspaceBytes: snap.workspaceBytes },
    }
  },
})

/** restore: a new sandbox forked from a snapshot. */
export const restore = defineTool({
  name: 'restore',
  title: 'Fork a sandbox from a snapshot',
  description:
    'Creates a new sandbox from a snapshot: the same files, and every session with its cwd, variables, functions and history, under the same session names, and the same idle settings as the original (hibernateAfterMs, idleTimeoutMs, sessionIdleTimeoutMs). Returns the new sandbox id; the original sandbox is untouched.',
  input: {
    snapshot: z.string().min(1).describe('Snapshot id, as returned by snapshot.'),
    restartProcesses: z
      .boolean()
      .default(false)
      .describe('Start again the background processes that were running.'),
  },
  hints: {},
  async execute(args, context) {
    const sb = await Sandbox.create({
      ...context.client.connectOptions,
      fromSnapshot: args.snapshot,
      restartProcesses: args.restartProcesses,
    })
    context.client.adopt(sb)
    return {
      text: `created sandbox ${sb.id} from snapshot ${args.snapshot}`,
      structured: { sandbox: sb.id, snapshot: args.snapshot },
    }
  },
})
