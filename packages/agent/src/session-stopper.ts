// The interrupt and timeout procedures (run-stopper.ts) wired to one session's runs: the stopper
// reaches bash, the marker scanners, the command files and the output log through the session's
// parts, the lines in bash through the write-ahead window, and the active run and its end through
// the runs themselves (session-runs.ts). Built once per shell; nothing here runs per run.
import type { StreamName } from '@conch/protocol'
import { RunStopper } from './run-stopper.ts'
import type { RunWindow } from './run-window.ts'
import type { Run } from './session-run.ts'
import type { RunsHost } from './session-runs.ts'

const STREAMS: readonly StreamName[] = ['stdout', 'stderr']

/**
 * What the stopper needs of the runs themselves. Its functions are called unbound, so they are
 * arrow functions.
 */
export interface StoppedRuns {
  /** Whether `run` is the active run. */
  readonly isActive: (run: Run) => boolean
  /** Stops expecting `nonce` on `stream` (what was kept back as a possible marker is output). */
  readonly forget: (stream: StreamName, nonce: string) => void
  /** Ends a stopped run whose markers have arrived, and moves the runs on. */
  readonly finishStopped: (run: Run) => void
}

/** The stopper of the session `host`, whose lines in bash are `window`'s and runs are `runs`. */
export function sessionStopper(host: RunsHost, window: RunWindow, runs: StoppedRuns): RunStopper {
  const opts = host.opts
  return new RunStopper({
    get sessionId() {
      return host.sessionId
    },
    get bashPid() {
      return host.bash.pid
    },
    get closed() {
      return host.closed
    },
    get windowRuns() {
      return window.runs
    },
    processTable: opts.processTable,
    clock: opts.clock,
    logger: opts.logger,
    killGraceMs: opts.killGraceMs,
    isActive: runs.isActive,
    expect: (nonce) => {
      for (const s of STREAMS) host.scanners[s].expect(nonce)
    },
    holdCommand: (slot, nonce) => host.files.holdCommand(slot, host.framing.heldBody(nonce)),
    writeSync: (nonce) => host.bash.write(host.framing.syncLine(nonce)),
    markAllEnded: (stream) => window.markAllEnded(stream),
    forget: runs.forget,
    logUnowned: (stream, bytes) => host.log.appendData(stream, null, bytes),
    finishStopped: runs.finishStopped,
    killBash: (reason) => host.close({ code: null, signal: 'SIGKILL', reason }),
  })
}
