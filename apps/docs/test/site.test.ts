// The docs site in a real browser: builds it (reference generation + astro build), serves dist/
// on localhost, and crawls every page reachable from the landing page in Debian's chromium at a
// desktop and a phone width. The crawl records console errors, links, anchors and code blocks;
// the tests below assert on what it saw.
import { spawnSync } from 'node:child_process'
import { mkdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ErrorCode } from '@conch/protocol'
import { type Browser, type BrowserContext, chromium } from 'playwright-core'
import { expect, test } from 'vitest'
import { type LayoutFaults, layoutFaults } from './layout-faults.ts'
import { serveStatic } from './static-server.ts'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const dist = join(root, 'dist')
const screenshots = join(root, 'test-results', 'screenshots')

const VIEWPORTS = {
  desktop: { width: 1280, height: 800 },
  phone: { width: 390, height: 844 },
} as const
type ViewportName = keyof typeof VIEWPORTS

const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

/** What the crawl saw on one page at one width. */
interface PageVisit {
  path: string
  viewport: ViewportName
  status: number
  consoleErrors: string[]
  /** Page is wider than the viewport (horizontal scrolling of the whole page). */
  overflowX: boolean
  /** Layout faults found by `layoutFaults` (see layout-faults.ts). */
  layout: LayoutFaults
}

/** What the crawl saw across the site. */
interface Crawl {
  origin: string
  visits: PageVisit[]
  /** Internal link targets (path plus optional hash) and the pages linking to them. */
  links: Map<string, Set<string>>
  /** Element ids on each page. */
  ids: Map<string, Set<string>>
  /** Per page: number of code blocks and how many of them have a copy button. */
  codeBlocks: Map<string, { blocks: number; withCopy: number }>
  /** Status of every internal URL that is not a page (assets, downloads). */
  assets: Map<string, number>
  browser: Browser
}

function build(): void {
  // vitest exports its own import.meta.env into process.env (DEV=1, MODE=test, NODE_ENV=test...),
  // under which Astro builds the dev variant of some components, Starlight's search among them.
  // The site is built with the environment a shell would give it.
  const vitestKeys = new Set(['TEST', 'NODE_ENV', 'BASE_URL', 'MODE', 'DEV', 'PROD', 'SSR'])
  const env: Record<string, string> = { ASTRO_TELEMETRY_DISABLED: '1' }
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !vitestKeys.has(key) && !key.startsWith('VITEST')) env[key] = value
  }
  const steps = [
    ['--conditions=source', 'scripts/generate-reference.ts'],
    [join('node_modules', 'astro', 'bin', 'astro.mjs'), 'build', '--silent'],
  ]
  for (const args of steps) {
    const result = spawnSync(process.execPath, args, { cwd: root, env, encoding: 'utf8' })
    if (result.status !== 0) {
      throw new Error(`${args.join(' ')} failed (${result.status}):\n${result.stdout}\n${result.stderr}`)
    }
  }
}

async function visitAll(context: BrowserContext, viewport: ViewportName, crawl: Crawl, start: string[]) {
  const queue = [...start]
  const seen = new Set(queue)
  const page = await context.newPage()
  let current: PageVisit | null = null
  page.on('console', (msg) => {
    if (msg.type() === 'error') current?.consoleErrors.push(`${msg.text()} (${msg.location().url})`)
  })
  page.on('pageerror', (error) => current?.consoleErrors.push(`uncaught: ${error.message}`))
  page.on('requestfailed', (request) => {
    // Leaving a page aborts its pending requests (net::ERR_ABORTED); that is not a failure.
    const reason = request.failure()?.errorText ?? ''
    if (request.url().startsWith(crawl.origin) && !reason.includes('ERR_ABORTED')) {
      current?.consoleErrors.push(`request failed: ${request.url()} ${reason}`)
    }
  })
  while (queue.length > 0) {
    const path = queue.shift()!
    const visit: PageVisit = {
      path,
      viewport,
      status: 0,
      consoleErrors: [],
      overflowX: false,
      layout: { columnOverflow: [], clippedSvgText: [], wideSvgs: [], tocMissing: [] },
    }
    current = visit
    const response = await page.goto(crawl.origin + path, { waitUntil: 'load' })
    visit.status = response?.status() ?? 0
    const facts = await page.evaluate(() => ({
      hrefs: [...document.querySelectorAll('a[href]')].map((a) => a.getAttribute('href') ?? ''),
      ids: [...document.querySelectorAll('[id]')].map((e) => e.id),
      blocks: document.querySelectorAll('.expressive-code').length,
      withCopy: document.querySelectorAll('.expressive-code .copy button[data-code]').length,
      overflowX: document.documentElement.scrollWidth > window.innerWidth + 1,
    }))
    const desktop = viewport === 'desktop'
    visit.overflowX = facts.overflowX
    visit.layout = await page.evaluate(layoutFaults, { wide: desktop })
    crawl.visits.push(visit)
    if (desktop) {
      crawl.ids.set(path, new Set(facts.ids))
      crawl.codeBlocks.set(path, { blocks: facts.blocks, withCopy: facts.withCopy })
    }
    for (const href of facts.hrefs) {
      const url = new URL(href, crawl.origin + path)
      if (url.origin !== crawl.origin) continue
      const isPage = url.pathname.endsWith('/') || url.pathname.endsWith('.html')
      if (isPage && !seen.has(url.pathname)) {
        seen.add(url.pathname)
        queue.push(url.pathname)
      }
      if (!desktop) continue
      const target = url.pathname + url.hash
      if (!crawl.links.has(target)) crawl.links.set(target, new Set())
      crawl.links.get(target)!.add(path)
      if (!isPage && !crawl.assets.has(url.pathname)) {
        crawl.assets.set(url.pathname, (await fetch(crawl.origin + url.pathname)).status)
      }
    }
  }
  await page.close()
}

