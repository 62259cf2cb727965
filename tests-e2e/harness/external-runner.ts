// A runner the suite did not start: one already serving at CONCH_E2E_URL with the API key in
// CONCH_E2E_API_KEY (a container, a VM, a remote host). When both are set, the e2e fixture
// drives that runner instead of spawning one per file; the suite then tests whatever is behind
// the URL through the SDK alone. Files that need to kill or restart their runner
// (restart.test.ts) start their own and do not use this.

/** What a test needs of its runner, whoever started it. */
export interface E2eRunner extends AsyncDisposable {
  /** Base URL of the runner. */
  readonly url: string
  /** The runner's API key. */
  readonly apiKey: string
  /** Environment to give sandboxes (a sweep marker for a runner the suite started). */
  readonly sandboxEnv: Record<string, string>
  /** True while the runner serves. */
  isRunning(): boolean
}

/** The environment variable naming an external runner's base URL. */
export const EXTERNAL_URL_ENV = 'CONCH_E2E_URL'
/** The environment variable holding an external runner's API key. */
export const EXTERNAL_KEY_ENV = 'CONCH_E2E_API_KEY'

/**
 * The external runner named by CONCH_E2E_URL and CONCH_E2E_API_KEY, or null when neither is
 * set. Throws when only one of them is, or when the URL is not http(s).
 */
export function externalRunner(env: NodeJS.ProcessEnv = process.env): E2eRunner | null {
  const url = env[EXTERNAL_URL_ENV]
  const apiKey = env[EXTERNAL_KEY_ENV]
  if (!url && !apiKey) return null
  if (!url || !apiKey) {
    throw new Error(
      `set both ${EXTERNAL_URL_ENV} and ${EXTERNAL_KEY_ENV} to run the e2e suite against a runner`,
    )
  }
  const parsed = new URL(url)
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new Error(`${EXTERNAL_URL_ENV} must be an http(s) URL, not ${url}`)
  }
  return {
    url: url.replace(/\/+$/, ''),
    apiKey,
    sandboxEnv: {},
    isRunning: () => true,
    // The suite did not start it, so it leaves it running.
    async [Symbol.asyncDispose]() {},
  }
}
