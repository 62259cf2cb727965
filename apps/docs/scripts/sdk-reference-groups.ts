// A TypeDoc plugin for the SDK reference: files every export of @conch/sdk under one of the
// groups a reader looks for (Sandbox, Shell, Session, Processes, Files, Errors, Connection),
// so the reference index lists them by topic, each with the summary line of its TSDoc, instead
// of one alphabetical list. The SDK's sources stay free of doc-site tags; the map lives here.
import { type Application, Comment, CommentTag, type Context, Converter } from 'typedoc'

/** The groups in the order the index shows them; the first match wins. */
export const SDK_GROUPS: readonly (readonly [string, RegExp])[] = [
  ['Errors', /Error(Options)?$|^ErrorCode$/],
  ['Files', /^(SandboxFiles|FileInfo)$/],
  ['Processes', /^(BackgroundProcess|Process\w*|StartProcessOptions)$/],
  [
    'Session',
    /^(Session|SessionAliases|SessionEnv|SessionInfo|SessionOptions|HistoryEntry|HistoryQuery|ExecOptions)$/,
  ],
  ['Shell', /^(Shell\w*|CommandResult|OutputEncoding|OutputOf|ReattachOptions)$/],
  ['Sandbox', /^(Sandbox\w*|CreateSandboxOptions|AccessToken)$/],
  ['Connection', /^(ConnectOptions|ConnectionPolicy|FetchLike|WebSocketLike|WebSocketConstructor)$/],
]

/** The group of an export; names no pattern matches fall under "Other". */
export function sdkGroup(name: string): string {
  return SDK_GROUPS.find(([, pattern]) => pattern.test(name))?.[0] ?? 'Other'
}

/** The first sentence of a summary: the index shows one line per export, the page the rest. */
export function firstSentence(summary: string): string {
  return /^(.*?[.!?])\s+(?=[A-Z`(])/.exec(summary)?.[1] ?? summary
}

/** Cuts each description cell of the index's tables to its first sentence. */
function oneLineIndex(markdown: string): string {
  return markdown.replace(
    /^(\| \[[^\]]+\]\([^)]+\) \| )(.*)( \|)$/gm,
    (_, head: string, desc: string, tail: string) => {
      return `${head}${firstSentence(desc)}${tail}`
    },
  )
}

/** TypeDoc calls this when it loads the plugin. */
export function load(app: Application): void {
  app.renderer.on('endPage', (page: { url: string; contents?: string }) => {
    if (page.url === 'index.md' && page.contents) page.contents = oneLineIndex(page.contents)
  })
  app.converter.on(Converter.EVENT_RESOLVE_BEGIN, (context: Context) => {
    for (const reflection of context.project.children ?? []) {
      reflection.comment ??= new Comment()
      reflection.comment.blockTags = reflection.comment.blockTags.filter((t) => t.tag !== '@category')
      reflection.comment.blockTags.push(
        new CommentTag('@category', [{ kind: 'text', text: sdkGroup(reflection.name) }]),
      )
    }
  })
}