const it = test.extend<{ crawl: Crawl }>({
  crawl: [
    // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
    async ({}, use) => {
      build()
      await using server = await serveStatic(dist)
      const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS })
      try {
        const crawl: Crawl = {
          origin: server.origin,
          visits: [],
          links: new Map(),
          ids: new Map(),
          codeBlocks: new Map(),
          assets: new Map(),
          browser,
        }
        // Both widths crawl from the landing page at the same time, each following its own links.
        const desktop = await browser.newContext({ viewport: VIEWPORTS.desktop })
        const phone = await browser.newContext({ viewport: VIEWPORTS.phone, isMobile: true, hasTouch: true })
        await Promise.all([
          visitAll(desktop, 'desktop', crawl, ['/']),
          visitAll(phone, 'phone', crawl, ['/']),
        ])
        await phone.close()
        await desktop.close()
        await use(crawl)
      } finally {
        await browser.close()
      }
    },
    { scope: 'file' },
  ],
})

it('visits every page at desktop and phone widths without console errors', ({ crawl }) => {
  const pages = crawl.visits.filter((v) => v.viewport === 'desktop').map((v) => v.path)
  expect(pages).toEqual(expect.arrayContaining(['/', '/quickstart/', '/reference/errors/', '/benchmarks/']))
  const phonePages = crawl.visits.filter((v) => v.viewport === 'phone').map((v) => v.path)
  expect(phonePages.sort()).toEqual([...pages].sort())
  const problems = crawl.visits
    .filter((v) => v.status !== 200 || v.consoleErrors.length > 0)
    .map((v) => `${v.viewport} ${v.path}: status ${v.status}; ${v.consoleErrors.join('; ')}`)
  expect(problems).toEqual([])
})

it('fits every page into the phone width without horizontal scrolling', ({ crawl }) => {
  const wide = crawl.visits.filter((v) => v.viewport === 'phone' && v.overflowX).map((v) => v.path)
  expect(wide).toEqual([])
})

/** Every fault of one kind, as `viewport path: fault` lines. */
function faults(crawl: Crawl, kind: keyof LayoutFaults): string[] {
  return crawl.visits.flatMap((v) => v.layout[kind].map((f) => `${v.viewport} ${v.path}: ${f}`))
}

it('keeps every element inside its content column unless it scrolls in its own container', ({ crawl }) => {
  expect(faults(crawl, 'columnOverflow')).toEqual([])
})

it('draws every SVG text inside its viewBox', ({ crawl }) => {
  expect(faults(crawl, 'clippedSvgText')).toEqual([])
})

it('scales every chart to its column instead of scrolling it', ({ crawl }) => {
  expect(faults(crawl, 'wideSvgs')).toEqual([])
})

it('lists every section heading in the table of contents', ({ crawl }) => {
  expect(faults(crawl, 'tocMissing').filter((f) => f.startsWith('desktop'))).toEqual([])
})

it('names the landing page, and gives every page a canonical URL on the site and a sitemap', ({ crawl }) => {
  expect(crawl.visits.length).toBeGreaterThan(0)
  const landing = readFileSync(join(dist, 'index.html'), 'utf8')
  const title = /<title>([^<]*)<\/title>/.exec(landing)?.[1] ?? ''
  expect(title).not.toBe('conch | conch')
  expect(title).toMatch(/\| conch$/)
  const quickstart = readFileSync(join(dist, 'quickstart', 'index.html'), 'utf8')
  const canonical = /<link rel="canonical" href="([^"]+)"/.exec(quickstart)?.[1]
  const ogUrl = /<meta property="og:url" content="([^"]+)"/.exec(quickstart)?.[1]
  expect(canonical).toMatch(/^https:\/\/[^/]+\/quickstart\/$/)
  expect(ogUrl).toBe(canonical)
  const sitemap = readFileSync(join(dist, 'sitemap-0.xml'), 'utf8')
  expect(sitemap).toContain(canonical)
})

