import { z } from 'zod'
import { SandboxId, Timestamp } from './primitives.ts'

// The network surface of a sandbox. A sandbox has no network interface but loopback; the
// runner reaches a port inside it through the agent (which dials 127.0.0.1:<port> in the
// sandbox's own namespace) and serves it at `/v1/sandboxes/:id/ports/:port/…`. Egress is off
// unless the sandbox's create request names an allowlist.

/** A TCP port a sandbox server may listen on. 0 and anything above 65535 are refused. */
export const PortNumber = z.number().int().min(1).max(65_535)
/** A TCP port. */
export type PortNumber = z.infer<typeof PortNumber>

/** A port number in a URL path segment: decimal digits only, no sign, no leading zeros. */
export const PortSegment = z
  .string()
  .regex(/^[1-9][0-9]{0,4}$/, 'a port is a decimal number from 1 to 65535')
  .transform(Number)
  .pipe(PortNumber)

/** A port as it appears in a path, as a number. */
export type PortSegment = z.infer<typeof PortSegment>
/** A TCP socket listening inside a sandbox, read from `/proc/net/tcp{,6}` in its namespace. */
export const ListeningPort = z.object({
  /** Port number. */
  port: PortNumber,
  /** Local address it is bound to (`127.0.0.1`, `0.0.0.0`, `::`, `::1`, ...). */
  address: z.string().max(64),
  /** Address family. */
  family: z.enum(['ipv4', 'ipv6']),
})
/** A listening socket. */
export type ListeningPort = z.infer<typeof ListeningPort>

/** The listening ports of a sandbox. */
export const PortList = z.object({
  /** Ports in ascending order; one entry per port and family. */
  ports: z.array(ListeningPort),
})
/** A port list. */
export type PortList = z.infer<typeof PortList>

/** A change in a sandbox's listening ports, one NDJSON line of `GET /v1/sandboxes/:id/port-events`. */
export const PortEvent = z.object({
  /** `port_opened` when a server starts listening on the port, `port_closed` when none does any more. */
  type: z.enum(['port_opened', 'port_closed']),
  /** Port number. */
  port: PortNumber,
  /** The addresses it listens on (empty for `port_closed`). */
  addresses: z.array(z.string().max(64)),
})
/** A port event. */
export type PortEvent = z.infer<typeof PortEvent>

/** Path parameters of a port route. */
export const PortParams = z.object({
  /** Sandbox id. */
  id: z.string(),
  /** Port number. */
  port: PortSegment,
})

/** Path parameters of the port relay routes. */
export type PortParams = z.infer<typeof PortParams>
/** Body of `POST /v1/sandboxes/:id/exposed-ports/:port`. */
export const ExposePortRequest = z.object({
  /** Reachable without any credential; refused unless the runner allows public ports. */
  public: z.boolean().optional(),
  /** Lifetime of the port token; defaults to 15 minutes, at most 24 hours. */
  ttlMs: z.number().int().positive().optional(),
})
/** Port exposure options. */
export type ExposePortRequest = z.infer<typeof ExposePortRequest>

/** An exposed port: where a browser reaches it, and the token that lets it in. */
export const ExposedPort = z.object({
  /** Sandbox id. */
  sandboxId: SandboxId,
  /** Port number. */
  port: PortNumber,
  /** Path on the runner, with the port token in its query (a browser trades it for a cookie). */
  path: z.string(),
  /** Host-based URL (`https://3000-<id>.<preview domain>/`) when the runner has a preview domain. */
  previewUrl: z.string().nullable(),
  /** A token for this one port of this one sandbox; shown once. */
  token: z.string(),
  /** When the token stops working. */
  expiresAt: Timestamp,
  /** Whether the port is reachable without a credential. */
  public: z.boolean(),
})
/** An exposed port. */
export type ExposedPort = z.infer<typeof ExposedPort>

/** One allowlist entry: a host name (`api.example.com`), a wildcard (`*.example.org`), an IP or CIDR, optionally `:port`. */
export const EgressRule = z
  .string()
  .min(1)
  .max(300)
  .regex(/^[A-Za-z0-9.*:[\]/_-]+$/, 'an egress rule is a host, *.domain, IP or CIDR, optionally with :port')

/** The name of an operator-defined egress credential. */
export const EgressCredentialName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'a credential name is letters, digits, _ . - (at most 64)')
/** The name of an egress credential. */
export type EgressCredentialName = z.infer<typeof EgressCredentialName>

/** One allowlist entry. */
export type EgressRule = z.infer<typeof EgressRule>
/** A sandbox's network policy; no egress unless an allowlist is given. */
export const NetworkPolicy = z.object({
  /** `none` (the default) or an allowlist the runner's proxy enforces. */
  egress: z.union([
    z.literal('none'),
    z.object({
      /** Hosts, wildcards, IPs or CIDRs, each optionally with `:port` (default: 80 and 443). */
      allow: z.array(EgressRule).min(1).max(256),
      /**
       * Names of credentials the runner's operator defined (`--egress-credentials`) that the
       * proxy adds to this sandbox's requests to their hosts; the values never enter the sandbox.
       * Each credential's host must be on `allow`.
       */
      credentials: z.array(EgressCredentialName).max(32).optional(),
    }),
  ]),
})
/** A network policy. */
export type NetworkPolicy = z.infer<typeof NetworkPolicy>

/** The loopback port inside a sandbox where its egress proxy listens (when it has an allowlist). */
export const EGRESS_PROXY_PORT = 3128

/** Query parameter that carries a port token on a browser's first visit. */
export const PORT_TOKEN_QUERY = 'conch_port_token'
/** Cookie that carries a port token after the first visit. */
export const PORT_TOKEN_COOKIE = 'conch_port_token'
/** Prefix of per-port tokens. */
export const PORT_TOKEN_PREFIX = 'cpt_'
