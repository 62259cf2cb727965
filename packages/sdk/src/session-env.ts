import type { HttpClient } from './http-client.ts'
import { envMap, envValue, okBody } from './rest-shapes.ts'

/**
 * The exported variables of one session's shell. Changes act on the live bash, as `export`
 * and `unset` typed into it would.
 *
 * @example
 * ```ts
 * await sh.env.set('NODE_ENV', 'test')
 * await sh.env.get('NODE_ENV') // 'test'
 * await sh.env.unset('NODE_ENV')
 * ```
 */
export class SessionEnv {
  readonly #http: HttpClient
  readonly #base: string

  /** @internal */
  constructor(http: HttpClient, sessionPath: string) {
    this.#http = http
    this.#base = `${sessionPath}/env`
  }

  /** Exports `name=value` in the shell. */
  async set(name: string, value: string): Promise<void> {
    await this.#http.json('PUT', `${this.#base}/${encodeURIComponent(name)}`, okBody, { json: { value } })
  }

  /** The variable's value, or `null` when it is not set. */
  async get(name: string): Promise<string | null> {
    return (await this.#http.json('GET', `${this.#base}/${encodeURIComponent(name)}`, envValue)).value
  }

  /** Every exported variable. */
  async list(): Promise<Record<string, string>> {
    return (await this.#http.json('GET', this.#base, envMap)).env
  }

  /** Unsets the variable in the shell. */
  async unset(name: string): Promise<void> {
    await this.#http.json('DELETE', `${this.#base}/${encodeURIComponent(name)}`, okBody)
  }
}