it('groups the SDK reference index by topic, with a summary per export, at /reference/sdk/', async ({
  crawl,
}) => {
  const page = await crawl.browser.newPage({ viewport: VIEWPORTS.desktop })
  try {
    const response = await page.goto(`${crawl.origin}/reference/sdk/`)
    expect(response?.status()).toBe(200)
    const headings = await page.locator('.sl-markdown-content h2').allTextContents()
    expect(headings.map((h) => h.trim())).toEqual(
      expect.arrayContaining(['Sandbox', 'Shell', 'Session', 'Processes', 'Files', 'Errors']),
    )
    expect(headings.map((h) => h.trim()).indexOf('Sandbox')).toBe(0)
    const sandboxRow = await page
      .locator('.sl-markdown-content tr', { hasText: 'Sandbox' })
      .first()
      .textContent()
    expect(sandboxRow).toMatch(/sandbox/i)
    expect((sandboxRow ?? '').trim().length).toBeGreaterThan('Sandbox'.length + 20)
    // One line per export: the first sentence of its summary, the rest on its own page.
    const shellRow = await page
      .locator('.sl-markdown-content tr', { hasText: 'A live bash session' })
      .first()
      .textContent()
    expect(shellRow).not.toContain('Concurrent runs')
  } finally {
    await page.close()
  }
})

it('has no broken internal links or anchors', ({ crawl }) => {
  const broken: string[] = []
  for (const [target, from] of crawl.links) {
    const [path = '', hash] = target.split('#')
    const source = [...from][0]
    if (crawl.assets.has(path)) {
      if (crawl.assets.get(path) !== 200)
        broken.push(`${target} (status ${crawl.assets.get(path)}) from ${source}`)
      continue
    }
    const visit = crawl.visits.find((v) => v.path === path && v.viewport === 'desktop')
    if (visit?.status !== 200) {
      broken.push(`${target} (page missing) from ${source}`)
    } else if (hash && !crawl.ids.get(path)?.has(decodeURIComponent(hash))) {
      broken.push(`${target} (no such anchor) from ${source}`)
    }
  }
  expect(broken).toEqual([])
})

it('gives every code block a copy button', ({ crawl }) => {
  const quickstart = crawl.codeBlocks.get('/quickstart/')
  expect(quickstart?.blocks).toBeGreaterThan(3)
  const missing = [...crawl.codeBlocks]
    .filter(([, c]) => c.withCopy !== c.blocks)
    .map(([path, c]) => `${path}: ${c.withCopy} of ${c.blocks}`)
  expect(missing).toEqual([])
})

it('has one anchor per error code on the errors page', ({ crawl }) => {
  const ids = crawl.ids.get('/reference/errors/')
  const missing = ErrorCode.options.filter((code) => !ids?.has(code.toLowerCase()))
  expect(missing).toEqual([])
})

it('finds "reattach" with the pagefind search', async ({ crawl }) => {
  const page = await crawl.browser.newPage({ viewport: VIEWPORTS.desktop })
  try {
    await page.goto(`${crawl.origin}/`)
    await page.locator('button[data-open-modal]').first().click()
    const input = page.locator('dialog[open] input[type="search"], .pagefind-ui__search-input').first()
    await input.fill('reattach')
    const results = page.locator('.pagefind-ui__result-link')
    await results.first().waitFor({ timeout: 20_000 })
    const titles = await results.allTextContents()
    expect(titles.length).toBeGreaterThan(0)
    expect(titles.join(' | ').toLowerCase()).toContain('reattach')
  } finally {
    await page.close()
  }
})

it('saves screenshots of the pages a newcomer sees first, for review', async ({ crawl }) => {
  mkdirSync(screenshots, { recursive: true })
  const shots = [
    ['landing', '/'],
    ['quickstart', '/quickstart/'],
    ['benchmarks', '/benchmarks/'],
    ['comparison', '/comparison/'],
    ['guide-agent-loop', '/guides/agent-loop/'],
  ] as const
  for (const [viewport, size] of Object.entries(VIEWPORTS)) {
    const page = await crawl.browser.newPage({ viewport: size })
    try {
      for (const [name, path] of shots) {
        await page.goto(crawl.origin + path)
        const file = join(screenshots, `${name}-${viewport}.png`)
        await page.screenshot({ path: file, fullPage: true })
        expect(readFileSync(file).subarray(1, 4).toString()).toBe('PNG')
      }
    } finally {
      await page.close()
    }
  }
})
