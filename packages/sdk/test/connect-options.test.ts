// What `Sandbox.create` and `Sandbox.connect` accept before they touch the network: a runner URL
// without its scheme is a typed mistake that says how to write it, and `apiKey` takes the
// `string | undefined` of `process.env` under `exactOptionalPropertyTypes`.
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'
import { ConchError, ConnectionError, type ConnectOptions, Sandbox } from '../src/index.ts'

/** A fetch that records whether it was called; the URL check must come before any request. */
function recordingFetch(): { fetch: ConnectOptions['fetch']; calls: string[] } {
  const calls: string[] = []
  return {
    calls,
    fetch: async (input) => {
      calls.push(String(input))
      throw new TypeError('fetch failed')
    },
  }
}

describe('runner url', () => {
  for (const url of ['localhost:7878', '127.0.0.1:7878', 'runner.internal', 'ftp://127.0.0.1:7878', '']) {
    it(`rejects ${JSON.stringify(url)} with a BAD_REQUEST that names http://`, async () => {
      const { fetch, calls } = recordingFetch()
      const err = await Sandbox.create({ url, apiKey: 'conch_0123456789abcdef', fetch }).catch(
        (e: unknown) => e,
      )
      expect(err).toBeInstanceOf(ConchError)
      expect(err).not.toBeInstanceOf(ConnectionError)
      expect((err as ConchError).code).toBe('BAD_REQUEST')
      expect((err as ConchError).message).toContain('http://')
      expect((err as ConchError).message).toContain(JSON.stringify(url))
      expect(calls).toEqual([])
      const connectErr = await Sandbox.connect('sb_x', {
        url,
        apiKey: 'conch_0123456789abcdef',
        fetch,
      }).catch((e: unknown) => e)
      expect((connectErr as ConchError).code).toBe('BAD_REQUEST')
    })
  }

  it('lets an http url through to fetch, where an unreachable runner is a ConnectionError', async () => {
    const { fetch, calls } = recordingFetch()
    const err = await Sandbox.create({
      url: 'http://localhost:7878',
      apiKey: 'conch_0123456789abcdef',
      fetch,
    }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ConnectionError)
    expect(calls.length).toBeGreaterThan(0)
    expect(calls[0]).toMatch(/^http:\/\/localhost:7878\//)
  })
})

describe('apiKey from the environment', () => {
  it('typechecks the docs sample under exactOptionalPropertyTypes', () => {
    // The repository's tsconfig leaves exactOptionalPropertyTypes off; users may turn it on, so
    // the quickstart's call is compiled here with it on.
    const entry = join(dirname(fileURLToPath(import.meta.url)), '..', 'src', 'index.ts')
    const sample = join(dirname(entry), '__exact-optional-sample.ts')
    const code = [
      `import { Sandbox } from ${JSON.stringify(entry)}`,
      'declare const env: Record<string, string | undefined>',
      "export const sb = Sandbox.create({ url: 'http://127.0.0.1:7878', apiKey: env.CONCH_API_KEY })",
      "export const again = Sandbox.connect('sb_x', { url: 'http://127.0.0.1:7878', token: env.TOKEN })",
    ].join('\n')
    const options: ts.CompilerOptions = {
      strict: true,
      exactOptionalPropertyTypes: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2023,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      allowImportingTsExtensions: true,
      lib: ['lib.es2023.d.ts', 'lib.esnext.disposable.d.ts', 'lib.dom.d.ts'],
      types: [],
    }
    const host = ts.createCompilerHost(options)
    const readFile = host.readFile.bind(host)
    host.readFile = (file) => (file === sample ? code : readFile(file))
    const fileExists = host.fileExists.bind(host)
    host.fileExists = (file) => file === sample || fileExists(file)
    const getSourceFile = host.getSourceFile.bind(host)
    host.getSourceFile = (file, lang, ...rest) =>
      file === sample ? ts.createSourceFile(file, code, lang) : getSourceFile(file, lang, ...rest)
    const program = ts.createProgram([sample], options, host)
    const errors = ts
      .getPreEmitDiagnostics(program, program.getSourceFile(sample))
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))
    expect(errors).toEqual([])
  })
})
