// The VM tier's base image: a kernel and a root-filesystem initramfs built from Debian packages
// by scripts/build-vm-image.mjs and cached outside the repository. `ensureVmImage` runs the
// script, which builds only when its cache key (a hash of the script) has no image yet.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { VmError } from './vm-error.ts'

/** The build script, run by the same Node as the tests. */
export const BUILD_SCRIPT = fileURLToPath(new URL('../scripts/build-vm-image.mjs', import.meta.url))

/** A built image. */
export interface VmImage {
  /** The folder holding the image. */
  dir: string
  /** The kernel. */
  kernel: string
  /** The zstd-compressed newc root filesystem. */
  initramfs: string
}

/** Builds the base image unless it is cached, and returns where it is. */
export async function ensureVmImage(): Promise<VmImage> {
  const child = spawn(process.execPath, [BUILD_SCRIPT], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8')
  })
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8')
  })
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', resolve)
  })
  const dir = stdout.trim()
  if (code !== 0 || !dir) {
    throw new VmError('VM_IMAGE_BUILD_FAILED', `building the VM image failed (exit ${code}):\n${stderr}`)
  }
  const image = { dir, kernel: join(dir, 'vmlinuz'), initramfs: join(dir, 'rootfs.cpio.zst') }
  if (!existsSync(image.kernel) || !existsSync(image.initramfs)) {
    throw new VmError(
      'VM_IMAGE_BUILD_FAILED',
      `the VM image at ${dir} is incomplete; delete the folder to rebuild it`,
    )
  }
  return image
}
