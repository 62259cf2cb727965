// Renders the little markdown the hand-written tables use (`code` and [links](/path/)) to HTML.

const escapeHtml = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

/** `code` spans and [text](href) links to HTML; everything else is escaped text. */
export function marked(text: string): string {
  return escapeHtml(text)
    .replace(
      /\[([^\]]+)\]\(([^)\s]+)\)/g,
      (_m, label: string, href: string) => `<a href="${href}">${label}</a>`,
    )
    .replace(/`([^`]+)`/g, (_m, code: string) => `<code>${code}</code>`)
}
