// Reads the TSDoc comments of the protocol's zod schemas, which zod's JSON Schema output does
// not carry. For every `export const Name = z.object({...})` (or `Base.extend({...})`, or a
// `z.discriminatedUnion` of inline objects) it records the schema's own comment and, per field,
// the field's comment and the name of the schema the field is built from. The generators join
// these with the JSON Schema by schema name and field name.
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

/** One field of an object schema, as its source declares it. */
export interface FieldDoc {
  /** The field's TSDoc text. */
  doc: string
  /** The exported schema the field's value is built from, when there is one. */
  ref: string | null
}

/** One exported schema, as its source declares it. */
export interface SchemaDoc {
  /** The TSDoc text on the `export const`. */
  summary: string
  /** Fields of the object, including the ones `.extend` inherits. */
  fields: Map<string, FieldDoc>
  /** For `Base.extend({...})`: the base schema. */
  extends: string | null
}

function docOf(node: ts.Node, source: ts.SourceFile): string {
  const ranges = ts.getLeadingCommentRanges(source.text, node.getFullStart()) ?? []
  const block = ranges
    .map((r) => source.text.slice(r.pos, r.end))
    .filter((t) => t.startsWith('/**'))
    .at(-1)
  if (!block) return ''
  return block
    .replace(/^\/\*\*/, '')
    .replace(/\*\/$/, '')
    .split('\n')
    .map((line) => line.replace(/^\s*\* ?/, '').trim())
    .filter((line) => line.length > 0)
    .join(' ')
}

/** The leftmost identifier of an expression chain: `SessionId.optional()` gives `SessionId`. */
function rootIdentifier(expr: ts.Expression): string | null {
  let node: ts.Expression = expr
  for (;;) {
    if (ts.isIdentifier(node)) return node.text
    if (ts.isCallExpression(node)) node = node.expression
    else if (ts.isPropertyAccessExpression(node)) node = node.expression
    else return null
  }
}

/** The schema a field is built from: `X.optional()` and `z.array(X)` both give `X`. */
function refOf(expr: ts.Expression): string | null {
  const root = rootIdentifier(expr)
  if (root !== 'z') return root
  const arg = callsOf(expr).at(-1)?.arguments.at(-1)
  return arg ? refOf(arg) : null
}

/** Every call in an expression chain, outermost first. */
function callsOf(expr: ts.Expression): ts.CallExpression[] {
  const calls: ts.CallExpression[] = []
  let node: ts.Expression = expr
  while (ts.isCallExpression(node) || ts.isPropertyAccessExpression(node)) {
    if (ts.isCallExpression(node)) {
      calls.push(node)
      node = node.expression
    } else node = node.expression
  }
  return calls
}

function fieldsOf(literal: ts.ObjectLiteralExpression, source: ts.SourceFile): Map<string, FieldDoc> {
  const fields = new Map<string, FieldDoc>()
  for (const property of literal.properties) {
    if (!ts.isPropertyAssignment(property)) continue
    const name = property.name.getText(source).replace(/^['"]|['"]$/g, '')
    fields.set(name, { doc: docOf(property, source), ref: refOf(property.initializer) })
  }
  return fields
}

function literalTypeOf(literal: ts.ObjectLiteralExpression, key: string): string | null {
  for (const property of literal.properties) {
    if (!ts.isPropertyAssignment(property) || property.name.getText() !== key) continue
    const init = property.initializer
    if (ts.isCallExpression(init)) {
      const arg = init.arguments[0]
      if (arg && ts.isStringLiteral(arg)) return arg.text
    }
  }
  return null
}

/** Reads every schema's docs from the protocol package's source files. */
export function readProtocolDocs(): Map<string, SchemaDoc> {
  const srcDir = dirname(fileURLToPath(import.meta.resolve('@conch/protocol')))
  const docs = new Map<string, SchemaDoc>()
  for (const file of readdirSync(srcDir)) {
    if (!file.endsWith('.ts') || file.endsWith('.test.ts')) continue
    const text = readFileSync(join(srcDir, file), 'utf8')
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
    for (const statement of source.statements) {
      if (!ts.isVariableStatement(statement)) continue
      for (const decl of statement.declarationList.declarations) {
        if (!ts.isIdentifier(decl.name) || !decl.initializer) continue
        const name = decl.name.text
        const entry: SchemaDoc = { summary: docOf(statement, source), fields: new Map(), extends: null }
        for (const call of callsOf(decl.initializer)) {
          const callee = call.expression
          if (!ts.isPropertyAccessExpression(callee)) continue
          const method = callee.name.text
          const arg = call.arguments[0]
          if ((method === 'object' || method === 'extend') && arg && ts.isObjectLiteralExpression(arg)) {
            for (const [k, v] of fieldsOf(arg, source)) if (!entry.fields.has(k)) entry.fields.set(k, v)
            if (method === 'extend') entry.extends = rootIdentifier(callee.expression)
          }
          if (method === 'discriminatedUnion') {
            const key = call.arguments[0]
            const members = call.arguments[1]
            if (!key || !ts.isStringLiteral(key) || !members || !ts.isArrayLiteralExpression(members))
              continue
            for (const member of members.elements) {
              if (!ts.isCallExpression(member)) continue
              const objectArg = member.arguments[0]
              if (!objectArg || !ts.isObjectLiteralExpression(objectArg)) continue
              const variant = literalTypeOf(objectArg, key.text)
              if (variant === null) continue
              docs.set(`${name}.${variant}`, {
                summary: docOf(member, source),
                fields: fieldsOf(objectArg, source),
                extends: null,
              })
            }
          }
        }
        docs.set(name, entry)
      }
    }
  }
  for (const entry of docs.values()) {
    let base = entry.extends
    while (base) {
      const parent = docs.get(base)
      if (!parent) break
      for (const [k, v] of parent.fields) if (!entry.fields.has(k)) entry.fields.set(k, v)
      base = parent.extends
    }
  }
  return docs
}
