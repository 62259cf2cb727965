// Mounts a killed runner leaves under its state directory. A sandbox's workspace disk is a loop
// mount in `<state dir>/sandboxes/<id>/disk` that outlives its runner by design (a restarted
// runner adopts it), so a test or bench that ends with sandboxes alive leaves one mount and one
// loop device per sandbox behind, and the state directory cannot be removed (EBUSY). The harness
// lazily unmounts them once the runner and its sandboxes' processes are gone.
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

/** Mount points at or below `dir` in this process's mount namespace, deepest first. */
export function mountsUnder(dir: string): string[] {
  const prefix = dir.endsWith('/') ? dir : `${dir}/`
  const points: string[] = []
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    // Field 5 is the mount point, with space, tab, newline and backslash as octal escapes.
    const field = line.split(' ')[4]
    if (field === undefined) continue
    const point = field.replace(/\\([0-7]{3})/g, (_, octal: string) =>
      String.fromCharCode(Number.parseInt(octal, 8)),
    )
    if (point === dir || point.startsWith(prefix)) points.push(point)
  }
  return points.sort((a, b) => b.length - a.length)
}

/** Lazily unmounts everything mounted at or below `dir`; a mount that will not go is reported. */
export function unmountUnder(dir: string): void {
  for (const point of mountsUnder(dir)) {
    const result = spawnSync('umount', ['-l', point], { encoding: 'utf8' })
    if (result.status !== 0) process.stderr.write(`[e2e] could not unmount ${point}: ${result.stderr}`)
  }
}
