import type { HttpClient } from './http-client.ts'
import type { FileInfo } from './resource-info.ts'
import { fileInfo, fileList, okBody } from './rest-shapes.ts'

const textDecoder = new TextDecoder()

/**
 * The sandbox's files. Paths are absolute under the workspace (`/workspace/...`) or relative
 * to it; nothing outside the sandbox is reachable.
 *
 * @example
 * ```ts
 * await sb.files.write('/workspace/app/config.json', JSON.stringify({ debug: true }))
 * const text = await sb.files.read('/workspace/app/config.json')
 * const bytes = await sb.files.read('/workspace/logo.png', { encoding: 'binary' })
 * for (const entry of await sb.files.list('/workspace/app')) console.log(entry.name, entry.type)
 * ```
 */
export class SandboxFiles {
  readonly #http: HttpClient
  readonly #base: string

  /** @internal */
  constructor(http: HttpClient, sandboxPath: string) {
    this.#http = http
    this.#base = `${sandboxPath}/files`
  }

  /** Writes a file (text as UTF-8, or bytes), creating or replacing it. */
  write(path: string, content: string | Uint8Array): Promise<FileInfo> {
    return this.#http.json('PUT', this.#base, fileInfo, { query: { path }, raw: content })
  }

  /** Reads a file as UTF-8 text, or as bytes with `{ encoding: 'binary' }`. */
  read(path: string, options: { encoding: 'binary' }): Promise<Uint8Array>
  read(path: string, options?: { encoding?: 'utf8' }): Promise<string>
  async read(path: string, options: { encoding?: 'utf8' | 'binary' } = {}): Promise<string | Uint8Array> {
    const bytes = await this.#http.bytes('GET', this.#base, { query: { path } })
    return options.encoding === 'binary' ? bytes : textDecoder.decode(bytes)
  }

  /** Lists a directory. */
  async list(path: string): Promise<FileInfo[]> {
    return (await this.#http.json('GET', `${this.#base}/list`, fileList, { query: { path } })).entries
  }

  /** Stats a path (symlinks are reported, not followed). */
  stat(path: string): Promise<FileInfo> {
    return this.#http.json('GET', `${this.#base}/stat`, fileInfo, { query: { path } })
  }

  /** Creates a directory; with `recursive`, also its parents, and no error when it exists. */
  mkdir(path: string, options: { recursive?: boolean } = {}): Promise<FileInfo> {
    return this.#http.json('POST', `${this.#base}/mkdir`, fileInfo, {
      json: { path, ...options },
      // With `recursive` a directory that exists is accepted, so a second try does no harm.
      idempotent: options.recursive === true,
    })
  }

  /** Removes a path; directories with contents need `recursive`. */
  async remove(path: string, options: { recursive?: boolean } = {}): Promise<void> {
    await this.#http.json('POST', `${this.#base}/remove`, okBody, { json: { path, ...options } })
  }

  /** Renames (moves) a path inside the sandbox. */
  rename(from: string, to: string): Promise<FileInfo> {
    return this.#http.json('POST', `${this.#base}/rename`, fileInfo, { json: { from, to } })
  }
}
