// Files and background processes with the real agent.
import { ErrorBody, FileInfo, ProcessInfo } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { baseUrl, createSandbox, startRunner } from './runner-fixture.ts'

describe('files (real agent)', () => {
  it('writes raw bytes, reads them back raw and as JSON, lists, stats, renames and removes', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const base = `${baseUrl(runner.app)}/v1/sandboxes/${id}`
    const bytes = Buffer.alloc(300_000, 0)
    for (let i = 0; i < bytes.length; i++) bytes[i] = i % 251
    const put = await fetch(`${base}/files?path=/workspace/dir/data.bin`, {
      method: 'PUT',
      headers: { ...runner.auth, 'content-type': 'application/octet-stream' },
      body: bytes,
    })
    expect(put.status, await put.clone().text()).toBe(200)
    expect(FileInfo.parse(await put.json())).toMatchObject({
      name: 'data.bin',
      size: bytes.length,
      type: 'file',
    })

    const raw = await fetch(`${base}/files?path=dir/data.bin`, { headers: runner.auth })
    expect(Buffer.from(await raw.arrayBuffer()).equals(bytes)).toBe(true)

    const inject = (method: 'GET' | 'POST', url: string, payload?: object) =>
      runner.app.inject({
        method,
        url: `/v1/sandboxes/${id}${url}`,
        headers: runner.auth,
        ...(payload ? { payload } : {}),
      })
    await fetch(`${base}/files?path=note.txt`, { method: 'PUT', headers: runner.auth, body: 'héllo' })
    const json = '{"kept": "verbatim" }'
    await fetch(`${base}/files?path=data.json`, {
      method: 'PUT',
      headers: { ...runner.auth, 'content-type': 'application/json' },
      body: json,
    })
    expect(await (await fetch(`${base}/files?path=data.json`, { headers: runner.auth })).text()).toBe(json)
    expect((await inject('GET', '/files?path=note.txt&encoding=utf8')).json()).toMatchObject({
      content: 'héllo',
      encoding: 'utf8',
    })
    const listed = (await inject('GET', '/files/list?path=/workspace')).json() as {
      entries: { name: string }[]
    }
    expect(listed.entries.map((e) => e.name).sort()).toEqual(['data.json', 'dir', 'note.txt'])
    expect(FileInfo.parse((await inject('GET', '/files/stat?path=dir')).json()).type).toBe('directory')
    expect(
      FileInfo.parse((await inject('POST', '/files/mkdir', { path: 'a/b', recursive: true })).json()).type,
    ).toBe('directory')
    expect(
      FileInfo.parse((await inject('POST', '/files/rename', { from: 'note.txt', to: 'a/n.txt' })).json())
        .name,
    ).toBe('n.txt')
    expect((await inject('POST', '/files/remove', { path: 'a', recursive: true })).json()).toEqual({
      ok: true,
    })
    const missing = await inject('GET', '/files/stat?path=a')
    expect(ErrorBody.parse(missing.json()).error.code).toBe('FILE_NOT_FOUND')
  })

  it('answers path traversal with PATH_OUTSIDE_SANDBOX from the agent', async () => {
    await using runner = await startRunner()
    const id = await createSandbox(runner)
    for (const path of ['../../etc/passwd', '/etc/passwd', '/workspace/../../x']) {
      const res = await runner.app.inject({
        method: 'GET',
        url: `/v1/sandboxes/${id}/files/stat?path=${encodeURIComponent(path)}`,
        headers: runner.auth,
      })
      expect(res.statusCode, path).toBe(403)
      expect(ErrorBody.parse(res.json()).error.code).toBe('PATH_OUTSIDE_SANDBOX')
    }
    const read = await runner.app.inject({
      method: 'GET',
      url: `/v1/sandboxes/${id}/files?path=${encodeURIComponent('../../../etc/passwd')}`,
      headers: runner.auth,
    })
    expect(ErrorBody.parse(read.json()).error.code).toBe('PATH_OUTSIDE_SANDBOX')
  })
})

describe('processes (real agent)', () => {
  it('starts, lists, reads output since an offset, streams, kills and waits for a process', async () => {
    await using runner = await startRunner({ listen: true })
    const id = await createSandbox(runner)
    const inject = (method: 'GET' | 'POST', url: string, payload?: object) =>
      runner.app.inject({
        method,
        url: `/v1/sandboxes/${id}${url}`,
        headers: runner.auth,
        ...(payload ? { payload } : {}),
      })
    const started = ProcessInfo.parse(
      (await inject('POST', '/processes', { command: 'echo ready; exec sleep 60' })).json(),
    )
    expect(started.status).toBe('running')
    const listed = (await inject('GET', '/processes')).json() as { processes: { id: string }[] }
    expect(listed.processes.map((p) => p.id)).toContain(started.id)
    expect(ProcessInfo.parse((await inject('GET', `/processes/${started.id}`)).json()).id).toBe(started.id)

    const stream = await fetch(`${baseUrl(runner.app)}/v1/sandboxes/${id}/processes/${started.id}/stream`, {
      headers: runner.auth,
    })
    const reader = stream.body!.getReader()
    const first = JSON.parse(new TextDecoder().decode((await reader.read()).value).split('\n')[0]!)
    expect(first).toMatchObject({ type: 'stdout', data: 'ready\n' })
    await reader.cancel()

    const output = (await inject('GET', `/processes/${started.id}/output?since=0`)).json()
    expect(output).toMatchObject({ stdout: 'ready\n', encoding: 'utf8', nextOffset: 6 })
    const killed = ProcessInfo.parse((await inject('POST', `/processes/${started.id}/kill`, {})).json())
    expect(['killed', 'running']).toContain(killed.status)
    const waited = ProcessInfo.parse((await inject('POST', `/processes/${started.id}/wait`, {})).json())
    expect(waited.status).toBe('killed')
    const unknown = await inject('GET', '/processes/proc_doesnotexist')
    expect(ErrorBody.parse(unknown.json()).error.code).toBe('PROCESS_NOT_FOUND')
  })
})
