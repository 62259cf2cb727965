#!/usr/bin/env node
// Renders a Helm chart without Helm, for a machine that has neither Helm nor a cluster. It
// supports the subset of Go template syntax that deploy/helm/conch uses, and fails loudly on
// anything else, so a template that Helm would render differently cannot pass unnoticed:
//
//   {{ pipeline }}  {{- trim left  trim right -}}  {{/* comments */}}
//   values          .Values.a.b  .Release.Name/Namespace/Service  .Chart.Name/Version/AppVersion
//                   .  $  $.Values.x  "strings"  `raw strings`  numbers  true false nil  ( pipelines )
//   control         if / else if / else / end, with / else / end, range (over a list or map) / end,
//                   define "name" / end (in _helpers.tpl), include "name" ctx
//   functions       default quote squote toYaml toJson nindent indent trunc trimSuffix printf
//                   required eq ne lt gt and or not empty int toString join lower contains
//
// Output is what `helm template` prints: every non-empty manifest as a YAML document with a
// `# Source:` comment. Usage:
//   node scripts/render-chart.mjs <chart dir> [--name r] [--namespace ns] [--values f.yaml] [--set-json '{...}']
import { readdirSync, readFileSync } from 'node:fs'
import { basename, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml'

/** A template that uses syntax or functions outside the supported subset, or fails to render. */
export class TemplateError extends Error {}

// ---- lexing: text and actions ---------------------------------------------------------------

function splitActions(source, file) {
  const parts = []
  let i = 0
  while (i < source.length) {
    const open = source.indexOf('{{', i)
    if (open < 0) {
      parts.push({ text: source.slice(i) })
      break
    }
    parts.push({ text: source.slice(i, open) })
    const close = source.indexOf('}}', open + 2)
    if (close < 0) throw new TemplateError(`${file}: unclosed {{`)
    let body = source.slice(open + 2, close)
    const trimLeft = /^-\s/.test(body)
    const trimRight = /\s-$/.test(body)
    if (trimLeft) body = body.slice(1)
    if (trimRight) body = body.slice(0, -1)
    parts.push({ action: body.trim(), trimLeft, trimRight, file })
    i = close + 2
  }
  for (let k = 0; k < parts.length; k++) {
    const p = parts[k]
    if (p.action === undefined) continue
    if (p.trimLeft && parts[k - 1]?.text !== undefined)
      parts[k - 1].text = parts[k - 1].text.replace(/\s+$/, '')
    if (p.trimRight && parts[k + 1]?.text !== undefined)
      parts[k + 1].text = parts[k + 1].text.replace(/^\s+/, '')
  }
  return parts.filter((p) => p.action === undefined || !p.action.startsWith('/*'))
}

function tokenize(action, where) {
  const tokens = []
  let i = 0
  while (i < action.length) {
    const c = action[i]
    if (/\s/.test(c)) {
      i++
    } else if (c === '"') {
      let j = i + 1
      while (j < action.length && action[j] !== '"') j += action[j] === '\\' ? 2 : 1
      tokens.push({ kind: 'value', value: JSON.parse(action.slice(i, j + 1)) })
      i = j + 1
    } else if (c === '`') {
      const j = action.indexOf('`', i + 1)
      tokens.push({ kind: 'value', value: action.slice(i + 1, j) })
      i = j + 1
    } else if (c === '|' || c === '(' || c === ')') {
      tokens.push({ kind: c })
      i++
    } else {
      const m = /^[^\s|()]+/.exec(action.slice(i))
      const word = m[0]
      if (/^-?\d+(\.\d+)?$/.test(word)) tokens.push({ kind: 'value', value: Number(word) })
      else if (word === 'true' || word === 'false') tokens.push({ kind: 'value', value: word === 'true' })
      else if (word === 'nil') tokens.push({ kind: 'value', value: null })
      else if (word.startsWith('.') || word === '$' || word.startsWith('$.'))
        tokens.push({ kind: 'field', path: word })
      else if (/^[A-Za-z][A-Za-z0-9]*$/.test(word)) tokens.push({ kind: 'ident', name: word })
      else
        throw new TemplateError(
          `${where}: unsupported syntax "${word}" (variables and methods are outside the renderer's subset)`,
        )
      i += word.length
    }
  }
  return tokens
}

// ---- parsing: a tree of nodes ---------------------------------------------------------------

function parsePipeline(tokens, where) {
  let pos = 0
  const pipeline = () => {
    const commands = [[]]
    while (pos < tokens.length && tokens[pos].kind !== ')') {
      const t = tokens[pos++]
      if (t.kind === '|') commands.push([])
      else if (t.kind === '(') {
        commands.at(-1).push({ kind: 'sub', pipeline: pipeline() })
        if (tokens[pos++]?.kind !== ')') throw new TemplateError(`${where}: unbalanced parentheses`)
      } else commands.at(-1).push(t)
    }
    if (commands.some((c) => c.length === 0)) throw new TemplateError(`${where}: empty command in a pipeline`)
    return commands
  }
  const result = pipeline()
  if (pos !== tokens.length) throw new TemplateError(`${where}: unbalanced parentheses`)
  return result
}

function parseTemplate(parts) {
  let pos = 0
  const block = (terminators) => {
    const nodes = []
    while (pos < parts.length) {
      const p = parts[pos]
      if (p.text !== undefined) {
        nodes.push({ kind: 'text', text: p.text })
        pos++
        continue
      }
      const where = `${p.file}: {{ ${p.action} }}`
      const [keyword, ...rest] = p.action.split(/\s+/)
      const restText = p.action.slice(keyword.length).trim()
      if (terminators.includes(keyword)) return { nodes, end: keyword, rest: restText, where }
      pos++
      if (keyword === 'if' || keyword === 'with') {
        const branches = [{ pipeline: parsePipeline(tokenize(restText, where), where) }]
        let elseNodes = []
        for (;;) {
          const inner = block(['else', 'end'])
          branches.at(-1).nodes = inner.nodes
          pos++
          if (inner.end === 'end') break
          if (inner.rest.startsWith('if ') && keyword === 'if') {
            branches.push({ pipeline: parsePipeline(tokenize(inner.rest.slice(3), where), where) })
            continue
          }
          if (inner.rest !== '') throw new TemplateError(`${where}: unsupported else clause "${inner.rest}"`)
          const tail = block(['end'])
          pos++
          elseNodes = tail.nodes
          break
        }
        nodes.push({ kind: keyword, branches, elseNodes })
      } else if (keyword === 'range') {
        const inner = block(['end'])
        pos++
        nodes.push({
          kind: 'range',
          pipeline: parsePipeline(tokenize(restText, where), where),
          nodes: inner.nodes,
        })
      } else if (keyword === 'define') {
        const name = JSON.parse(rest.join(' '))
        const inner = block(['end'])
        pos++
        nodes.push({ kind: 'define', name, nodes: inner.nodes })
      } else if (keyword === 'else' || keyword === 'end') {
        throw new TemplateError(`${where}: ${keyword} without a block`)
      } else {
        nodes.push({ kind: 'action', pipeline: parsePipeline(tokenize(p.action, where), where), where })
      }
    }
    if (terminators.length > 0)
      throw new TemplateError(`missing {{ end }} (expected one of ${terminators.join(', ')})`)
    return { nodes }
  }
  return block([]).nodes
}

// ---- evaluation -----------------------------------------------------------------------------

const isEmpty = (v) =>
  v === null ||
  v === undefined ||
  v === false ||
  v === 0 ||
  v === '' ||
  (Array.isArray(v) && v.length === 0) ||
  (typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0)

const indentText = (n, s) =>
  String(s)
    .split('\n')
    .map((line) => (line === '' ? line : ' '.repeat(n) + line))
    .join('\n')

function printf(format, ...args) {
  let k = 0
  return format.replace(/%[sdv%]/g, (m) => (m === '%%' ? '%' : String(args[k++] ?? '')))
}

function toYaml(v) {
  if (v === null || v === undefined) return 'null'
  return stringifyYaml(v, { lineWidth: 0 }).replace(/\n$/, '')
}

function lookup(path, dot, root, where) {
  let value
  let keys
  if (path === '.') return dot
  if (path === '$') return root
  if (path.startsWith('$.')) {
    value = root
    keys = path.slice(2).split('.')
  } else {
    value = dot
    keys = path.slice(1).split('.')
  }
  for (const key of keys) {
    if (value === null || value === undefined) return undefined
    if (typeof value !== 'object')
      throw new TemplateError(`${where}: cannot read .${key} of a ${typeof value}`)
    value = Object.hasOwn(value, key) ? value[key] : undefined
  }
  return value
}

class Renderer {
  constructor(templates) {
    this.templates = templates
    this.functions = {
      include: (name, ctx) => {
        const t = this.templates.get(name)
        if (!t) throw new TemplateError(`include of undefined template "${name}"`)
        return this.renderNodes(t, ctx, this.root)
      },
      default: (def, v) => (isEmpty(v) ? def : v),
      quote: (v) => JSON.stringify(v === null || v === undefined ? '' : String(v)),
      squote: (v) => `'${String(v ?? '')}'`,
      toYaml,
      toJson: (v) => JSON.stringify(v),
      nindent: (n, s) => `\n${indentText(n, s)}`,
      indent: (n, s) => indentText(n, s),
      trunc: (n, s) => String(s).slice(0, n),
      trimSuffix: (suffix, s) =>
        String(s).endsWith(suffix) ? String(s).slice(0, -suffix.length) : String(s),
      printf,
      required: (message, v) => {
        if (isEmpty(v) && v !== false && v !== 0)
          throw new TemplateError(`required value missing: ${message}`)
        return v
      },
      eq: (a, b) => a === b,
      ne: (a, b) => a !== b,
      lt: (a, b) => a < b,
      gt: (a, b) => a > b,
      and: (...xs) => xs.reduce((acc, x) => (isEmpty(acc) ? acc : x)),
      or: (...xs) => xs.find((x) => !isEmpty(x)) ?? xs.at(-1),
      not: (v) => isEmpty(v),
      empty: (v) => isEmpty(v),
      int: (v) => Math.trunc(Number(v)),
      toString: (v) => String(v ?? ''),
      join: (sep, list) => (list ?? []).join(sep),
      lower: (s) => String(s).toLowerCase(),
      contains: (sub, s) => String(s).includes(String(sub)),
    }
  }

  evalArg(token, dot, where) {
    if (token.kind === 'value') return token.value
    if (token.kind === 'field') return lookup(token.path, dot, this.root, where)
    if (token.kind === 'sub') return this.evalPipeline(token.pipeline, dot, where)
    if (token.kind === 'ident') {
      const fn = this.functions[token.name]
      if (!fn) throw new TemplateError(`${where}: unknown function ${token.name}`)
      return fn()
    }
    throw new TemplateError(`${where}: unexpected token`)
  }

  evalPipeline(commands, dot, where) {
    let piped
    commands.forEach((command, index) => {
      const [head, ...args] = command
      const extra = index > 0 ? [piped] : []
      if (head.kind === 'ident') {
        const fn = this.functions[head.name]
        if (!fn) throw new TemplateError(`${where}: unknown function ${head.name}`)
        piped = fn(...args.map((a) => this.evalArg(a, dot, where)), ...extra)
      } else {
        if (args.length > 0 || extra.length > 0)
          throw new TemplateError(`${where}: a value cannot take arguments`)
        piped = this.evalArg(head, dot, where)
      }
    })
    return piped
  }

  renderNodes(nodes, dot) {
    let out = ''
    for (const node of nodes) {
      if (node.kind === 'text') out += node.text
      else if (node.kind === 'define') continue
      else if (node.kind === 'action') {
        const v = this.evalPipeline(node.pipeline, dot, node.where)
        if (v !== null && v !== undefined && typeof v === 'object') {
          throw new TemplateError(`${node.where}: prints a map or list; pipe it through toYaml`)
        }
        out += v === null || v === undefined ? '' : String(v)
      } else if (node.kind === 'if' || node.kind === 'with') {
        const hit = node.branches.find((b) => {
          b.value = this.evalPipeline(b.pipeline, dot, 'if')
          return !isEmpty(b.value)
        })
        if (hit) out += this.renderNodes(hit.nodes, node.kind === 'with' ? hit.value : dot)
        else out += this.renderNodes(node.elseNodes, dot)
      } else if (node.kind === 'range') {
        const v = this.evalPipeline(node.pipeline, dot, 'range')
        const items = Array.isArray(v) ? v : v && typeof v === 'object' ? Object.values(v) : []
        for (const item of items) out += this.renderNodes(node.nodes, item)
      }
    }
    return out
  }
}

function collectDefines(nodes, into) {
  for (const node of nodes) if (node.kind === 'define') into.set(node.name, node.nodes)
}

function deepMerge(base, over) {
  if (over === null || typeof over !== 'object' || Array.isArray(over)) return over
  const out = { ...(base && typeof base === 'object' && !Array.isArray(base) ? base : {}) }
  for (const [k, v] of Object.entries(over)) out[k] = deepMerge(out[k], v)
  return out
}

/**
 * Renders every template of the chart in `chartDir`. `values` is merged over values.yaml.
 * Returns the manifests as `{ source, text }`, empty ones left out.
 */
export function renderChart(chartDir, { values = {}, releaseName = 'conch', namespace = 'default' } = {}) {
  const chart = parseYaml(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8'))
  const defaults = parseYaml(readFileSync(join(chartDir, 'values.yaml'), 'utf8')) ?? {}
  const templatesDir = join(chartDir, 'templates')
  const files = readdirSync(templatesDir)
    .filter((f) => /\.(yaml|yml|tpl)$/.test(f))
    .sort()
  const parsed = new Map(
    files.map((f) => [f, parseTemplate(splitActions(readFileSync(join(templatesDir, f), 'utf8'), f))]),
  )
  const defines = new Map()
  for (const nodes of parsed.values()) collectDefines(nodes, defines)
  const renderer = new Renderer(defines)
  renderer.root = {
    Values: deepMerge(defaults, values),
    Release: { Name: releaseName, Namespace: namespace, Service: 'Helm' },
    Chart: { Name: chart.name, Version: chart.version, AppVersion: chart.appVersion },
  }
  const out = []
  for (const [file, nodes] of parsed) {
    if (file.startsWith('_')) continue
    const text = renderer.renderNodes(nodes, renderer.root)
    for (const doc of text.split(/^---\s*$/m)) {
      if (doc.replace(/#.*$/gm, '').trim() === '') continue
      out.push({ source: `${basename(chartDir)}/templates/${file}`, text: `${doc.trim()}\n` })
    }
  }
  return out
}

function main(argv) {
  const [chartDir, ...rest] = argv
  if (!chartDir || chartDir === '--help') {
    process.stdout.write(
      "usage: node scripts/render-chart.mjs <chart dir> [--name r] [--namespace ns] [--values f.yaml] [--set-json '{...}']\n",
    )
    process.exit(chartDir ? 0 : 2)
  }
  const options = { values: {} }
  for (let i = 0; i < rest.length; i += 2) {
    const [flag, value] = [rest[i], rest[i + 1]]
    if (flag === '--name') options.releaseName = value
    else if (flag === '--namespace') options.namespace = value
    else if (flag === '--values')
      options.values = deepMerge(options.values, parseYaml(readFileSync(value, 'utf8')))
    else if (flag === '--set-json') options.values = deepMerge(options.values, JSON.parse(value))
    else {
      process.stderr.write(`render-chart: unknown flag ${flag}\n`)
      process.exit(2)
    }
  }
  try {
    for (const m of renderChart(chartDir, options))
      process.stdout.write(`---\n# Source: ${m.source}\n${m.text}`)
  } catch (error) {
    if (!(error instanceof TemplateError)) throw error
    process.stderr.write(`render-chart: ${error.message}\n`)
    process.exit(1)
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) main(process.argv.slice(2))
