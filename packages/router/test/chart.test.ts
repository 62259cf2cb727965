// The Helm chart, rendered by scripts/render-chart.mjs (no Helm and no cluster here) and
// checked against the Kubernetes schemas, plus the promises the chart makes: the router's shard
// table names exactly the runner pods, shard names fit sandbox ids, runner pods are reachable
// only from the router, privileges follow the driver, and the key comes from a Secret.
import { fileURLToPath } from 'node:url'
import { ShardName } from '@conch/protocol'
import { describe, expect, it } from 'vitest'
import { parseAllDocuments } from 'yaml'
import { renderChart, TemplateError } from '../../../scripts/render-chart.mjs'
import { parseRouterConfig } from '../src/router-config.ts'
import { buildShardTable } from '../src/shard-table.ts'
import { type Manifest, schemaProblems, typeProblems } from './kubernetes-schema.ts'

const CHART = fileURLToPath(new URL('../../../deploy/helm/conch', import.meta.url))
const KEY = { apiKey: { value: 'conch_0123456789abcdef0123' } }

type Options = Parameters<typeof renderChart>[1]

function render(options: Options = { values: KEY }): Manifest[] {
  return renderChart(CHART, options).flatMap((m) =>
    parseAllDocuments(m.text).map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${m.source}: ${doc.errors[0]!.message}`)
      return doc.toJS() as Manifest
    }),
  )
}

// biome-ignore lint/suspicious/noExplicitAny: manifests are read field by field, and each assertion checks what it reads
type Json = any

function find(manifests: Manifest[], kind: string, suffix = ''): Json {
  const hit = manifests.find((m) => m.kind === kind && (m.metadata?.name ?? '').endsWith(suffix))
  if (!hit) throw new Error(`no ${kind} ${suffix} in ${manifests.map((m) => m.kind).join(', ')}`)
  return hit
}

const envOf = (container: Json, name: string): Json => container.env.find((e: Json) => e.name === name)

const VARIANTS: [string, Options][] = [
  ['defaults (namespace driver)', { values: KEY }],
  [
    'local driver, existing Secret, no NetworkPolicy',
    {
      values: {
        runner: { driver: 'local' },
        apiKey: { existingSecret: 'mine' },
        networkPolicy: { enabled: false },
      },
    },
  ],
  [
    'gvisor driver with every optional value set',
    {
      releaseName: 'prod',
      namespace: 'sandboxes',
      values: {
        ...KEY,
        imagePullSecrets: [{ name: 'pull' }],
        previewDomain: 'preview.example.com',
        runner: {
          driver: 'gvisor',
          replicas: 5,
          extraEnv: [{ name: 'CONCH_SCROLLBACK_BYTES', value: '1048576' }],
          persistence: { storageClass: 'fast' },
          nodeSelector: { 'conch/runner': 'yes' },
          tolerations: [{ key: 'sandbox', operator: 'Exists', effect: 'NoSchedule' }],
          podAnnotations: { 'prometheus.io/scrape': 'true' },
        },
        router: {
          service: { type: 'LoadBalancer', annotations: { a: 'b' } },
          extraEnv: [{ name: 'CONCH_ROUTER_MAX_CONNECTIONS', value: '100' }],
        },
        networkPolicy: {
          routerIngressFrom: [{ namespaceSelector: { matchLabels: { team: 'agents' } } }],
          runnerExtraEgress: [{ to: [{ ipBlock: { cidr: '10.0.0.0/8' } }] }],
        },
      },
    },
  ],
]

describe('the Helm chart', () => {
  for (const [name, options] of VARIANTS) {
    it(`renders manifests that the Kubernetes schemas accept: ${name}`, async () => {
      const manifests = render(options)
      expect(manifests.length).toBeGreaterThanOrEqual(5)
      expect(await schemaProblems(manifests)).toEqual([])
      expect(typeProblems(manifests)).toEqual([])
    })
  }

  it('catches a misspelt field with the type check, which the run-time schemas let through', async () => {
    const manifests = render()
    const service = structuredClone(find(manifests, 'Service', '-router'))
    service.spec.portz = service.spec.ports
    expect(await schemaProblems([service as Manifest])).toEqual([])
    expect(typeProblems([service as Manifest]).join('\n')).toMatch(/portz/)
  })

  it('sets one preview domain on the runners and the router, and none by default', () => {
    const domain = 'preview.example.com'
    const manifests = render({ values: { ...KEY, previewDomain: domain } })
    const runner = find(manifests, 'StatefulSet').spec.template.spec.containers[0]
    const router = find(manifests, 'Deployment', '-router').spec.template.spec.containers[0]
    expect(envOf(runner, 'CONCH_PREVIEW_DOMAIN')?.value).toBe(domain)
    // The router reads the value it is given as its --preview-domain.
    const routerEnv = Object.fromEntries(router.env.map((e: Json) => [e.name, e.value]))
    expect(parseRouterConfig(['--shards', 'conch-0=http://a:1'], routerEnv).previewDomain).toBe(domain)
    const plain = render()
    expect(
      envOf(find(plain, 'StatefulSet').spec.template.spec.containers[0], 'CONCH_PREVIEW_DOMAIN'),
    ).toBeUndefined()
    expect(
      envOf(
        find(plain, 'Deployment', '-router').spec.template.spec.containers[0],
        'CONCH_ROUTER_PREVIEW_DOMAIN',
      ),
    ).toBeUndefined()
  })

  it('gives the router a shard table that names exactly the runner pods', () => {
    const manifests = render({
      releaseName: 'agents',
      namespace: 'sbx',
      values: { ...KEY, runner: { replicas: 4 } },
    })
    const sts = find(manifests, 'StatefulSet')
    const headless = find(manifests, 'Service', '-headless')
    const router = find(manifests, 'Deployment', '-router').spec.template.spec.containers[0]
    const table = buildShardTable({
      pattern: envOf(router, 'CONCH_ROUTER_SHARD_PATTERN').value,
      count: Number(envOf(router, 'CONCH_ROUTER_SHARD_COUNT').value),
    })
    const pods = Array.from({ length: sts.spec.replicas }, (_, n) => `${sts.metadata.name}-${n}`)
    expect([...table.keys()]).toEqual(pods)
    expect(sts.spec.serviceName).toBe(headless.metadata.name)
    expect(headless.spec.clusterIP).toBe('None')
    expect(headless.spec.publishNotReadyAddresses).toBe(true)
    for (const shard of table.values()) {
      expect(shard.url.host).toBe(`${shard.name}.${headless.metadata.name}.sbx.svc.cluster.local:7878`)
    }
    // Each runner's shard is its pod name, from the downward API.
    const runner = sts.spec.template.spec.containers[0]
    expect(envOf(runner, 'CONCH_SHARD').valueFrom.fieldRef.fieldPath).toBe('metadata.name')
  })

  it('keeps shard names valid for sandbox ids whatever the release is called', () => {
    for (const releaseName of [
      'conch',
      'a-very-long-release-name-for-the-agents',
      'x',
      'conch-prod-eu-west-1-b',
    ]) {
      const sts = find(render({ releaseName, values: KEY }), 'StatefulSet')
      expect(ShardName.safeParse(`${sts.metadata.name}-999`).success, sts.metadata.name).toBe(true)
    }
  })

  it('lets only the router reach the runners, and the runners reach nothing', () => {
    const manifests = render()
    const policy = find(manifests, 'NetworkPolicy', '-runner')
    const sts = find(manifests, 'StatefulSet')
    const router = find(manifests, 'Deployment', '-router')
    expect(policy.spec.podSelector.matchLabels).toEqual(sts.spec.selector.matchLabels)
    expect(policy.spec.policyTypes).toEqual(['Ingress', 'Egress'])
    expect(policy.spec.ingress).toEqual([
      {
        from: [{ podSelector: { matchLabels: router.spec.selector.matchLabels } }],
        ports: [{ protocol: 'TCP', port: 7878 }],
      },
    ])
    expect(policy.spec.egress).toEqual([])
  })

  it('gives runner pods the privileges of their driver and no more, and the router none', () => {
    for (const driver of ['namespace', 'gvisor']) {
      const sts = find(render({ values: { ...KEY, runner: { driver } } }), 'StatefulSet')
      const c = sts.spec.template.spec.containers[0]
      expect(c.securityContext).toEqual({ privileged: true })
      expect(envOf(c, 'CONCH_DRIVERS').value).toBe(driver)
    }
    const local = find(render({ values: { ...KEY, runner: { driver: 'local' } } }), 'StatefulSet').spec
      .template.spec
    expect(local.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    })
    expect(local.containers[0].securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    })
    const router = find(render(), 'Deployment', '-router').spec.template.spec
    expect(router.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    })
    expect(router.containers[0].securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    })
    // Neither calls the Kubernetes API: no token is mounted and no RBAC object exists.
    const manifests = render()
    expect(manifests.filter((m) => /Role/.test(m.kind))).toEqual([])
    expect(find(manifests, 'ServiceAccount').automountServiceAccountToken).toBe(false)
  })

  it('probes /healthz and /readyz and sets requests and limits on every container', () => {
    for (const workload of [find(render(), 'StatefulSet'), find(render(), 'Deployment')]) {
      for (const c of workload.spec.template.spec.containers) {
        expect(c.livenessProbe.httpGet.path).toBe('/healthz')
        expect(c.readinessProbe.httpGet.path).toBe('/readyz')
        expect(Object.keys(c.resources.requests).sort()).toEqual(['cpu', 'memory'])
        expect(c.resources.limits.memory).toBeDefined()
      }
    }
    expect(find(render(), 'StatefulSet').spec.volumeClaimTemplates[0].spec.resources.requests.storage).toBe(
      '20Gi',
    )
  })

  it('takes the API key from a Secret, and refuses to render without one', () => {
    const made = render()
    const secret = find(made, 'Secret')
    const runner = find(made, 'StatefulSet').spec.template.spec.containers[0]
    expect(envOf(runner, 'CONCH_API_KEY').valueFrom.secretKeyRef).toEqual({
      name: secret.metadata.name,
      key: 'api-key',
    })
    const existing = render({ values: { apiKey: { existingSecret: 'vault-conch', secretKey: 'key' } } })
    expect(existing.filter((m) => m.kind === 'Secret')).toEqual([])
    const c = find(existing, 'StatefulSet').spec.template.spec.containers[0]
    expect(envOf(c, 'CONCH_API_KEY').valueFrom.secretKeyRef).toEqual({ name: 'vault-conch', key: 'key' })
    // The router holds no key.
    const router = find(made, 'Deployment').spec.template.spec.containers[0]
    expect(JSON.stringify(router)).not.toMatch(/API_KEY|secretKeyRef/)
    expect(() => render({ values: {} })).toThrow(/set apiKey.existingSecret or apiKey.value/)
  })
})

describe('the chart renderer', () => {
  it('fails loudly on template syntax outside its subset instead of rendering it differently', () => {
    expect(() =>
      renderChart(fileURLToPath(new URL('./fixtures/unsupported-chart', import.meta.url))),
    ).toThrow(TemplateError)
  })
})
