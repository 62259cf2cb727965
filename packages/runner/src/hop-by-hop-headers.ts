// The headers a proxy never forwards: they describe one hop, not the message (RFC 9110 §7.6.1,
// plus the proxy ones); `host` is set by each hop for its own target. The port relay and the
// egress proxy (plain and credential-injecting) drop them on the way in and out.

/** Header names, lower case, that belong to one hop. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
])
