/// <reference lib="dom" />
import { chromium, type Page } from 'playwright-core'
import { describe, expect, it } from 'vitest'
import { baseUrl, createSandbox, startRunner } from './runner-fixture.ts'

// The web console in Debian's chromium against a real runner: typing into xterm.js, reading the
// screen, resizing with the window, and a reload that finds the same terminal and redraws it
// from the scrollback. Also: the console's assets are the runner's own, and a foreign token
// opens nothing.

const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
]

interface ConsoleState {
  terminal: string | null
  offset: number
  status: string
}

const state = (page: Page) =>
  page.evaluate(() => (window as unknown as { conchConsole: { state(): ConsoleState } }).conchConsole.state())

/** The screen's text, as xterm.js holds it. */
const screen = (page: Page) =>
  page.evaluate(() => {
    const term = (
      window as unknown as {
        conchConsole: {
          term: {
            buffer: {
              active: {
                length: number
                getLine(i: number): { translateToString(trim: boolean): string } | undefined
              }
            }
          }
        }
      }
    ).conchConsole.term
    const lines: string[] = []
    for (let i = 0; i < term.buffer.active.length; i++)
      lines.push(term.buffer.active.getLine(i)?.translateToString(true) ?? '')
    return lines.join('\n')
  })

const size = (page: Page) =>
  page.evaluate(() => {
    const t = (window as unknown as { conchConsole: { term: { cols: number; rows: number } } }).conchConsole
      .term
    return { cols: t.cols, rows: t.rows }
  })

describe('web console', () => {
  it('types cd /tmp; pwd in chromium, resizes with the window, and a reload finds the same terminal', async () => {
    await using runner = await startRunner({ listen: true })
    const url = baseUrl(runner.app)
    const id = await createSandbox(runner)
    const minted = await runner.app.inject({
      method: 'POST',
      url: `/v1/sandboxes/${id}/tokens`,
      headers: runner.auth,
      payload: { ttlMs: 600_000 },
    })
    const token = (minted.json() as { token: string }).token
    const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS })
    try {
      const page = await browser.newPage({ viewport: { width: 1000, height: 600 } })
      await page.goto(`${url}/console/#sandbox=${id}&token=${token}`)
      await page.waitForFunction(() => document.getElementById('status')?.textContent === 'attached')
      await page.click('#term')
      await page.keyboard.type('cd /tmp; pwd')
      await page.keyboard.press('Enter')
      await expect.poll(() => screen(page)).toMatch(/^\/tmp$/m)
      const { terminal } = await state(page)
      expect(terminal).toMatch(/^t_/)

      // Resize with the window: the terminal in the sandbox gets the new size.
      const before = await size(page)
      await page.setViewportSize({ width: 600, height: 400 })
      await expect.poll(async () => (await size(page)).cols).toBeLessThan(before.cols)
      const after = await size(page)
      await expect
        .poll(async () => {
          const res = await runner.app.inject({
            method: 'GET',
            url: `/v1/sandboxes/${id}/terminals/${terminal}`,
            headers: runner.auth,
          })
          const info = res.json() as { cols: number; rows: number }
          return [info.cols, info.rows]
        })
        .toEqual([after.cols, after.rows])
      await page.keyboard.type('stty size')
      await page.keyboard.press('Enter')
      await expect.poll(() => screen(page)).toContain(`${after.rows} ${after.cols}`)

      // Reload: the fragment names the terminal, the page replays its scrollback.
      await page.reload()
      await page.waitForFunction(() => document.getElementById('status')?.textContent === 'attached')
      expect((await state(page)).terminal).toBe(terminal)
      await expect.poll(() => screen(page)).toMatch(/^\/tmp$/m)
      const listed = await runner.app.inject({
        method: 'GET',
        url: `/v1/sandboxes/${id}/terminals`,
        headers: runner.auth,
      })
      expect((listed.json() as { terminals: unknown[] }).terminals).toHaveLength(1)

      // A token for another sandbox attaches to nothing.
      const other = await createSandbox(runner)
      const foreign = await browser.newPage()
      await foreign.goto(`${url}/console/#sandbox=${other}&token=${token}&terminal=${terminal}`)
      await expect
        .poll(() => foreign.evaluate(() => document.getElementById('status')?.textContent))
        .not.toBe('attached')
      await expect
        .poll(() => foreign.evaluate(() => document.getElementById('status')?.textContent))
        .not.toBe('connecting')
    } finally {
      await browser.close()
    }
  })

  it('serves xterm.js from the runner with a strict content policy, and nothing else by that route', async () => {
    await using runner = await startRunner()
    const page = await runner.app.inject({ method: 'GET', url: '/console/' })
    expect(page.statusCode).toBe(200)
    expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'")
    expect(page.body).not.toMatch(/https?:\/\//)
    const xterm = await runner.app.inject({ method: 'GET', url: '/console/xterm.js' })
    expect(xterm.statusCode).toBe(200)
    expect(xterm.body.length).toBeGreaterThan(100_000)
    for (const path of [
      '/console/..%2fpackage.json',
      '/console/%2e%2e%2fsrc%2fmain.ts',
      '/console/xterm.js.map',
    ]) {
      expect((await runner.app.inject({ method: 'GET', url: path })).statusCode).toBe(404)
    }
  })
})
