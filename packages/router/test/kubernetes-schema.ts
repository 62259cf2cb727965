// Checks rendered Kubernetes manifests against the Kubernetes API's own schemas, twice: at run
// time with the validators kubernetes-models generates from the OpenAPI document (types,
// formats, required fields, enums), and at compile time with its TypeScript interfaces, whose
// excess-property check catches a misspelt or misplaced field, which the OpenAPI schemas allow.
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

/** A manifest as parsed from YAML. */
export interface Manifest {
  apiVersion: string
  kind: string
  metadata?: { name?: string }
  [key: string]: unknown
}

/** The kubernetes-models module of a kind: `apps/v1` + `StatefulSet` → `kubernetes-models/apps/v1/StatefulSet`. */
function modelPath(m: Manifest): string {
  return `kubernetes-models/${m.apiVersion}/${m.kind}`
}

/** Validates each manifest with the generated run-time validator; returns the problems. */
export async function schemaProblems(manifests: readonly Manifest[]): Promise<string[]> {
  const problems: string[] = []
  for (const m of manifests) {
    const module = (await import(modelPath(m))) as Record<string, new (data: unknown) => { validate(): void }>
    const Model = module[m.kind]
    if (!Model) {
      problems.push(`${m.kind} ${m.metadata?.name}: no model for ${m.apiVersion}`)
      continue
    }
    try {
      new Model(m).validate()
    } catch (error) {
      problems.push(`${m.kind} ${m.metadata?.name}: ${(error as Error).message}`)
    }
  }
  return problems
}

const HERE = fileURLToPath(new URL('.', import.meta.url))

/** Type-checks each manifest as an object literal of its kind's interface; returns the errors. */
export function typeProblems(manifests: readonly Manifest[]): string[] {
  const file = `${HERE}rendered-manifests.ts`
  const lines = manifests.flatMap((m, i) => [
    `import type { I${m.kind} as T${i} } from '${modelPath(m)}'`,
    `export const m${i}: T${i} = ${JSON.stringify(m)}`,
  ])
  const source = lines.join('\n')
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    types: [],
  }
  const host = ts.createCompilerHost(options)
  const { getSourceFile, fileExists, readFile } = host
  host.getSourceFile = (name, version, ...rest) =>
    name === file ? ts.createSourceFile(name, source, version) : getSourceFile(name, version, ...rest)
  host.fileExists = (name) => name === file || fileExists(name)
  host.readFile = (name) => (name === file ? source : readFile(name))
  const program = ts.createProgram([file], options, host)
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const text = ts.flattenDiagnosticMessageText(d.messageText, '\n')
    const line = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line : -1
    const which = line >= 0 ? manifests[Math.floor(line / 2)] : undefined
    return `${which ? `${which.kind} ${which.metadata?.name}: ` : ''}${text}`
  })
}
