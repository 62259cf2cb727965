import { type ChildProcess, type SpawnOptions, spawn } from 'node:child_process'

/** Starts a child process; injected so the agent's process creation has one seam. */
export type Spawn = (command: string, args: readonly string[], options: SpawnOptions) => ChildProcess

/** The real `child_process.spawn`. */
export const nodeSpawn: Spawn = (command, args, options) => spawn(command, args, options)
