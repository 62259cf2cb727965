// The runner `conch mcp` starts when it is given no runner URL: `conch runner` as a child on a
// loopback port with a fresh API key, its state in the user's state directory so sandboxes
// outlive one MCP client session. Its output stays off stdout, which belongs to MCP under stdio;
// stopping it leaves its agents running for the next start, as any runner restart does.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { generateApiKey } from './credentials.ts'

/** A runner child on loopback. */
export interface EmbeddedRunner {
  readonly url: string
  readonly apiKey: string
  close(): Promise<void>
}

/** Where an embedded runner keeps its state: CONCH_STATE_DIR, else `$XDG_STATE_HOME/conch`. */
export function embeddedStateDir(env: NodeJS.ProcessEnv): string {
  if (env.CONCH_STATE_DIR) return env.CONCH_STATE_DIR
  return join(env.XDG_STATE_HOME || join(homedir(), '.local', 'state'), 'conch')
}

/** Starts `conch runner` with this process's entry point and resolves once it listens. */
export async function startEmbeddedRunner(): Promise<EmbeddedRunner> {
  const apiKey = generateApiKey()
  const entry = process.argv[1] as string
  const child = spawn(
    process.execPath,
    [...process.execArgv, entry, 'runner', '--host', '127.0.0.1', '--port', '0', '--log-format', 'json'],
    {
      env: { ...process.env, CONCH_API_KEY: apiKey, CONCH_STATE_DIR: embeddedStateDir(process.env) },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  )
  const exited = once(child, 'exit')
  let output = ''
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-16_384)
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output)
      if (match) resolve(match[1] as string)
    })
    void exited.then(() => reject(new Error(`the embedded runner exited before it listened:\n${output}`)))
  })
  // Its log lines go on to stderr, where MCP clients collect a server's diagnostics.
  child.stdout.removeAllListeners('data')
  child.stdout.pipe(process.stderr)
  return {
    url,
    apiKey,
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill('SIGTERM')
      await exited
    },
  }
}
