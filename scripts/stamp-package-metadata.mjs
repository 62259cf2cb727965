#!/usr/bin/env node
// Writes `repository`, `homepage` and `bugs` into every public package's package.json from the
// GitHub repository the release workflow runs in (GITHUB_SERVER_URL and GITHUB_REPOSITORY, set
// by Actions). npm provenance requires `repository.url` to name the repository that built the
// package, so the fields come from where the build really ran, and a fork publishes with its
// own. Run by release.yml right before publishing; refuses to guess outside Actions.
//
//   node scripts/stamp-package-metadata.mjs [repository root]
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '..')
const server = process.env.GITHUB_SERVER_URL
const repository = process.env.GITHUB_REPOSITORY
if (!server || !/^[\w.-]+\/[\w.-]+$/.test(repository ?? '')) {
  process.stderr.write('stamp-package-metadata: set GITHUB_SERVER_URL and GITHUB_REPOSITORY (owner/name)\n')
  process.exit(2)
}
const web = `${server.replace(/\/+$/, '')}/${repository}`

for (const name of readdirSync(join(root, 'packages'))) {
  const file = join(root, 'packages', name, 'package.json')
  let manifest
  try {
    manifest = JSON.parse(readFileSync(file, 'utf8'))
  } catch {
    continue
  }
  if (manifest.private === true) continue
  manifest.repository = { type: 'git', url: `git+${web}.git`, directory: `packages/${name}` }
  manifest.homepage = `${web}/tree/main/packages/${name}#readme`
  manifest.bugs = { url: `${web}/issues` }
  writeFileSync(file, `${JSON.stringify(manifest, null, 2)}\n`)
  process.stderr.write(`stamp-package-metadata: ${manifest.name} → ${web}\n`)
}
