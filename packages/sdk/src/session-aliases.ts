import type { HttpClient } from './http-client.ts'
import { aliasMap, okBody } from './rest-shapes.ts'

/**
 * The aliases of one session's shell; they act on later runs as `alias` typed into it would.
 *
 * @example
 * ```ts
 * await sh.aliases.add('ll', 'ls -la')
 * await sh.run('ll')
 * await sh.aliases.remove('ll')
 * ```
 */
export class SessionAliases {
  readonly #http: HttpClient
  readonly #base: string

  /** @internal */
  constructor(http: HttpClient, sessionPath: string) {
    this.#http = http
    this.#base = `${sessionPath}/aliases`
  }

  /** Defines (or redefines) an alias. */
  async add(name: string, value: string): Promise<void> {
    await this.#http.json('PUT', `${this.#base}/${encodeURIComponent(name)}`, okBody, { json: { value } })
  }

  /** Every alias, name to expansion. */
  async list(): Promise<Record<string, string>> {
    return (await this.#http.json('GET', this.#base, aliasMap)).aliases
  }

  /** Removes an alias. */
  async remove(name: string): Promise<void> {
    await this.#http.json('DELETE', `${this.#base}/${encodeURIComponent(name)}`, okBody)
  }
}
