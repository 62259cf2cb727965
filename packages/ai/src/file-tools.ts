// Tools on the workspace's files: read with line numbers and ranges, write, edit by exact
// replacement, and list. Paths are sandbox paths; the runner confines them to the workspace.
import { z } from 'zod'
import { defineTool } from './conch-tool.ts'
import { pathArg, sandboxArg } from './tool-arguments.ts'

/** Lines file_read returns when no limit is given. */
const DEFAULT_READ_LINES = 2_000

/** file_read. */
export const fileRead = defineTool({
  name: 'file_read',
  title: 'Read a file',
  description: `Reads a text file of the sandbox with line numbers. Pass offset (first line, 1-based) and limit (lines) to read a range; without them the first ${DEFAULT_READ_LINES} lines are returned. The answer says how many lines the file has.`,
  input: {
    sandbox: sandboxArg,
    path: pathArg,
    offset: z.number().int().positive().default(1).describe('First line to return, 1-based.'),
    limit: z.number().int().positive().default(DEFAULT_READ_LINES).describe('Lines to return.'),
  },
  hints: { readOnly: true },
  async execute(args, context) {
    const sb = await context.client.sandbox(args.sandbox)
    const text = await sb.files.read(args.path)
    const lines = text.split('\n')
    if (lines.at(-1) === '') lines.pop()
    const first = args.offset - 1
    let budget = context.outputBudgetBytes
    const numbered: string[] = []
    for (const [i, line] of lines.slice(first, first + args.limit).entries()) {
      const entry = `${String(first + i + 1).padStart(6)}\t${line}`
      budget -= new TextEncoder().encode(entry).length + 1
      if (budget < 0 && numbered.length > 0) break
      numbered.push(entry)
    }
    const last = first + numbered.length
    const more = last < lines.length ? ` (read on with offset ${last + 1})` : ''
    const range =
      lines.length === 0
        ? `${args.path} is empty`
        : numbered.length === 0
          ? `${args.path} has ${lines.length} lines; offset ${args.offset} is past the end`
          : `${args.path}: lines ${first + 1}-${last} of ${lines.length}${more}`
    return {
      text: [range, ...numbered].join('\n'),
      structured: { lines: lines.length, from: first + 1, to: last },
    }
  },
})

/** file_write. */
export const fileWrite = defineTool({
  name: 'file_write',
  title: 'Write a file',
  description:
    'Writes text to a file of the sandbox, replacing it when it exists; parent directories must exist.',
  input: { sandbox: sandboxArg, path: pathArg, content: z.string().describe('The whole new content.') },
  hints: { destructive: true, idempotent: true },
  async execute(args, context) {
    const sb = await context.client.sandbox(args.sandbox)
    const info = await sb.files.write(args.path, args.content)
    return {
      text: `wrote ${info.size} bytes to ${info.path}`,
      structured: { path: info.path, size: info.size },
    }
  },
})

/** file_edit: exact, unique replacement. */
export const fileEdit = defineTool({
  name: 'file_edit',
  title: 'Edit a file by exact replacement',
  description:
    'Replaces an exact string in a text file. old_string must occur exactly once unless replace_all is set; include enough surrounding lines to make it unique. Whitespace and indentation must match.',
  input: {
    sandbox: sandboxArg,
    path: pathArg,
    old_string: z.string().min(1).describe('The exact text to replace.'),
    new_string: z.string().describe('The replacement text.'),
    replace_all: z.boolean().default(false).describe('Replace every occurrence.'),
  },
  hints: { destructive: true },
  async execute(args, context) {
    const sb = await context.client.sandbox(args.sandbox)
    const text = await sb.files.read(args.path)
    const parts = text.split(args.old_string)
    const count = parts.length - 1
    if (count === 0) {
      return {
        text: `old_string was not found in ${args.path}; read the file and copy the text exactly`,
        isError: true,
      }
    }
    if (count > 1 && !args.replace_all) {
      return {
        text: `old_string occurs ${count} times in ${args.path}; add surrounding lines to make it unique, or set replace_all`,
        isError: true,
      }
    }
    await sb.files.write(args.path, parts.join(args.new_string))
    return {
      text: `replaced ${count} occurrence${count === 1 ? '' : 's'} in ${args.path}`,
      structured: { replaced: count },
    }
  },
})

/** file_list. */
export const fileList = defineTool({
  name: 'file_list',
  title: 'List a directory',
  description: 'Lists a directory of the sandbox: names, types and sizes.',
  input: { sandbox: sandboxArg, path: pathArg.default('/workspace') },
  hints: { readOnly: true },
  async execute(args, context) {
    const sb = await context.client.sandbox(args.sandbox)
    const entries = await sb.files.list(args.path)
    const text =
      entries.length === 0
        ? `${args.path} is empty`
        : entries
            .map((e) => `${e.type === 'directory' ? `${e.name}/` : e.name}\t${e.type}\t${e.size}`)
            .join('\n')
    return {
      text,
      structured: { entries: entries.map((e) => ({ name: e.name, type: e.type, size: e.size })) },
    }
  },
})
