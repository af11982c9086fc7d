import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Report } from '../../packages/conformance/src/index.js';
import { podman, run, runAsync } from '../container/podman.js';
import { ensureStandIns } from '../container/standins.js';
import { ROOT } from '../server-process.js';
import type { KubeObject } from './api-schema.js';
import {
  bytes,
  type Container,
  cores,
  type Deployment,
  find,
  KUBECTL_SKIP_REASON,
  KUBERNETES_DIR,
  preStopSeconds,
  render,
} from './manifests.js';
import { forPodman, replicasOf } from './podman-play.js';

/**
 * The dev overlay run by `podman kube play` on the image CI builds (from the stand-in bases of the
 * container suite): three replicas of the service and their Redis come up, every probe's endpoint
 * answers as the probe expects (Redis paused included), the security context holds, the replicas
 * share Redis and the cursor secret, the conformance kit passes with --write, and each pod stops
 * as the kubelet stops one, within its grace period, exit 0. podman's limits are made up for in
 * podman-play.ts; what podman 4.3 does not do at all is said where it matters. Prints its figures.
 */

const TOOLS = ['podman', 'debootstrap', 'runc', 'catatonit'];
const missing = TOOLS.filter(
  (tool) => spawnSync('sh', ['-c', `command -v ${tool} || test -x /usr/sbin/${tool}`]).status !== 0,
);
const SKIP_REASON =
  KUBECTL_SKIP_REASON ||
  (missing.length > 0 && `the Kubernetes suite plays the dev overlay under podman and needs ${missing.join(', ')}`) ||
  (process.getuid?.() !== 0 && 'the Kubernetes suite runs podman and chroot as root');
if (SKIP_REASON && !KUBECTL_SKIP_REASON) process.stdout.write(`SKIPPED: ${SKIP_REASON}\n`);

const SERVICE = 'greeting-service';
const REDIS = 'greeting-service-redis';

const seconds = (since: number) => Math.round((performance.now() - since) / 100) / 10;

async function until(what: string, ms: number, ready: () => Promise<boolean>): Promise<number> {
  const started = performance.now();
  while (!(await ready())) {
    if (performance.now() - started > ms) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(100);
  }
  return Math.round(performance.now() - started);
}

/** podman kube play names a Deployment's pods `<name>-pod-<i>`, their containers `<pod>-<container>`. */
const podsOf = (objects: KubeObject[], deployment: Deployment) =>
  Array.from({ length: replicasOf(objects, deployment) }, (_, i) => `${deployment.metadata.name}-pod-${i}`);

interface Answer {
  status: number;
  etag: string | null;
  body: string;
  /** From the request to the whole answer, in the pod. */
  ms: number;
}

/** A request to the service from inside its pod, on the pod's loopback, as the kubelet's probes reach it. */
async function inPod(container: string, path: string, init: RequestInit = {}): Promise<Answer> {
  const script = `const t = performance.now();
fetch('http://127.0.0.1:8080' + ${JSON.stringify(path)}, ${JSON.stringify(init)}).then(async (r) => {
  const body = await r.text();
  console.log(JSON.stringify({ status: r.status, etag: r.headers.get('etag'), body, ms: performance.now() - t }));
}, (e) => console.log(JSON.stringify({ status: 0, etag: null, body: String(e.cause ?? e), ms: performance.now() - t })));`;
  const { status, stdout, stderr } = await runAsync('podman', ['exec', container, 'node', '-e', script]);
  if (status !== 0) throw new Error(`podman exec ${container} node: exit ${status}: ${stderr}`);
  return JSON.parse(stdout) as Answer;
}

/** A field of /proc/1/status (the service is PID 1) of a container. */
function procStatus(container: string): Record<string, string> {
  const text = run('podman', ['exec', container, 'cat', '/proc/1/status']);
  return Object.fromEntries(text.split('\n').map((line) => line.split(/:\s+/, 2) as [string, string]));
}

