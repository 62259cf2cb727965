// The docker CLI against one daemon: `docker(args)` runs it with that daemon's DOCKER_HOST and
// returns stdout, throwing CONTAINER_COMMAND_FAILED with stderr when it exits non-zero.
import { spawn } from 'node:child_process'
import { ContainerError } from './container-error.ts'

/** A docker CLI bound to one daemon. */
export interface DockerCli {
  /** The daemon's address (`unix:///...`). */
  readonly host: string
  /** Runs `docker <args>`; resolves with stdout, rejects with stderr on a non-zero exit. */
  run(args: readonly string[], options?: { input?: string | Buffer }): Promise<string>
  /** Runs `docker <args>`; resolves with the exit code, stdout and stderr. */
  result(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }>
}

/** The docker CLI for the daemon at `host`. */
export function dockerCli(host: string): DockerCli {
  const result = (
    args: readonly string[],
    input?: string | Buffer,
  ): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((resolve, reject) => {
      const child = spawn('docker', args, {
        env: { ...process.env, DOCKER_HOST: host, DOCKER_CLI_HINTS: 'false' },
        stdio: ['pipe', 'pipe', 'pipe'],
      })
      let stdout = ''
      let stderr = ''
      child.stdout.on('data', (c: Buffer) => {
        stdout += c.toString('utf8')
      })
      child.stderr.on('data', (c: Buffer) => {
        stderr += c.toString('utf8')
      })
      child.once('error', (error) =>
        reject(
          new ContainerError('CONTAINER_TOOL_MISSING', `docker CLI: ${error.message}; install docker.io`),
        ),
      )
      child.once('close', (code) => resolve({ code: code ?? 1, stdout, stderr }))
      child.stdin.end(input)
    })
  return {
    host,
    result: (args) => result(args),
    async run(args, options = {}) {
      const r = await result(args, options.input)
      if (r.code !== 0) {
        throw new ContainerError(
          'CONTAINER_COMMAND_FAILED',
          `docker ${args.slice(0, 3).join(' ')} exited with ${r.code}: ${r.stderr.trim() || r.stdout.trim()}`,
        )
      }
      return r.stdout
    },
  }
}
