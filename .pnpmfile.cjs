// pnpm hooks for the workspace.
//
// beforePacking: a published package's manifest names no workspace package its build bundles.
// @conch/runner's sources import @conch/protocol and start @conch/agent, so in the workspace they
// are dependencies; its dist/ carries both (bundled by packages/runner/scripts/build.ts), so the
// packed manifest drops them and npm never looks for them. See docs/RELEASING.md.
const BUNDLED = { '@conch/runner': ['@conch/protocol', '@conch/agent'] }

module.exports = {
  hooks: {
    beforePacking(pkg) {
      for (const name of BUNDLED[pkg.name] ?? []) delete pkg.dependencies?.[name]
      return pkg
    },
  },
}
