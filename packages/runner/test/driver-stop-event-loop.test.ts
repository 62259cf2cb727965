// A namespace sandbox stopped, in a runner used in process, at the moment its process has ended
// but Node has not reaped it: the stop waits for the exit, and that wait must hold the event
// loop itself, since nothing else does there (no listening server, the link closed). The
// script runs in a Node process of its own, where nothing else holds the loop either; Node
// exiting before the stop completed is the failure (a delete or hibernation left unfinished,
// the sandbox's disk still mounted). Fails (never skips) when the host cannot run namespace
// sandboxes: bubblewrap comes from apt, and the runner must be root.
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const SCRIPT = fileURLToPath(new URL('./driver-stop-event-loop.ts', import.meta.url))

describe('namespace driver stop in an in-process runner', () => {
  it('completes when the sandbox process ended and nothing else holds the event loop', () => {
    const result = spawnSync(process.execPath, ['--conditions=source', SCRIPT], {
      encoding: 'utf8',
      timeout: 90_000,
    })
    expect(result.stdout + result.stderr).not.toMatch(/unsettled top-level await/)
    expect(result.stdout, result.stderr).toBe('stopped\n')
    expect(result.status, result.stderr).toBe(0)
  }, 120_000)
})
