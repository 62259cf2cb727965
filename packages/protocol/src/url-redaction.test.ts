import { describe, expect, it } from 'vitest'
import { redactUrl } from './url-redaction.ts'

const KEY = `conch_${'k'.repeat(43)}`
const SANDBOX_TOKEN = `cst_${'t'.repeat(43)}`
const PORT_TOKEN = `cpt_sb_abcdefgh12.3000.1795547696589.${'m'.repeat(43)}`

describe('redactUrl', () => {
  it('cuts credential-like query values and keeps the rest of the URL', () => {
    expect(redactUrl(`/v1/sandboxes/sb_x/ports/3000/a?conch_port_token=${PORT_TOKEN}&b=1`)).toBe(
      '/v1/sandboxes/sb_x/ports/3000/a?conch_port_token=[redacted]&b=1',
    )
    expect(redactUrl('/x?token=a&API_KEY=b&client_secret=c&password=d&X-Amz-Signature=e&page=2')).toBe(
      '/x?token=[redacted]&API_KEY=[redacted]&client_secret=[redacted]&password=[redacted]&X-Amz-Signature=[redacted]&page=2',
    )
    expect(redactUrl('/x?%74oken=a')).toBe('/x?%74oken=[redacted]')
    expect(redactUrl('/plain/path')).toBe('/plain/path')
  })

  it("cuts conch's own credentials anywhere, encoded or misnamed", () => {
    expect(redactUrl(`/a/${KEY}/b?q=${SANDBOX_TOKEN}`)).toBe('/a/conch_[redacted]/b?q=cst_[redacted]')
    expect(redactUrl(`/a?next=${encodeURIComponent(PORT_TOKEN)}`)).toBe('/a?next=cpt_[redacted]')
    expect(redactUrl('/a?conch_port_token_name=x')).toBe('/a?conch_port_token_name=[redacted]')
  })
})
