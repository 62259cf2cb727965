import { describe, expect, it } from 'vitest'
import { type ProxyTarget, upstreamHeaders, withoutPortCookie } from './port-proxy.ts'
import { takeQueryToken } from './port-token.ts'

const target: ProxyTarget = {
  port: 3000,
  path: '/',
  stripAuthorization: true,
  responseHeaders: {},
  forwarded: {
    host: 'runner:7070',
    proto: 'http',
    prefix: '/v1/sandboxes/sb_x/ports/3000',
    for: '127.0.0.1',
  },
}

describe('what a sandbox server receives', () => {
  it('never the runner credential, the port cookie, hop-by-hop headers or forged forwarding headers', () => {
    const out = upstreamHeaders(
      {
        authorization: 'Bearer conch_secret',
        cookie: 'conch_port_token=cpt_x; theme=dark',
        connection: 'keep-alive, x-hop',
        'x-hop': '1',
        'transfer-encoding': 'chunked',
        'proxy-authorization': 'Basic eA==',
        'x-forwarded-for': '6.6.6.6',
        host: 'runner:7070',
        accept: 'text/html',
      },
      target,
    )
    expect(out).toEqual({
      cookie: 'theme=dark',
      accept: 'text/html',
      host: 'localhost:3000',
      'x-forwarded-host': 'runner:7070',
      'x-forwarded-proto': 'http',
      'x-forwarded-prefix': '/v1/sandboxes/sb_x/ports/3000',
      'x-forwarded-for': '127.0.0.1',
    })
  })

  it('keeps an app’s own Authorization when it was not the runner’s credential', () => {
    expect(
      upstreamHeaders({ authorization: 'Basic YTpi' }, { ...target, stripAuthorization: false })
        .authorization,
    ).toBe('Basic YTpi')
    expect(withoutPortCookie('conch_port_token=a')).toBe('')
  })

  it('takes the port token out of the query and leaves every other byte of the path', () => {
    expect(takeQueryToken('/a/../b%2f?x=1&conch_port_token=cpt_t&y=%20')).toEqual({
      path: '/a/../b%2f?x=1&y=%20',
      token: 'cpt_t',
    })
    expect(takeQueryToken('/?conch_port_token=cpt_t')).toEqual({ path: '/', token: 'cpt_t' })
    expect(takeQueryToken('/p?q')).toEqual({ path: '/p?q', token: null })
  })
})
