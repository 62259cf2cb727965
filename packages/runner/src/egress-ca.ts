// A sandbox's egress certificate authority: the CA its proxy signs leaf certificates with when it
// terminates TLS to a host that gets injected credentials.
//
// Model: one ECDSA P-256 CA per sandbox, created with the sandbox and kept in the runner's state
// (so a restarted runner presents the same CA the sandbox already trusts). Only its certificate
// enters the sandbox; its key stays in the runner. The CA is constrained to what the proxy needs
// (basic constraints CA with path length 0, key usage certSign only, one day of backdating for
// clock skew) and leaves are minted on demand for one DNS name, cached per host, and expire
// long before the CA does. Certificates are built with @peculiar/x509 over Node's WebCrypto.
// @peculiar/x509 resolves its ASN.1 helpers through tsyringe, which needs the Reflect metadata API.
import 'reflect-metadata'
import * as x509 from '@peculiar/x509'

const webcrypto = globalThis.crypto
x509.cryptoProvider.set(webcrypto)

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const
const DAY_MS = 24 * 60 * 60 * 1000
/** Lifetime of a sandbox CA. */
const CA_LIFETIME_MS = 365 * DAY_MS
/** Lifetime of a leaf; leaves are minted again after a runner restart, so this can be short. */
const LEAF_LIFETIME_MS = 30 * DAY_MS

/** A CA as stored in the runner's state: its certificate and its PKCS#8 key, both PEM. */
export interface StoredEgressCa {
  /** The certificate (the only part a sandbox sees). */
  certPem: string
  /** The private key; never leaves the runner. */
  keyPem: string
}

/** A leaf certificate and its key, ready for `tls.createSecureContext`. */
export interface LeafCertificate {
  /** Certificate chain PEM (leaf, then the CA). */
  cert: string
  /** Key PEM. */
  key: string
}

function serial(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16))
  bytes[0] = (bytes[0] ?? 0) & 0x7f
  return Buffer.from(bytes).toString('hex')
}

async function keyPem(key: CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', key)
  return x509.PemConverter.encode(der, 'PRIVATE KEY')
}

/** One sandbox's CA. */
export class EgressCa {
  readonly #stored: StoredEgressCa
  readonly #cert: x509.X509Certificate
  readonly #key: CryptoKey
  readonly #leaves = new Map<string, Promise<LeafCertificate>>()

  private constructor(stored: StoredEgressCa, cert: x509.X509Certificate, key: CryptoKey) {
    this.#stored = stored
    this.#cert = cert
    this.#key = key
  }

  /** A new CA for `sandboxId`. */
  static async create(sandboxId: string, now = Date.now()): Promise<EgressCa> {
    const keys = await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])
    const cert = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: serial(),
      name: `CN=conch egress CA ${sandboxId}, O=conch`,
      notBefore: new Date(now - DAY_MS),
      notAfter: new Date(now + CA_LIFETIME_MS),
      keys: keys as CryptoKeyPair,
      signingAlgorithm: ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey as CryptoKey),
      ],
    })
    const stored = { certPem: cert.toString('pem'), keyPem: await keyPem(keys.privateKey as CryptoKey) }
    return new EgressCa(stored, cert, keys.privateKey as CryptoKey)
  }

  /** The CA kept in the runner's state by `toStored`. */
  static async fromStored(stored: StoredEgressCa): Promise<EgressCa> {
    const cert = new x509.X509Certificate(stored.certPem)
    const key = await webcrypto.subtle.importKey(
      'pkcs8',
      x509.PemConverter.decodeFirst(stored.keyPem),
      ALGORITHM,
      false,
      ['sign'],
    )
    return new EgressCa(stored, cert, key)
  }

  /** What the runner keeps to present the same CA after a restart. */
  toStored(): StoredEgressCa {
    return { ...this.#stored }
  }

  /** The CA certificate, PEM: what a sandbox adds to its trust. */
  get certPem(): string {
    return this.#stored.certPem
  }

  /** A leaf for `host` (a DNS name), minted once per host and CA. */
  leaf(host: string, now = Date.now()): Promise<LeafCertificate> {
    let leaf = this.#leaves.get(host)
    if (!leaf) {
      leaf = this.#mint(host, now)
      // A failed mint is not cached.
      leaf.catch(() => this.#leaves.delete(host))
      if (this.#leaves.size > 1024) this.#leaves.clear()
      this.#leaves.set(host, leaf)
    }
    return leaf
  }

  async #mint(host: string, now: number): Promise<LeafCertificate> {
    const keys = await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: serial(),
      subject: `CN=${host}`,
      issuer: this.#cert.subject,
      notBefore: new Date(now - DAY_MS),
      notAfter: new Date(Math.min(now + LEAF_LIFETIME_MS, this.#cert.notAfter.getTime())),
      publicKey: keys.publicKey as CryptoKey,
      signingKey: this.#key,
      signingAlgorithm: ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: host }]),
        await x509.AuthorityKeyIdentifierExtension.create(this.#cert),
      ],
    })
    return {
      cert: `${cert.toString('pem')}\n${this.#stored.certPem}\n`,
      key: await keyPem(keys.privateKey as CryptoKey),
    }
  }
}