describe('the dev overlay under podman kube play', { skip: SKIP_REASON }, () => {
  const figures: Record<string, unknown> = {};
  const suiteStarted = performance.now();
  let work: string;
  let objects: KubeObject[];
  let service: Deployment;
  let main: Container;
  let pods: string[];
  let containers: string[];
  let redisContainer: string;
  const played: string[] = [];

  /** Whatever an earlier run cut short left: the pods of both Deployments. */
  function cleanUp(): void {
    for (const file of played) podman(['kube', 'down', file]);
    for (const pod of [...(pods ?? []), `${REDIS}-pod-0`]) podman(['pod', 'rm', '-f', '-t', '0', pod]);
  }

  /** Writes objects as a multi-document file (JSON, which YAML parsers read alike) and plays it. */
  function play(name: string, documents: KubeObject[]): void {
    const file = join(work, `${name}.yaml`);
    writeFileSync(file, documents.map((d) => JSON.stringify(d)).join('\n---\n'));
    played.push(file);
    run('podman', ['kube', 'play', file]);
  }

  before(async () => {
    if (SKIP_REASON) return;
    work = mkdtempSync('/var/tmp/greeting-service-kubernetes-');
    objects = render(join(KUBERNETES_DIR, 'overlays', 'dev'));
    service = find<Deployment>(objects, 'Deployment', SERVICE);
    main = service.spec.template.spec.containers.find((c) => c.name === SERVICE) as Container;
    pods = podsOf(objects, service);
    containers = pods.map((pod) => `${pod}-${SERVICE}`);
    redisContainer = `${REDIS}-pod-0-redis`;
    cleanUp();
    figures.stand_ins = ensureStandIns(work);
    const building = performance.now();
    // The image the overlay names, built from the Dockerfile as it is.
    run('podman', ['build', '--format', 'docker', '-t', main.image, '-f', join(ROOT, 'Dockerfile'), ROOT]);
    figures.build_s = seconds(building);
  });

  after(() => {
    if (work === undefined) return;
    cleanUp();
    rmSync(work, { recursive: true, force: true });
    figures.suite_s = seconds(suiteStarted);
    console.log(`kubernetes: ${JSON.stringify(figures, null, 1)}`);
  });

  it('plays Redis, then three replicas of the service, each ready at its readiness endpoint', async () => {
    const secrets = join(work, 'secrets');
    mkdirSync(secrets);
    const isRedis = (object: KubeObject) => object.metadata.name === REDIS;
    play('redis', forPodman(objects, isRedis, secrets, {}));
    const infra = run('podman', ['pod', 'inspect', '--format', '{{.InfraContainerID}}', `${REDIS}-pod-0`]).trim();
    const address = run('podman', [
      'inspect',
      '--format',
      '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}',
      infra,
    ]).trim();
    assert.match(address, /^\d+\.\d+\.\d+\.\d+$/, "the Redis pod's address");

    const started = performance.now();
    play(
      'service',
      forPodman(objects, (object) => !isRedis(object), secrets, { [REDIS]: address }),
    );
    const readiness = main.readinessProbe?.httpGet?.path as string;
    const ready = await Promise.all(
      containers.map((c) =>
        until(`${c} ready`, 30_000, async () => (await inPod(c, readiness).catch(() => null))?.status === 200),
      ),
    );
    figures.play_to_ready_ms = { all: Math.round(performance.now() - started), each_after_all_played: ready };
    // podman 4.3 makes one pod per replica.
    const running = run('podman', ['pod', 'ps', '--format', '{{.Name}} {{.Status}}']);
    for (const pod of pods) assert.match(running, new RegExp(`^${pod} Running$`, 'm'));
    // The memory request is sized for a pod that has served its first requests.
    const rss = containers.map((c) => Number.parseInt(procStatus(c).VmRSS ?? '', 10) * 1024);
    figures.rss_when_ready_mb = rss.map((b) => Math.round(b / 1e6));
    // How much of it is the JavaScript heap, the part NODE_OPTIONS caps: from prom-client's gauge.
    const metrics = (await inPod(containers[0] as string, '/metrics')).body;
    const heap = Number(/^nodejs_heap_size_total_bytes (\d+)/m.exec(metrics)?.[1]);
    figures.heap_when_ready_mb = Math.round(heap / 1e6);
    const request = bytes(main.resources?.requests?.memory ?? '');
    for (const b of rss) assert.ok(b < request, `RSS ${b} within the memory request ${request}`);
  });

  it('answers each probe 200, Redis paused included, while plain /readyz is 503 naming Redis', async () => {
    const { startupProbe, readinessProbe, livenessProbe } = main;
    const container = containers[0] as string;
    const ask = (probe: typeof startupProbe) => inPod(container, probe?.httpGet?.path as string);
    const healthy = await Promise.all([ask(startupProbe), ask(readinessProbe), ask(livenessProbe)]);
    assert.deepEqual(
      healthy.map((a) => a.status),
      [200, 200, 200],
    );
    const timeoutMs = (readinessProbe?.timeoutSeconds ?? 1) * 1000;
    // Paused, Redis holds its connections and answers nothing: the hardest case for a probe's timeout.
    run('podman', ['pause', redisContainer]);
    let outage: Answer[];
    try {
      outage = await Promise.all([ask(readinessProbe), ask(livenessProbe), inPod(container, '/readyz')]);
    } finally {
      run('podman', ['unpause', redisContainer]);
    }
    const [probe, alive, plain] = outage;
    // Every pod shares the one Redis: its outage must not empty the Service.
    assert.equal(probe?.status, 200, `the readiness probe leaves Redis out: ${probe?.body}`);
    assert.ok((probe?.ms ?? Infinity) < timeoutMs, `readiness answered in ${probe?.ms} ms, within its timeout`);
    assert.equal(alive?.status, 200, 'liveness does not look at Redis: no restart for its outage');
    assert.equal(plain?.status, 503, plain?.body);
    assert.match(String(plain?.body), /Not ready: Redis did not answer/);
    assert.ok((plain?.ms ?? Infinity) < timeoutMs, `/readyz answered in ${plain?.ms} ms, within the probe's timeout`);
    const backMs = await until(
      '/readyz 200 again once Redis answers',
      10_000,
      async () => (await inPod(container, '/readyz').catch(() => null))?.status === 200,
    );
    figures.probes = {
      readiness_probe_redis_paused_ms: Math.round(probe?.ms ?? 0),
      plain_readyz_503_ms: Math.round(plain?.ms ?? 0),
      readiness_timeout_ms: timeoutMs,
      ready_again_ms: backMs,
    };
  });

  it('runs unprivileged on a read-only root, within the limits of the manifest, writing nothing', () => {
    for (const container of [...containers, redisContainer]) {
      const status = procStatus(container);
      const context = container === redisContainer ? 999 : service.spec.template.spec.securityContext?.runAsUser;
      assert.match(status.Uid ?? '', new RegExp(`^${context}\\s+${context}\\s`), `${container}: uid`);
      assert.equal(status.CapEff, '0000000000000000', `${container}: no capability`);
      assert.equal(status.NoNewPrivs, '1', `${container}: no privilege escalation`);
      assert.equal(status.Seccomp, '2', `${container}: a seccomp filter`);
      assert.equal(run('podman', ['inspect', '--format', '{{.HostConfig.ReadonlyRootfs}}', container]).trim(), 'true');
    }
    const container = containers[0] as string;
    // Unlike `podman run --read-only`, kube play adds no tmpfs on /var/tmp and /run, as a cluster adds none;
    // /tmp is the pod's emptyDir.
    for (const dir of ['/app', '/var/tmp', '/run']) {
      const touch = podman(['exec', container, 'touch', `${dir}/written`]);
      assert.match(touch.stderr, /Read-only file system/, `${dir} is read-only`);
    }
    assert.equal(podman(['exec', container, 'touch', '/tmp/written']).status, 0, '/tmp is written to');
    const mounts = JSON.parse(run('podman', ['inspect', '--format', '{{json .Mounts}}', container])) as {
      Destination: string;
      RW: boolean;
    }[];
    assert.deepEqual(
      mounts.map((m) => [m.Destination, m.RW]).sort(),
      [
        ['/run/secrets/greeting-service', false],
        ['/tmp', true],
      ],
      'the Secret, read-only, and the emptyDir at /tmp',
    );
    const limits = run('podman', [
      'inspect',
      '--format',
      '{{.HostConfig.Memory}} {{.HostConfig.CpuQuota}} {{.HostConfig.CpuPeriod}}',
      container,
    ])
      .trim()
      .split(' ')
      .map(Number);
    assert.equal(limits[0], bytes(main.resources?.limits?.memory ?? ''), 'memory limit');
    assert.equal((limits[1] ?? 0) / (limits[2] ?? 1), cores(main.resources?.limits?.cpu ?? ''), 'CPU limit');
    const files = run('podman', ['exec', container, 'ls', '-ln', '/run/secrets/greeting-service/']);
    assert.match(files, /^-r--r----- 1 0 1000 .* redis-password$/m, 'the password file: 0440, group node');
  });

  it('shares one Redis and one CURSOR_SECRET: what one replica writes or signs, another reads', async () => {
    const [first, second] = containers as [string, string];
    const written = await inPod(first, '/api/profile', {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Ada Lovelace', email: null, bio: 'written through the first replica' }),
    });
    assert.equal(written.status, 200, written.body);
    const read = await inPod(second, '/api/profile');
    assert.equal(read.etag, written.etag, 'the same version through the other replica');
    assert.deepEqual(JSON.parse(read.body), JSON.parse(written.body));
    const page = await inPod(first, '/api/currencies?limit=2');
    const cursor = (JSON.parse(page.body) as { pagination: { next_cursor: string } }).pagination.next_cursor;
    const next = await inPod(second, `/api/currencies?limit=2&cursor=${encodeURIComponent(cursor)}`);
    assert.equal(next.status, 200, `a cursor signed by one replica is taken by another: ${next.body}`);
  });

  it('passes the conformance kit with --write, run inside a pod', { timeout: 240_000 }, async () => {
    const started = performance.now();
    const container = containers[1] as string;
    const kit = [
      'exec',
      container,
      'node',
      'dist/server.js',
      'conformance',
      'http://127.0.0.1:8080',
      '--write',
      '--json',
    ];
    const { stdout, stderr } = await runAsync('podman', kit);
    if (stdout === '') throw new Error(`the conformance kit printed no report: ${stderr}`);
    const report = JSON.parse(stdout) as Report;
    const failures = report.results
      .filter((result) => result.outcome === 'fail')
      .map((result) => `${result.id}: expected ${result.expected}, actual ${result.actual}`);
    figures.conformance = {
      passed: report.passed,
      failed: report.failed,
      skipped: report.skipped,
      s: seconds(started),
    };
    assert.deepEqual(failures, []);
    // Memory after the kit, against the manifest's request and limit.
    const limit = bytes(main.resources?.limits?.memory ?? '');
    const peak = Number.parseInt(procStatus(container).VmHWM ?? '', 10) * 1024;
    const heap = JSON.parse(
      run('podman', ['exec', container, 'node', '-p', 'JSON.stringify(require("v8").getHeapStatistics())']),
    ) as { heap_size_limit: number };
    figures.memory_mb = {
      peak_rss: Math.round(peak / 1e6),
      request: Math.round(bytes(main.resources?.requests?.memory ?? '') / 1e6),
      limit: Math.round(limit / 1e6),
      heap_limit: Math.round(heap.heap_size_limit / 1e6),
    };
    assert.ok(peak < limit, `peak RSS ${peak} within the limit`);
    // Without NODE_OPTIONS, Node 24 sizes it at 259 MiB under a 256Mi limit; with it, the old
    // generation's cap and the young generation's few MiB.
    const cap = Number(
      /--max-old-space-size=(\d+)/.exec(String(main.env?.find((e) => e.name === 'NODE_OPTIONS')?.value))?.[1],
    );
    assert.ok(
      heap.heap_size_limit <= (cap + 16) * 2 ** 20,
      `NODE_OPTIONS holds the heap to ${cap} MiB and the young generation`,
    );
  });

  it('stops as the kubelet stops a pod: preStop, then SIGTERM, exit 0 within the grace period', async () => {
    const grace = (service.spec.template.spec.terminationGracePeriodSeconds ?? 30) * 1000;
    const hook = main.lifecycle?.preStop?.exec?.command ?? [];
    const stops = await Promise.all(
      pods.map(async (pod, i) => {
        const container = containers[i] as string;
        const started = performance.now();
        // podman runs no preStop hook: run its command in the container, as the kubelet would.
        const preStop = await runAsync('podman', ['exec', container, ...hook]);
        assert.equal(preStop.status, 0, `preStop: ${preStop.stderr}`);
        const preStopMs = Math.round(performance.now() - started);
        // Then SIGTERM, and SIGKILL when the grace period is over: `podman pod stop`, since
        // `podman kube down` 4.3 kills at once, whatever the stop timeout (fixed in podman 5.1).
        const left = Math.ceil((grace - preStopMs) / 1000);
        const stopped = await runAsync('podman', ['pod', 'stop', '-t', String(left), pod]);
        assert.equal(stopped.status, 0, stopped.stderr);
        const totalMs = Math.round(performance.now() - started);
        const exit = run('podman', ['inspect', '--format', '{{.State.ExitCode}}', container]).trim();
        const log = run('podman', ['logs', container]);
        return { preStopMs, stopMs: totalMs - preStopMs, totalMs, exit, log };
      }),
    );
    figures.stop = stops.map(({ preStopMs, stopMs, exit }) => ({
      pre_stop_ms: preStopMs,
      sigterm_to_exit_ms: stopMs,
      exit,
    }));
    for (const { exit, totalMs, log } of stops) {
      assert.equal(exit, '0');
      assert.ok(totalMs < grace, `stopped after ${totalMs} ms, within ${grace} ms`);
      assert.ok(totalMs >= preStopSeconds(main) * 1000, 'the preStop hook ran its full sleep');
      assert.match(log, /"signal":"SIGTERM".*"msg":"shutting down"/, 'SIGTERM, not a kill');
    }
    const down = played.map((file) => runAsync('podman', ['kube', 'down', file]));
    for (const result of await Promise.all(down)) assert.equal(result.status, 0, result.stderr);
    const left = run('podman', ['pod', 'ps', '--format', '{{.Name}}']).split('\n');
    assert.deepEqual(
      left.filter((name) => [...pods, `${REDIS}-pod-0`].includes(name)),
      [],
    );
  });
});
