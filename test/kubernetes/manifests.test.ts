import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { DASHBOARD_FILE, RULES_FILE } from '../../scripts/monitoring/write.js';
import { type Config, loadConfig } from '../../src/config/index.js';
import { ROOT } from '../server-process.js';
import { makeTlsFiles, OPENSSL_MISSING, OPENSSL_SKIP_REASON, type TlsFiles } from '../tls-files.js';
import { type KubeObject, schemaErrors } from './api-schema.js';
import {
  bytes,
  type Container,
  containerEnvironment,
  cores,
  type Deployment,
  find,
  KUBECTL_SKIP_REASON,
  manifestTree,
  mountedFiles,
  OVERLAYS,
  type Overlay,
  preStopSeconds,
  render,
  writeMountedFiles,
} from './manifests.js';

/**
 * deploy/kubernetes rendered by kubectl kustomize, each object held to the API schema of a
 * current Kubernetes release and to what the service depends on: probes on the right endpoints
 * with timings that fit its own, a grace period longer than its shutdown, resources, a locked-down
 * security context, one cursor secret, settings the service accepts. The Kubernetes suite runs
 * these too (manifests.kubernetes.ts), and then the dev overlay itself under podman.
 */

const SKIP_REASON = KUBECTL_SKIP_REASON || (OPENSSL_MISSING && OPENSSL_SKIP_REASON);
const SERVICE = 'greeting-service';

/** The kinds Kubernetes serves without a CRD, by apiVersion. */
const BUILT_IN = new Set(['v1', 'apps/v1', 'policy/v1', 'autoscaling/v2', 'networking.k8s.io/v1']);
/** Gateway API's: its CRDs come with every implementation of it, as the production edge needs. */
const GATEWAY_API = 'gateway.networking.k8s.io/v1';

/** The paths clients may reach through the edge: the API, its page and its document. */
const EDGE_PATHS = [
  ['PathPrefix', '/api'],
  ['PathPrefix', '/docs'],
  ['Exact', '/openapi.json'],
  ['Exact', '/api/events'],
  ['Exact', '/api/v1/events'],
  ['Exact', '/api/echo/websocket'],
  ['Exact', '/api/v1/echo/websocket'],
];

/** The long-lived answers: an event stream and the WebSocket echo, under both forms of /api. */
const STREAM_PATHS = new Set(['/api/events', '/api/v1/events', '/api/echo/websocket', '/api/v1/echo/websocket']);

/** RFC 1123 labels, as the API server requires of container names and most object names. */
const DNS_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
/** An IANA service name: what a port's name must be, at most 15 characters with a letter. */
const PORT_NAME = /^(?=.*[a-z])[a-z0-9](?:[a-z0-9-]{0,13}[a-z0-9])?$/;

const matches = (selector: Record<string, string> | undefined, labels: Record<string, string>) =>
  selector !== undefined &&
  Object.keys(selector).length > 0 &&
  Object.entries(selector).every(([key, value]) => labels[key] === value);

