// Layout faults of one rendered docs page, found in the browser: `page.evaluate(layoutFaults)`.
// The function is serialised into the page, so it uses nothing from outside its own body.

/** What `layoutFaults` found; each entry names the element and the numbers. */
export interface LayoutFaults {
  /**
   * Elements reaching past the left or right edge of their content column without a scroll
   * container between them and the column: they are cut off or push the page sideways. At the
   * desktop width also scroll containers other than code blocks that hide part of their content
   * sideways (a table's last column that only a sideways scroll reveals).
   */
  columnOverflow: string[]
  /** SVG text whose box lies partly outside its svg's viewBox: drawn cut off. */
  clippedSvgText: string[]
  /** SVGs wider than their content column: a chart that needs sideways scrolling to be read. */
  wideSvgs: string[]
  /** Section headings (h2) of the content that the table of contents does not list. */
  tocMissing: string[]
}

/**
 * Inspects the current document; runs in the page. `wide`: the desktop width, where only code
 * may scroll sideways.
 */
export function layoutFaults({ wide }: { wide: boolean }): LayoutFaults {
  const out: LayoutFaults = { columnOverflow: [], clippedSvgText: [], wideSvgs: [], tocMissing: [] }
  const px = (n: number): string => `${Math.round(n)}px`
  const describe = (el: Element): string => {
    const cls =
      typeof el.className === 'string' && el.className ? `.${el.className.trim().split(/\s+/)[0]}` : ''
    const id = el.id ? `#${el.id}` : ''
    const text = (el.textContent ?? '').trim().replace(/\s+/g, ' ').slice(0, 40)
    return `<${el.tagName.toLowerCase()}${id}${cls}> "${text}"`
  }
  const scrolls = (el: Element): boolean => {
    const o = getComputedStyle(el).overflowX
    return o === 'auto' || o === 'scroll'
  }

  for (const column of document.querySelectorAll('main .sl-markdown-content')) {
    const col = column.getBoundingClientRect()
    if (col.width === 0) continue
    for (const el of column.querySelectorAll('*')) {
      if (el.closest('svg') && el.tagName.toLowerCase() !== 'svg') continue
      const r = el.getBoundingClientRect()
      if (r.width <= 1 || r.height <= 1) continue
      if (r.right <= col.right + 1 && r.left >= col.left - 1) continue
      let contained = false
      for (let up = el.parentElement; up && up !== column; up = up.parentElement) {
        if (scrolls(up)) {
          contained = true
          break
        }
      }
      if (contained) continue
      // Report the outermost offender only: its children overflow because it does.
      const parent = el.parentElement
      if (parent && parent !== column) {
        const p = parent.getBoundingClientRect()
        if (p.right > col.right + 1 || p.left < col.left - 1) continue
      }
      out.columnOverflow.push(
        `${describe(el)} spans ${px(r.left)}..${px(r.right)} in a column of ${px(col.left)}..${px(col.right)}`,
      )
    }
    if (wide) {
      for (const el of column.querySelectorAll('*')) {
        if (!scrolls(el) || el.closest('pre, .expressive-code')) continue
        const hidden = el.scrollWidth - el.clientWidth
        if (hidden > 1)
          out.columnOverflow.push(`${describe(el)} hides ${px(hidden)} sideways in its scroll container`)
      }
    }
    for (const svg of column.querySelectorAll('svg')) {
      const r = svg.getBoundingClientRect()
      if (r.width > col.width + 1) {
        out.wideSvgs.push(
          `${describe(svg.closest('figure') ?? svg)} is ${px(r.width)} wide in a ${px(col.width)} column`,
        )
      }
    }
  }

  for (const svg of document.querySelectorAll('main svg')) {
    if (!(svg instanceof SVGSVGElement) || svg.getBoundingClientRect().width === 0) continue
    const vb = svg.viewBox.baseVal
    const box =
      vb && vb.width > 0
        ? vb
        : { x: 0, y: 0, width: svg.width.baseVal.value, height: svg.height.baseVal.value }
    const toSvg = svg.getScreenCTM()?.inverse()
    if (!toSvg) continue
    for (const text of svg.querySelectorAll('text')) {
      if (!(text.textContent ?? '').trim()) continue
      const ctm = text.getScreenCTM()
      if (!ctm) continue
      const m = toSvg.multiply(ctm)
      const b = text.getBBox()
      const xs = [b.x, b.x + b.width].flatMap((x) =>
        [b.y, b.y + b.height].map((y) => m.a * x + m.c * y + m.e),
      )
      const ys = [b.x, b.x + b.width].flatMap((x) =>
        [b.y, b.y + b.height].map((y) => m.b * x + m.d * y + m.f),
      )
      const left = Math.min(...xs)
      const right = Math.max(...xs)
      const top = Math.min(...ys)
      const bottom = Math.max(...ys)
      if (
        left < box.x - 0.5 ||
        right > box.x + box.width + 0.5 ||
        top < box.y - 0.5 ||
        bottom > box.y + box.height + 0.5
      ) {
        out.clippedSvgText.push(
          `${describe(text)} spans x ${Math.round(left)}..${Math.round(right)}, y ${Math.round(top)}..${Math.round(bottom)} outside viewBox ${box.x} ${box.y} ${box.width} ${box.height}`,
        )
      }
    }
  }

  const toc = document.querySelector('starlight-toc')
  if (toc) {
    const listed = new Set(
      [...toc.querySelectorAll('a[href^="#"]')].map((a) => a.getAttribute('href')?.slice(1)),
    )
    for (const h of document.querySelectorAll('main .sl-markdown-content h2[id]')) {
      if (!listed.has(h.id)) out.tocMissing.push(`heading "${(h.textContent ?? '').trim()}" (#${h.id})`)
    }
  }
  return out
}
