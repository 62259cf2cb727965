import { ConchError } from '@conch/sdk'
import { describe, expect } from 'vitest'
import { test } from './runner-fixture.ts'

// A tiny HTTP server on Node's standard library. It picks a free port, writes it to a file
// once listening, and answers every request with the path it was asked for.
const SERVER = `
const http = require('node:http')
const fs = require('node:fs')
const server = http.createServer((req, res) => res.end('served ' + req.url + '\\n'))
server.listen(0, '127.0.0.1', () => {
  fs.writeFileSync('e2e-server.port.tmp', String(server.address().port))
  fs.renameSync('e2e-server.port.tmp', 'e2e-server.port')
  console.log('listening')
})
`

describe('files', () => {
  test('round-trips text, bytes and directory listings', async ({ sandbox }) => {
    await sandbox.files.write('/workspace/e2e-dir/a.txt', 'héllo\nwörld\n')
    expect(await sandbox.files.read('/workspace/e2e-dir/a.txt')).toBe('héllo\nwörld\n')

    const bytes = new Uint8Array([0, 1, 2, 255, 254, 10, 13, 0x80])
    await sandbox.files.write('/workspace/e2e-dir/b.bin', bytes)
    const back = await sandbox.files.read('/workspace/e2e-dir/b.bin', { encoding: 'binary' })
    expect(Array.from(back)).toEqual(Array.from(bytes))

    const entries = await sandbox.files.list('/workspace/e2e-dir')
    expect(entries.map((e) => e.name).sort()).toEqual(['a.txt', 'b.bin'])
    expect(entries.find((e) => e.name === 'b.bin')).toMatchObject({ type: 'file', size: bytes.length })
  })

  test('shares files with the shell', async ({ sandbox }) => {
    await sandbox.files.write('/workspace/from-api.txt', 'written by the api\n')
    await using sh = await sandbox.shell()
    expect((await sh.run('cat from-api.txt')).stdout).toBe('written by the api\n')
    await sh.run('printf "written by the shell" > from-shell.txt')
    expect(await sandbox.files.read('/workspace/from-shell.txt')).toBe('written by the shell')
  })

  test('rejects a missing file and a path outside the workspace', async ({ sandbox }) => {
    await expect(sandbox.files.read('/workspace/e2e-missing.txt')).rejects.toMatchObject({
      code: 'FILE_NOT_FOUND',
    })
    const outside = await sandbox.files.read('/workspace/../../etc/passwd').then(
      () => null,
      (err: unknown) => err,
    )
    expect(outside).toBeInstanceOf(ConchError)
    expect((outside as ConchError).code).toBe('PATH_OUTSIDE_SANDBOX')
  })
})

describe('processes', () => {
  test('round-trips output, exit code and listing', async ({ sandbox }) => {
    const proc = await sandbox.startProcess('echo to-out; echo to-err >&2; exit 5')
    const done = await proc.wait()
    expect(done).toMatchObject({ status: 'exited', exitCode: 5 })
    const output = await proc.output()
    expect(output.stdout).toBe('to-out\n')
    expect(output.stderr).toBe('to-err\n')
    const listed = await sandbox.listProcesses()
    expect(listed.map((p) => p.id)).toContain(proc.id)
  })

  test('kills a running process', async ({ sandbox }) => {
    const proc = await sandbox.startProcess('echo up; exec sleep 300')
    await proc.kill()
    const done = await proc.wait()
    expect(done.status).toBe('killed')
    expect(done.exitCode).not.toBe(0)
  })

  test('serves HTTP from a background process to curl in a shell', async ({ sandbox }) => {
    await sandbox.files.write('/workspace/e2e-server.cjs', SERVER)
    const server = await sandbox.startProcess('node e2e-server.cjs')
    await using sh = await sandbox.shell()
    // Wait on the server's own signal (the port file), bounded by the run's timeout.
    const ready = await sh.run('until [ -e e2e-server.port ]; do sleep 0.02; done; cat e2e-server.port', {
      timeoutMs: 20_000,
    })
    expect(ready.timedOut).toBe(false)
    const port = ready.stdout.trim()
    expect(port).toMatch(/^\d+$/)

    const hasCurl =
      (await sh.run('command -v curl >/dev/null && echo yes || echo no')).stdout.trim() === 'yes'
    const fetchCommand = hasCurl
      ? `curl -sS http://127.0.0.1:${port}/hello`
      : `exec 3<>/dev/tcp/127.0.0.1/${port}; printf 'GET /hello HTTP/1.0\\r\\n\\r\\n' >&3; tail -n 1 <&3`
    const answer = await sh.run(fetchCommand, { timeoutMs: 10_000 })
    expect(answer.stdout).toBe('served /hello\n')
    expect(answer.exitCode).toBe(0)

    expect((await server.output()).stdout).toBe('listening\n')
    await server.kill()
    expect((await server.wait()).status).toBe('killed')
  })
})
