// Argument schemas several tools share, with the descriptions a model reads.
import { z } from 'zod'

/** The sandbox a call acts on. */
export const sandboxArg = z.string().describe('Sandbox id, as returned by sandbox_create or sandbox_list.')

/** A session of that sandbox. */
export const sessionArg = z
  .string()
  .default('default')
  .describe(
    'Session name; each session is one bash whose state (cwd, env, functions) persists between calls.',
  )

/** A sandbox path. */
export const pathArg = z
  .string()
  .min(1)
  .describe('Path in the sandbox: absolute (/workspace/...) or relative to the workspace.')

/** A command line. */
export const commandArg = z.string().min(1).describe('The bash command line.')