describe('deploy/kubernetes', { skip: SKIP_REASON }, () => {
  let tls: TlsFiles;
  let tree: { dir: string; remove: () => void };
  let files: string;
  const rendered = {} as Record<Overlay | 'base', KubeObject[]>;

  before(() => {
    if (SKIP_REASON) return;
    tls = makeTlsFiles();
    tree = manifestTree(tls);
    files = mkdtempSync(join(tmpdir(), 'greeting-kubernetes-files-'));
    rendered.base = render(join(tree.dir, 'base'));
    for (const overlay of OVERLAYS) rendered[overlay] = render(join(tree.dir, 'overlays', overlay));
  });

  after(() => {
    tls?.remove();
    tree?.remove();
    if (files !== undefined) rmSync(files, { recursive: true, force: true });
  });

  /** The production overlay rendered with a component added, and without the resources it replaces. */
  const withComponent = (component: string, replaced: string[] = []): KubeObject[] => {
    const production = join(tree.dir, 'overlays', 'production', 'kustomization.yaml');
    const kustomization = readFileSync(production, 'utf8');
    const resources = replaced.reduce((text, file) => text.replace(`  - ${file}\n`, ''), kustomization);
    writeFileSync(production, `${resources}components:\n  - ../../components/${component}\n`);
    try {
      return render(join(tree.dir, 'overlays', 'production'));
    } finally {
      writeFileSync(production, kustomization);
    }
  };

  const service = (overlay: Overlay) => find<Deployment>(rendered[overlay], 'Deployment', SERVICE);
  const container = (overlay: Overlay): Container => {
    const found = service(overlay).spec.template.spec.containers.find((c) => c.name === SERVICE);
    assert.ok(found, `the ${SERVICE} container`);
    return found;
  };

  /** The service's configuration in a pod of the overlay, its Secret files written where the pod mounts them. */
  const podConfig = (
    overlay: Overlay,
    objects = rendered[overlay],
  ): { env: Record<string, string>; config: Config } => {
    const deployment = find<Deployment>(objects, 'Deployment', SERVICE);
    const pod = deployment.spec.template.spec;
    const main = pod.containers.find((c) => c.name === SERVICE) as Container;
    const root = mkdtempSync(join(files, `${overlay}-`));
    const mounted = mountedFiles(objects, pod, main);
    writeMountedFiles(root, mounted);
    const env = containerEnvironment(objects, main);
    // A setting naming a mounted file reads it where this test wrote it.
    const here = Object.fromEntries(
      Object.entries(env).map(([key, value]) => [
        key,
        mounted.some((f) => f.path === value) ? join(root, value) : value,
      ]),
    );
    return { env, config: loadConfig([], here) };
  };

  it('renders the base and every overlay with kubectl kustomize', () => {
    for (const name of ['base', ...OVERLAYS] as const) assert.ok(rendered[name].length > 0, name);
  });

  it('renders no object that the API of Kubernetes 1.36 refuses: schema, formats, no unknown field', async () => {
    for (const name of ['base', ...OVERLAYS] as const) {
      const errors = (await Promise.all(rendered[name].map(schemaErrors))).flat();
      assert.deepEqual(errors, [], name);
    }
  });

  it('holds the schema check to what it must refuse: a misspelt field at any depth, a bad quantity', async () => {
    const deployment = structuredClone(service('dev'));
    const main = deployment.spec.template.spec.containers[0] as Container & Record<string, unknown>;
    (main.securityContext as Record<string, unknown>).readOnlyRootFileSystem = true;
    (main.lifecycle?.preStop?.exec as Record<string, unknown>).cmd = ['sleep', '5'];
    (main.resources?.limits as Record<string, string>).memory = '256 MB';
    const errors = (await schemaErrors(deployment)).join('\n');
    assert.match(errors, /securityContext\.readOnlyRootFileSystem: unknown field/);
    assert.match(errors, /lifecycle\.preStop\.exec\.cmd: unknown field/);
    assert.match(errors, /resources\/limits\/memory must match format "quantity"/);
    // Gateway API's models, whose specs inherit fields: a misspelt one there too.
    const route = structuredClone(find(rendered.production, 'HTTPRoute', SERVICE)) as KubeObject & {
      spec: { rules: { backendRefs: Record<string, unknown>[] }[] } & Record<string, unknown>;
    };
    route.spec.parentRef = route.spec.parentRefs;
    (route.spec.rules[0]?.backendRefs[0] as Record<string, unknown>).namespcae = 'default';
    const routeErrors = (await schemaErrors(route)).join('\n');
    assert.match(routeErrors, /spec\.parentRef: unknown field/);
    assert.match(routeErrors, /spec\.rules\[0\]\.backendRefs\[0\]\.namespcae: unknown field/);
    assert.doesNotMatch(routeErrors, /parentRefs|\.name:|\.port:/);
    assert.deepEqual(await schemaErrors({ ...deployment, apiVersion: 'apps/v2' }), [
      `Deployment ${SERVICE}: no model of apps/v2 Deployment`,
    ]);
  });

  it("needs no CRD but Gateway API's HTTPRoute at the production edge", () => {
    for (const name of ['base', ...OVERLAYS] as const) {
      for (const object of rendered[name]) {
        const allowed = BUILT_IN.has(object.apiVersion) || (name === 'production' && object.kind === 'HTTPRoute');
        assert.ok(allowed, `${name}: ${object.apiVersion} ${object.kind}`);
      }
    }
  });

  it("passes the API server's own checks: names, selectors, references between objects", () => {
    for (const overlay of OVERLAYS) {
      const objects = rendered[overlay];
      for (const object of objects) assert.match(object.metadata.name, DNS_LABEL, `${object.kind} name`);
      for (const deployment of objects.filter((o): o is Deployment => o.kind === 'Deployment')) {
        const { template, selector } = deployment.spec;
        const what = `${overlay}: Deployment ${deployment.metadata.name}`;
        assert.ok(matches(selector.matchLabels, template.metadata.labels), `${what}: selector matches the pods`);
        for (const c of template.spec.containers) {
          assert.match(c.name, DNS_LABEL);
          for (const port of c.ports ?? []) assert.match(String(port.name), PORT_NAME, `${what}: port name`);
          for (const mount of c.volumeMounts ?? []) {
            assert.ok(
              template.spec.volumes?.some((v) => v.name === mount.name),
              `${what}: volume ${mount.name}`,
            );
          }
          for (const probe of [c.startupProbe, c.livenessProbe]) {
            assert.ok((probe?.successThreshold ?? 1) === 1, `${what}: liveness and startup succeed once`);
          }
          for (const probe of [c.startupProbe, c.readinessProbe, c.livenessProbe]) {
            const port = probe?.httpGet?.port ?? probe?.tcpSocket?.port;
            if (typeof port === 'string')
              assert.ok(
                c.ports?.some((p) => p.name === port),
                `${what}: port ${port}`,
              );
          }
          // Every Secret, key and ConfigMap it names is rendered beside it.
          containerEnvironment(objects, c);
          mountedFiles(objects, template.spec, c);
        }
      }
    }
  });

  it('leaves the count to the autoscaler, updated one new pod at a time with none taken out first', () => {
    for (const overlay of OVERLAYS) {
      const { spec } = service(overlay);
      // A count here would be set again by every apply, ending the pods the autoscaler added.
      assert.equal(spec.replicas, undefined, `${overlay}: no spec.replicas beside the autoscaler`);
      assert.equal(spec.strategy?.type, 'RollingUpdate');
      assert.equal(spec.strategy?.rollingUpdate?.maxUnavailable, 0);
      assert.ok(Number(spec.strategy?.rollingUpdate?.maxSurge) >= 1, 'a new pod may start before an old one stops');
    }
  });

  it('probes the right endpoints: startup and liveness /healthz, readiness /readyz without the store, at the port it listens on', () => {
    for (const overlay of OVERLAYS) {
      const c = container(overlay);
      const { config } = podConfig(overlay);
      const prefix = config.contextPath === '/' ? '' : config.contextPath;
      const port = c.ports?.find((p) => p.containerPort === config.port);
      assert.ok(port?.name, `a named container port is PORT (${config.port})`);
      const probes = { startup: c.startupProbe, readiness: c.readinessProbe, liveness: c.livenessProbe };
      const paths = Object.fromEntries(Object.entries(probes).map(([name, p]) => [name, p?.httpGet?.path]));
      assert.deepEqual(paths, {
        startup: `${prefix}/healthz`,
        // Redis is every pod's: counted, its outage would empty the Service of every pod at once.
        readiness: `${prefix}/readyz?exclude=store`,
        liveness: `${prefix}/healthz`,
      });
      for (const probe of Object.values(probes)) assert.equal(probe?.httpGet?.port, port.name);
    }
  });

  it("times the probes to the service's own: a busy pod answers within the timeout, out of rotation within 10 s", () => {
    for (const overlay of OVERLAYS) {
      const { startupProbe, readinessProbe, livenessProbe } = container(overlay);
      const { config } = podConfig(overlay);
      const seconds = (p = {} as NonNullable<typeof readinessProbe>) => ({
        period: p.periodSeconds ?? 10,
        timeout: p.timeoutSeconds ?? 1,
        failures: p.failureThreshold ?? 3,
      });
      const startup = seconds(startupProbe);
      const readiness = seconds(readinessProbe);
      const liveness = seconds(livenessProbe);
      // Plain /readyz waits for Redis at most REDIS_TIMEOUT_MS; a probe switched back to it must not
      // give up first, nor on a pod that answers late for its CPU (up to 871 ms measured under podman).
      assert.ok(
        readiness.timeout * 1000 >= 2 * config.redisTimeoutMs + 1000,
        'readiness timeout over REDIS_TIMEOUT_MS',
      );
      assert.ok(readiness.period * readiness.failures <= 10, 'a pod shutting down leaves the Service within 10 s');
      // Start to the first 200 is under a second (BENCHMARKS.md); the probe looks every second, for 10 s at least.
      assert.ok(startup.period <= 1 && startup.period * startup.failures >= 10, 'startup: found at once, given 10 s');
      // A liveness probe that gives up on a busy event loop restarts a pod that was serving.
      assert.ok(liveness.timeout >= 2 && liveness.period * liveness.failures >= 30, 'liveness: 30 s before a restart');
    }
  });

  it('gives the pod longer to stop than its preStop hook, SHUTDOWN_TIMEOUT_MS and the last log lines take', () => {
    for (const overlay of OVERLAYS) {
      const c = container(overlay);
      const grace = service(overlay).spec.template.spec.terminationGracePeriodSeconds ?? 30;
      const { config } = podConfig(overlay);
      const preStop = preStopSeconds(c);
      assert.ok(preStop >= 5, 'preStop waits for the endpoint to be removed everywhere');
      // Every exit waits up to a second for the log lines still buffered (docs/operations.md).
      const needed = preStop + config.shutdownTimeoutMs / 1000 + 1;
      assert.ok(grace > needed, `${overlay}: terminationGracePeriodSeconds ${grace} > ${needed}`);
    }
  });

  it('requests and limits CPU and memory, and caps the heap well within the memory limit', () => {
    for (const overlay of OVERLAYS) {
      const { resources } = container(overlay);
      const { env } = podConfig(overlay);
      for (const kind of ['requests', 'limits'] as const) {
        for (const resource of ['cpu', 'memory']) assert.ok(resources?.[kind]?.[resource], `${kind}.${resource}`);
      }
      const memory = {
        request: bytes(resources?.requests?.memory ?? ''),
        limit: bytes(resources?.limits?.memory ?? ''),
      };
      assert.ok(memory.request <= memory.limit);
      assert.ok(cores(resources?.requests?.cpu ?? '') <= cores(resources?.limits?.cpu ?? ''));
      const heap = /--max-old-space-size=(\d+)/.exec(env.NODE_OPTIONS ?? '')?.[1];
      assert.ok(heap !== undefined, 'NODE_OPTIONS caps the old generation');
      assert.ok(Number(heap) * 2 ** 20 <= memory.limit / 2, 'the heap leaves half the limit to Node itself');
    }
  });

  it('runs every container unprivileged: non-root, read-only root, no escalation, no capability, seccomp', () => {
    for (const overlay of OVERLAYS) {
      for (const deployment of rendered[overlay].filter((o): o is Deployment => o.kind === 'Deployment')) {
        const pod = deployment.spec.template.spec;
        const what = `${overlay}: ${deployment.metadata.name}`;
        assert.equal(pod.automountServiceAccountToken, false, `${what}: no API token`);
        assert.equal(pod.enableServiceLinks, false, `${what}: no service link variables`);
        for (const c of pod.containers) {
          const context = { ...pod.securityContext, ...c.securityContext };
          assert.equal(context.runAsNonRoot, true, what);
          assert.ok((context.runAsUser ?? 0) > 0, `${what}: runAsUser`);
          assert.equal(context.allowPrivilegeEscalation, false, what);
          assert.notEqual(context.privileged, true, what);
          assert.equal(context.readOnlyRootFilesystem, true, what);
          assert.deepEqual(c.securityContext?.capabilities?.drop, ['ALL'], what);
          assert.equal(c.securityContext?.capabilities?.add, undefined, what);
          assert.equal(context.seccompProfile?.type, 'RuntimeDefault', what);
        }
      }
    }
  });

  it("gives the service a small /tmp in memory under its read-only root, for Node's compile cache", () => {
    for (const overlay of OVERLAYS) {
      const pod = service(overlay).spec.template.spec;
      const mount = container(overlay).volumeMounts?.find((m) => m.mountPath === '/tmp');
      assert.ok(mount, `${overlay}: a volume at /tmp`);
      assert.notEqual(mount.readOnly, true);
      const volume = pod.volumes?.find((v) => v.name === mount.name);
      assert.equal(volume?.emptyDir?.medium, 'Memory', `${overlay}: an emptyDir in memory`);
      const limit = bytes(volume?.emptyDir?.sizeLimit ?? '');
      assert.ok(limit > 0 && limit <= 32 * 2 ** 20, `${overlay}: at most 32 MiB of the memory limit`);
    }
  });

  it('spreads the replicas across nodes', () => {
    for (const overlay of OVERLAYS) {
      const { template } = service(overlay).spec;
      const byNode = template.spec.topologySpreadConstraints?.find((c) => c.topologyKey === 'kubernetes.io/hostname');
      assert.ok(byNode, overlay);
      assert.equal(byNode.maxSkew, 1);
      assert.ok(matches(byNode.labelSelector?.matchLabels, template.metadata.labels), 'it counts these pods');
    }
  });

  it('serves through a Service, kept available by a PodDisruptionBudget and scaled by CPU from three pods', () => {
    for (const overlay of OVERLAYS) {
      const objects = rendered[overlay];
      const labels = service(overlay).spec.template.metadata.labels;
      const svc = find(objects, 'Service', SERVICE) as KubeObject & {
        spec: { selector: Record<string, string>; ports: { targetPort: string | number }[] };
      };
      assert.ok(matches(svc.spec.selector, labels));
      for (const { targetPort } of svc.spec.ports)
        assert.ok(container(overlay).ports?.some((p) => p.name === targetPort));
      const pdb = find(objects, 'PodDisruptionBudget', SERVICE) as KubeObject & {
        spec: { maxUnavailable?: number; minAvailable?: number; selector: { matchLabels: Record<string, string> } };
      };
      assert.ok(matches(pdb.spec.selector.matchLabels, labels));
      assert.equal(pdb.spec.maxUnavailable, 1, 'a drain takes one pod at a time, and is never blocked');
      const hpa = find(objects, 'HorizontalPodAutoscaler', SERVICE) as KubeObject & {
        spec: {
          scaleTargetRef: { kind: string; name: string };
          minReplicas: number;
          maxReplicas: number;
          metrics: { resource?: { name: string } }[];
        };
      };
      assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: SERVICE });
      assert.equal(hpa.spec.minReplicas, 3, 'three pods at least, as compose runs three instances');
      assert.ok(hpa.spec.maxReplicas > hpa.spec.minReplicas);
      assert.ok(
        hpa.spec.metrics.some((m) => m.resource?.name === 'cpu'),
        'CPU, which the pods request',
      );
    }
  });

  it('gives the service settings it accepts: one Redis, its password from a mounted file, one CURSOR_SECRET from a Secret', () => {
    for (const overlay of OVERLAYS) {
      const c = container(overlay);
      const { env, config } = podConfig(overlay);
      const topologies = [config.redisUrl, config.redisSentinels, config.redisClusterNodes].filter((t) => t !== null);
      assert.equal(topologies.length, 1, `${overlay}: one Redis`);
      assert.ok(config.redisPasswordFile?.endsWith(env.REDIS_PASSWORD_FILE ?? '-'), 'REDIS_PASSWORD_FILE');
      const mounted = mountedFiles(rendered[overlay], service(overlay).spec.template.spec, c);
      assert.ok(
        mounted.some((f) => f.path === env.REDIS_PASSWORD_FILE && f.mode === 0o440),
        'the password, mounted 0440',
      );
      const cursor = c.env?.find((e) => e.name === 'CURSOR_SECRET')?.valueFrom?.secretKeyRef;
      assert.ok(cursor, 'CURSOR_SECRET comes from a Secret, the same for every pod');
      assert.ok(config.cursorSecret.length >= 32);
      assert.equal(
        service(overlay).spec.template.spec.securityContext?.fsGroup,
        1000,
        'the files are the group of node',
      );
      assert.ok(config.keepAliveTimeoutMs > 60_000, "idle connections outlive the balancer's 60 s");
    }
  });

  it('production: TLS files mounted from a Secret, behind a Gateway, whose X-Forwarded-For alone is believed', () => {
    const objects = rendered.production;
    const { config } = podConfig('production');
    assert.ok(config.redisSentinels !== null && config.redisSentinelName !== null, 'Sentinel');
    assert.equal(config.redisTls, true);
    for (const file of [config.redisTlsCaFile, config.redisTlsCertFile, config.redisTlsKeyFile]) {
      assert.match(String(file), /\/run\/secrets\/redis-tls\/(ca|tls)\.(crt|key)$/);
    }
    assert.equal(config.trustProxy, 1, "one proxy, the Gateway's");
    const policy = find(objects, 'NetworkPolicy', SERVICE) as KubeObject & {
      spec: {
        podSelector: { matchLabels: Record<string, string> };
        policyTypes: string[];
        ingress: { from: unknown[] }[];
      };
    };
    assert.ok(matches(policy.spec.podSelector.matchLabels, service('production').spec.template.metadata.labels));
    assert.deepEqual(policy.spec.policyTypes, ['Ingress'], 'connections limited to those the policy lets in');
    assert.equal(objects.filter((o) => o.kind === 'Ingress').length, 0, 'the edge is the HTTPRoute');
    assert.match(container('production').image, /:[\w][\w.-]*$/, 'a versioned image');
    assert.doesNotMatch(container('production').image, /:latest$/);
  });

  it("production: the HTTPRoute routes the API, its page and its document alone, within the service's timeouts", async () => {
    const objects = rendered.production;
    const route = find(objects, 'HTTPRoute', SERVICE) as KubeObject & {
      spec: {
        parentRefs: { name: string }[];
        rules: {
          matches: { path: { type: string; value: string } }[];
          backendRefs: { name: string; port: number }[];
          timeouts?: { request?: string };
        }[];
      };
    };
    assert.equal(route.apiVersion, GATEWAY_API);
    assert.deepEqual(await schemaErrors(route), []);
    assert.ok(route.spec.parentRefs.length > 0, 'attached to a Gateway');
    const { config } = podConfig('production');
    for (const rule of route.spec.rules) {
      for (const backend of rule.backendRefs) {
        const svc = find(objects, 'Service', backend.name) as KubeObject & { spec: { ports: { port: number }[] } };
        assert.ok(
          svc.spec.ports.some((p) => p.port === backend.port),
          'the HTTPRoute names a port the Service has',
        );
      }
      const seconds = Number(/^(\d+)s$/.exec(rule.timeouts?.request ?? '')?.[1]);
      if (rule.matches.every(({ path }) => STREAM_PATHS.has(path.value))) {
        assert.equal(rule.timeouts?.request, '0s', 'a stream lasts as long as its client asks');
      } else {
        assert.ok(seconds * 1000 > config.requestTimeoutMs, "a slow client ends in the service's own 408");
      }
    }
    const paths = route.spec.rules.flatMap((rule) => rule.matches.map(({ path }) => [path.type, path.value]));
    assert.deepEqual(paths, EDGE_PATHS, 'no catch-all, no /metrics, /healthz or /readyz');
  });

  it('the Ingress component, for clusters without Gateway API: the same paths alone, its controller let in', async () => {
    const objects = withComponent('ingress', ['http-route.yaml']);
    const ingress = find(objects, 'Ingress', SERVICE) as KubeObject & {
      spec: {
        rules: {
          http: {
            paths: { path: string; pathType: string; backend: { service: { name: string; port: { name: string } } } }[];
          };
        }[];
      };
    };
    assert.deepEqual(await schemaErrors(ingress), []);
    const paths = ingress.spec.rules.flatMap((rule) => rule.http.paths);
    assert.deepEqual(
      paths.map(({ pathType, path }) => [pathType === 'Prefix' ? 'PathPrefix' : pathType, path]),
      // The streams' timeouts are each controller's annotations: no paths of their own here.
      EDGE_PATHS.filter(([, path]) => !STREAM_PATHS.has(path as string)),
    );
    for (const { backend } of paths) {
      const svc = find(objects, 'Service', backend.service.name) as KubeObject & {
        spec: { ports: { name: string }[] };
      };
      assert.ok(
        svc.spec.ports.some((p) => p.name === backend.service.port.name),
        'the Ingress names a port the Service has',
      );
    }
    assert.equal(objects.filter((o) => o.kind === 'HTTPRoute').length, 0);
    const policies = objects.filter((o) => o.kind === 'NetworkPolicy');
    assert.equal(policies.length, 2, "the overlay's, and the one that lets the controller in");
    for (const policy of policies) assert.deepEqual(await schemaErrors(policy), []);
  });

  it('production: the Cluster settings shown in settings.env are ones the service accepts', () => {
    const settings = join(tree.dir, 'overlays', 'production', 'settings.env');
    const text = readFileSync(settings, 'utf8');
    const cluster = text
      .replace(/^REDIS_SENTINEL_NAME=.*\n/m, '')
      .replace(/^REDIS_SENTINELS=.*\n/m, '')
      .replace(/^# (REDIS_CLUSTER_NODES=)/m, '$1');
    assert.notEqual(cluster, text);
    writeFileSync(settings, cluster);
    try {
      const { config } = podConfig('production', render(join(tree.dir, 'overlays', 'production')));
      assert.ok(config.redisClusterNodes !== null && config.redisClusterNodes.length === 3);
      assert.equal(config.redisSentinels, null);
    } finally {
      writeFileSync(settings, text);
    }
  });

  it('is scraped for /metrics: the pods annotated, or a PodMonitor from a component for the Prometheus Operator', async () => {
    for (const overlay of OVERLAYS) {
      const annotations = service(overlay).spec.template.metadata.annotations ?? {};
      const { config } = podConfig(overlay);
      assert.ok(config.metricsEnabled);
      assert.deepEqual(
        [annotations['prometheus.io/scrape'], annotations['prometheus.io/port'], annotations['prometheus.io/path']],
        ['true', String(config.port), '/metrics'],
      );
    }
    {
      const objects = withComponent('podmonitor');
      const monitor = find(objects, 'PodMonitor', SERVICE) as KubeObject & {
        spec: {
          selector: { matchLabels: Record<string, string> };
          podMetricsEndpoints: { port: string; path: string }[];
        };
      };
      assert.deepEqual(await schemaErrors(monitor), []);
      assert.ok(matches(monitor.spec.selector.matchLabels, service('production').spec.template.metadata.labels));
      const [endpoint] = monitor.spec.podMetricsEndpoints;
      assert.ok(container('production').ports?.some((p) => p.name === endpoint?.port));
      assert.equal(endpoint?.path, '/metrics');
    }
  });

  it("the podmonitor component's rules and dashboard: the rules file as a PrometheusRule, the dashboard as a ConfigMap Grafana's sidecar loads", async () => {
    const objects = withComponent('podmonitor');
    const rule = find(objects, 'PrometheusRule', SERVICE) as KubeObject & { spec: { groups: unknown } };
    assert.deepEqual(await schemaErrors(rule), []);
    const rulesFile = parse(readFileSync(join(ROOT, RULES_FILE), 'utf8')) as { groups: unknown };
    assert.deepEqual(rule.spec.groups, rulesFile.groups);
    const dashboard = find(objects, 'ConfigMap', `${SERVICE}-dashboard`) as KubeObject & {
      data: Record<string, string>;
    };
    assert.deepEqual(await schemaErrors(dashboard), []);
    assert.equal(dashboard.metadata.labels?.grafana_dashboard, '1');
    assert.deepEqual(
      Object.values(dashboard.data).map((text) => JSON.parse(text)),
      [JSON.parse(readFileSync(join(ROOT, DASHBOARD_FILE), 'utf8'))],
    );
  });

  it('refuses to render production without its secret files, rather than with made-up ones', () => {
    const file = join(tree.dir, 'overlays', 'production', 'secrets', 'cursor-secret');
    const secret = readFileSync(file);
    rmSync(file);
    try {
      assert.throws(() => render(join(tree.dir, 'overlays', 'production')), /secrets\/cursor-secret/);
    } finally {
      writeFileSync(file, secret);
    }
  });
});
