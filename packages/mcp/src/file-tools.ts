// Tools on the workspace's files: read with line numbers and ranges, write, edit by exact
// replacement, and list. Paths are sandbox paths; the runner confines them to the workspace.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { z } from 'zod'
import type { ToolContext } from './tool-context.ts'
import { guarded, toolResult } from './tool-result.ts'

const sandbox = z.string().describe('Sandbox id, as returned by sandbox_create or sandbox_list.')
const path = z
  .string()
  .min(1)
  .describe('Path in the sandbox: absolute (/workspace/...) or relative to the workspace.')

/** Lines file_read returns when no limit is given. */
const DEFAULT_READ_LINES = 2_000

/** Registers file_read, file_write, file_edit and file_list. */
export function registerFileTools(server: McpServer, context: ToolContext): void {
  server.registerTool(
    'file_read',
    {
      title: 'Read a file',
      description: `Reads a text file of the sandbox with line numbers. Pass offset (first line, 1-based) and limit (lines) to read a range; without them the first ${DEFAULT_READ_LINES} lines are returned. The answer says how many lines the file has.`,
      inputSchema: {
        sandbox,
        path,
        offset: z.number().int().positive().default(1).describe('First line to return, 1-based.'),
        limit: z.number().int().positive().default(DEFAULT_READ_LINES).describe('Lines to return.'),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args) =>
      guarded(async () => {
        const sb = await context.client.sandbox(args.sandbox)
        const text = await sb.files.read(args.path)
        const lines = text.split('\n')
        if (lines.at(-1) === '') lines.pop()
        const first = args.offset - 1
        const slice = lines.slice(first, first + args.limit)
        let budget = context.outputBudgetBytes
        const numbered: string[] = []
        for (const [i, line] of slice.entries()) {
          const entry = `${String(first + i + 1).padStart(6)}\t${line}`
          budget -= Buffer.byteLength(entry) + 1
          if (budget < 0 && numbered.length > 0) break
          numbered.push(entry)
        }
        const last = first + numbered.length
        const range =
          lines.length === 0
            ? `${args.path} is empty`
            : numbered.length === 0
              ? `${args.path} has ${lines.length} lines; offset ${args.offset} is past the end`
              : `${args.path}: lines ${first + 1}-${last} of ${lines.length}${last < lines.length ? ` (read on with offset ${last + 1})` : ''}`
        return toolResult([range, ...numbered].join('\n'), { lines: lines.length, from: first + 1, to: last })
      }),
  )

  server.registerTool(
    'file_write',
    {
      title: 'Write a file',
      description:
        'Writes text to a file of the sandbox, replacing it when it exists; parent directories must exist.',
      inputSchema: { sandbox, path, content: z.string().describe('The whole new content.') },
      annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    (args) =>
      guarded(async () => {
        const sb = await context.client.sandbox(args.sandbox)
        const info = await sb.files.write(args.path, args.content)
        return toolResult(`wrote ${info.size} bytes to ${info.path}`, { path: info.path, size: info.size })
      }),
  )

  server.registerTool(
    'file_edit',
    {
      title: 'Edit a file by exact replacement',
      description:
        'Replaces an exact string in a text file. old_string must occur exactly once unless replace_all is set; include enough surrounding lines to make it unique. Whitespace and indentation must match.',
      inputSchema: {
        sandbox,
        path,
        old_string: z.string().min(1).describe('The exact text to replace.'),
        new_string: z.string().describe('The replacement text.'),
        replace_all: z.boolean().default(false).describe('Replace every occurrence.'),
      },
      annotations: { destructiveHint: true, openWorldHint: false },
    },
    (args) =>
      guarded(async () => {
        const sb = await context.client.sandbox(args.sandbox)
        const text = await sb.files.read(args.path)
        const count = text.split(args.old_string).length - 1
        if (count === 0) {
          return toolResult(
            `old_string was not found in ${args.path}; read the file and copy the text exactly`,
            undefined,
            true,
          )
        }
        if (count > 1 && !args.replace_all) {
          return toolResult(
            `old_string occurs ${count} times in ${args.path}; add surrounding lines to make it unique, or set replace_all`,
            undefined,
            true,
          )
        }
        const edited = args.replace_all
          ? text.split(args.old_string).join(args.new_string)
          : text.replace(args.old_string, () => args.new_string)
        await sb.files.write(args.path, edited)
        return toolResult(`replaced ${count} occurrence${count === 1 ? '' : 's'} in ${args.path}`, {
          replaced: count,
        })
      }),
  )

  server.registerTool(
    'file_list',
    {
      title: 'List a directory',
      description: 'Lists a directory of the sandbox: names, types and sizes.',
      inputSchema: { sandbox, path: path.default('/workspace') },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args) =>
      guarded(async () => {
        const sb = await context.client.sandbox(args.sandbox)
        const entries = await sb.files.list(args.path)
        const text =
          entries.length === 0
            ? `${args.path} is empty`
            : entries
                .map((e) => `${e.type === 'directory' ? `${e.name}/` : e.name}\t${e.type}\t${e.size}`)
                .join('\n')
        return toolResult(text, {
          entries: entries.map((e) => ({ name: e.name, type: e.type, size: e.size })),
        })
      }),
  )
}
