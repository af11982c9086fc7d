import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import type { Report } from '../../packages/conformance/src/index.js';
import { MixedLoad, statusOf } from '../cluster/load.js';
import { tallyAccessLog, upstreamErrors } from '../cluster/nginx.js';
import { assertOwnAnswers } from '../cluster/own-answers.js';
import { freePort } from '../ports.js';
import { connectTo, ResponseReader } from '../raw-http.js';
import { ROOT } from '../server-process.js';
import { podman, podmanEnv, run, runAsync } from './podman.js';
import { ensureStandIns, pruneStaleStandIns } from './standins.js';

/**
 * The Dockerfile and deploy/compose.yaml as users run them, under podman, from local stand-ins
 * of the base images (./standins.ts). The image: built unchanged, unprivileged, healthy, the
 * conformance kit, a graceful stop with a request in flight. The stack: up, the conformance kit
 * through nginx, nginx's own answers, a paced load while each instance and then Redis restart,
 * down. It prints its figures; CURSOR_SECRET, random, is never printed.
 */

const TOOLS = ['podman', 'podman-compose', 'debootstrap', 'runc'];
const missing = TOOLS.filter(
  (tool) => spawnSync('sh', ['-c', `command -v ${tool} || test -x /usr/sbin/${tool}`]).status !== 0,
);
const SKIP_REASON =
  (missing.length > 0 && `the container test needs ${missing.join(', ')}`) ||
  (process.getuid?.() !== 0 && 'the container test runs podman and chroot as root');
if (SKIP_REASON) process.stdout.write(`SKIPPED: ${SKIP_REASON}\n`);

/**
 * Whether podman's networks resolve their containers' names, as a network made now says: the
 * compose file's instances find Redis, and nginx the instances, by service name. Without the CNI
 * backend's dnsname plugin (or netavark's aardvark-dns) they do not.
 */
function networkDns(): boolean {
  const probe = `greeting-service-dns-probe-${process.pid}`;
  if (podman(['network', 'create', probe]).status !== 0) return false;
  const enabled = podman(['network', 'inspect', '--format', '{{.DNSEnabled}}', probe]).stdout.trim() === 'true';
  podman(['network', 'rm', probe]);
  return enabled;
}
const STACK_SKIP_REASON =
  !SKIP_REASON &&
  !networkDns() &&
  "the compose stack's service names need podman's network DNS (Debian: golang-github-containernetworking-plugin-dnsname)";
if (STACK_SKIP_REASON) process.stdout.write(`SKIPPED: ${STACK_SKIP_REASON}\n`);

const IMAGE = 'greeting-service';
const PACKAGE = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
/** The build arguments of the image's identity, as docs/deployment.md passes them; the commit once the suite runs. */
const IDENTITY = {
  VERSION: PACKAGE.version,
  REVISION: '',
  CREATED: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
  SOURCE: 'https://example.invalid/greeting-service',
};
const CONTAINER = 'greeting-service-test';
const PROJECT = 'greeting-service-test';
const COMPOSE_FILE = join(ROOT, 'deploy', 'compose.yaml');
/** What deploy/compose.yaml publishes: nginx's port. */
const BALANCER_PORT = 8080;
const INSTANCES = [1, 2, 3].map((n) => `${PROJECT}_instance-${n}_1`);
const SECRET = randomBytes(32).toString('base64');
/** The slowest answer allowed, but for the store's 503s while Redis restarts (REDIS_TIMEOUT_MS, 500 ms, and a margin). */
const SLOW_MS = 1000;
const OUTAGE_SLOW_MS = 2000;
/** The load stays under the stack's default rate limit: 1000 requests to /api a minute, nginx being its one client. */
const LOAD = { clients: 2, paceMs: 250, maxRequests: 2000 };

const seconds = (since: number) => Math.round((performance.now() - since) / 100) / 10;

async function until(what: string, ms: number, ready: () => Promise<boolean> | boolean): Promise<number> {
  const started = performance.now();
  while (!(await ready())) {
    if (performance.now() - started > ms) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(100);
  }
  return performance.now() - started;
}

/** The instance's own /readyz, asked from inside its container (the instances publish no port). */
async function instanceReady(name: string): Promise<boolean> {
  const probe =
    "fetch('http://127.0.0.1:8080/readyz').then((r) => process.exit(r.status === 200 ? 0 : 1), () => process.exit(1))";
  return (await runAsync('podman', ['exec', name, 'node', '-e', probe])).status === 0;
}

const allReady = async () => (await Promise.all(INSTANCES.map(instanceReady))).every(Boolean);

/** podman-compose on the project, with the secret in its environment, never in what is printed. */
async function compose(args: string[]): Promise<void> {
  const result = await runAsync('podman-compose', ['-p', PROJECT, '-f', COMPOSE_FILE, ...args], {
    env: podmanEnv({ CURSOR_SECRET: SECRET }),
    secret: SECRET,
  });
  assert.equal(result.status, 0, `podman-compose ${args.join(' ')}: ${result.stderr.slice(-2000)}`);
}

/** The conformance kit against a base URL: its counts, and what failed. */
async function conformance(
  origin: string,
  flags: string[],
): Promise<{ counts: Record<string, number>; failures: string[] }> {
  const started = performance.now();
  const cli = [join(ROOT, 'dist', 'server.js'), 'conformance', origin, '--json', ...flags];
  const { stdout, stderr } = await runAsync(process.execPath, cli);
  if (stdout === '') throw new Error(`the conformance kit printed no report: ${stderr}`);
  const report = JSON.parse(stdout) as Report;
  const failures = report.results
    .filter((result) => result.outcome === 'fail')
    .map((result) => `${result.id}: expected ${result.expected}, actual ${result.actual}`);
  const counts = { passed: report.passed, failed: report.failed, skipped: report.skipped, s: seconds(started) };
  return { counts, failures };
}

/** Containers, networks and volumes of the compose project, by name. */
function leftovers(): string[] {
  const names = (args: string[]) =>
    run('podman', args)
      .split('\n')
      .filter((name) => name.startsWith(`${PROJECT}_`));
  return [
    ...names(['ps', '-a', '--format', '{{.Names}}']),
    ...names(['network', 'ls', '--format', '{{.Name}}']),
    ...names(['volume', 'ls', '--format', '{{.Name}}']),
  ];
}

/** What an earlier run that was cut short may have left: this test's container and its compose project. */
function cleanUp(): void {
  podman(['rm', '-f', '-t', '0', CONTAINER]);
  spawnSync('podman-compose', ['-p', PROJECT, '-f', COMPOSE_FILE, 'down', '-v', '-t', '0'], {
    env: podmanEnv({ CURSOR_SECRET: SECRET }),
  });
  podman(['network', 'rm', `${PROJECT}_default`]);
}

describe('the image and the compose stack, under podman', { skip: SKIP_REASON }, () => {
  const figures: Record<string, unknown> = {};
  const suiteStarted = performance.now();
  let work: string;
  let port: number;
  let origin: string;
  const balancer = `http://127.0.0.1:${BALANCER_PORT}`;

  before(async () => {
    if (SKIP_REASON) return;
    work = mkdtempSync('/var/tmp/greeting-service-container-');
    cleanUp();
    figures.stand_ins = { ...ensureStandIns(work), removed: pruneStaleStandIns() };
    IDENTITY.REVISION = run('git', ['rev-parse', 'HEAD'], { cwd: ROOT }).trim();
    const building = performance.now();
    const buildArgs = Object.entries(IDENTITY).flatMap(([name, value]) => ['--build-arg', `${name}=${value}`]);
    run('podman', ['build', '--format', 'docker', '-t', IMAGE, ...buildArgs, '-f', join(ROOT, 'Dockerfile'), ROOT]);
    figures.build_s = seconds(building);
    figures.image_mb = Math.round(Number(run('podman', ['image', 'inspect', '--format', '{{.Size}}', IMAGE])) / 1e6);
    port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    // The secret reaches the container from podman's environment (`-e NAME` alone), never a command line.
    // A window of 10 s: the stop test, after the kit has used up the limit, waits for the next one.
    const publish = `127.0.0.1:${port}:8080`;
    const env = ['-e', 'CURSOR_SECRET', '-e', 'RATE_LIMIT_WINDOW_MS=10000'];
    run('podman', ['run', '-d', '--name', CONTAINER, '-p', publish, ...env, IMAGE], {
      env: podmanEnv({ CURSOR_SECRET: SECRET }),
    });
    figures.container_ready_ms = Math.round(
      await until('the container answering /readyz', 20_000, async () => (await statusOf(`${origin}/readyz`)) === 200),
    );
  });

  after(() => {
    if (work === undefined) return;
    cleanUp();
    rmSync(work, { recursive: true, force: true });
    figures.suite_s = seconds(suiteStarted);
    console.log(`container: ${JSON.stringify(figures, null, 1)}`);
  });

  it('runs the image as the unprivileged user node, healthy, with the conformance command', () => {
    assert.equal(run('podman', ['image', 'inspect', '--format', '{{.Config.User}}', IMAGE]).trim(), 'node');
    // PID 1, the service, and its real and effective user ids.
    const status = run('podman', ['exec', CONTAINER, 'cat', '/proc/1/status']);
    assert.match(status, /^Uid:\s+1000\s+1000\s/m);
    const health = podman(['healthcheck', 'run', CONTAINER]);
    assert.equal(health.status, 0, `healthcheck: ${health.stdout}`);
    // The service's conformance command runs the kit the image ships, here against the service itself.
    const kit = podman([
      'exec',
      CONTAINER,
      'node',
      'dist/server.js',
      'conformance',
      'http://127.0.0.1:8080',
      '--only',
      'hello',
    ]);
    assert.equal(kit.status, 0, `conformance: ${kit.stdout}${kit.stderr}`);
    assert.match(kit.stdout, /^\d+ passed, 0 failed/m);
  });

  it('labels the image with the OCI annotations, and GET /version says the same build', async () => {
    const labels = JSON.parse(run('podman', ['image', 'inspect', '--format', '{{json .Config.Labels}}', IMAGE]));
    const oci = Object.fromEntries(Object.entries(labels).filter(([name]) => name.startsWith('org.opencontainers.')));
    assert.deepEqual(oci, {
      'org.opencontainers.image.title': PACKAGE.name,
      'org.opencontainers.image.description': PACKAGE.description,
      'org.opencontainers.image.licenses': PACKAGE.license,
      'org.opencontainers.image.version': IDENTITY.VERSION,
      'org.opencontainers.image.revision': IDENTITY.REVISION,
      'org.opencontainers.image.created': IDENTITY.CREATED,
      'org.opencontainers.image.source': IDENTITY.SOURCE,
    });
    const version = await fetch(`${origin}/version`);
    assert.deepEqual(await version.json(), {
      version: IDENTITY.VERSION,
      commit: IDENTITY.REVISION,
      build_time: IDENTITY.CREATED.replace(/Z$/, '.000Z'),
      runtime: `node ${run('podman', ['exec', CONTAINER, 'node', '--version']).trim()}`,
    });
  });

  it('brings the stack up, which passes the conformance kit through nginx; nginx answers as the service', {
    timeout: 240_000,
    skip: STACK_SKIP_REASON,
  }, async () => {
    assert.notEqual(await statusOf(`${balancer}/healthz`), 200, `something already listens on ${BALANCER_PORT}`);
    const upStarted = performance.now();
    await compose(['up', '-d']);
    // podman-compose's exit status says nothing of the containers: their answers do.
    await until('every instance ready', 60_000, allReady);
    await until('nginx answering', 10_000, async () => (await statusOf(`${balancer}/readyz`)) === 200);
    figures.stack_up_s = seconds(upStarted);

    const report = await conformance(balancer, ['--write']);
    figures.stack_conformance = report.counts;
    assert.deepEqual(report.failures, [], 'the conformance kit through nginx');
    figures.nginx_own_answers = await assertOwnAnswers({ port: BALANCER_PORT }, { port });
  });

  it('serves a paced load while each instance restarts in turn, then Redis', {
    timeout: 240_000,
    skip: STACK_SKIP_REASON,
  }, async () => {
    const pool = new Pool(balancer, { connections: LOAD.clients + 1, pipelining: 1 });
    const load = new MixedLoad(pool, {
      ...LOAD,
      slowMs: SLOW_MS,
      outageSlowMs: OUTAGE_SLOW_MS,
      outages: ['Redis restart'],
    });
    const restartedAt: Record<string, string> = {};
    try {
      await load.start();
      await sleep(3000);
      load.phase = 'rolling restart';
      const restarts: number[] = [];
      for (const [i, name] of INSTANCES.entries()) {
        const started = performance.now();
        // podman-compose passes no stop_grace_period on: -t says it.
        await compose(['restart', '-t', '15', `instance-${i + 1}`]);
        restartedAt[name] = new Date().toISOString();
        await until(`${name} ready after its restart`, 30_000, () => instanceReady(name));
        restarts.push(Math.round(performance.now() - started));
        // nginx leaves an instance that failed it alone for 2 s (fail_timeout).
        await sleep(3000);
      }
      figures.instance_restart_ms = restarts;

      load.phase = 'Redis restart';
      const redisStarted = performance.now();
      await compose(['restart', '-t', '10', 'redis']);
      await until('every instance ready again after Redis restarted', 30_000, allReady);
      figures.redis_restart_until_ready_ms = Math.round(performance.now() - redisStarted);
      load.phase = 'Redis back';
      await sleep(3000);
      await load.stop();
    } finally {
      await load.stop();
      await pool.close();
    }
    // The access log is nginx's standard output, the error log its standard error.
    const logs = podman(['logs', `${PROJECT}_nginx_1`]);
    const nginxLog = `${logs.stdout}${logs.stderr}`;
    Object.assign(figures, {
      load: load.figures(['steady', 'rolling restart', 'Redis restart', 'Redis back']),
      nginx: { ...tallyAccessLog(nginxLog), upstream_errors: upstreamErrors(nginxLog) },
    });

    assert.deepEqual(load.idempotentFailures(), [], 'no idempotent request fails, none takes over 1 s');
    assert.equal(load.writes.lost, 0, 'no acknowledged write lost (Redis keeps an append-only file)');
    assert.equal(load.writes.appliedTwice, 0, 'no write applied twice');
    assert.equal(load.writes.unexpected412, 0, 'no write refused for a version it did not move');
    // Each instance served requests after its restart: nginx found its new address.
    const served = INSTANCES.map((name) => {
      const logs = run('podman', ['logs', '--since', restartedAt[name] as string, name]);
      return logs.split('\n').filter((line) => line.includes('"msg":"request completed"')).length;
    });
    (figures.load as Record<string, unknown>).served_after_restart = served;
    for (const [i, count] of served.entries()) assert.ok(count > 0, `${INSTANCES[i]} served after its restart`);
  });

  it('passes the conformance kit with --write --rate-limit against the image', { timeout: 240_000 }, async () => {
    const report = await conformance(origin, ['--write', '--rate-limit']);
    figures.container_conformance = report.counts;
    assert.deepEqual(report.failures, [], 'the conformance kit against the container');
  });

  it('stops with exit 0 within 2 s, answering the request in flight', async () => {
    await until('a rate-limit window with room', 15_000, async () => (await statusOf(`${origin}/api/hello`)) === 200);
    const socket = await connectTo(port);
    const reader = new ResponseReader(socket);
    const body = JSON.stringify({ note: 'in flight while the container stops' });
    const head = `POST /api/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    socket.write(`${head}${body.slice(0, 10)}`);
    await sleep(200);
    const started = performance.now();
    const signalled = Date.now();
    const stopped = runAsync('podman', ['stop', '-t', '15', CONTAINER]);
    // The signal reaches the service while the request waits for the rest of its body.
    await sleep(500);
    socket.write(body.slice(10));
    const res = await reader.next();
    socket.destroy();
    assert.equal((await stopped).status, 0);
    figures.podman_stop_ms = Math.round(performance.now() - started);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json().received, JSON.parse(body));
    const format = '{{.State.ExitCode}} {{.State.FinishedAt.Format "2006-01-02T15:04:05.000Z07:00"}}';
    const [exitCode, finishedAt] = run('podman', ['inspect', '--format', format, CONTAINER]).trim().split(' ');
    assert.equal(exitCode, '0');
    // The service began shutting down before it answered: the request was in flight.
    const log = run('podman', ['logs', CONTAINER])
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { msg?: string; signal?: string; url?: string; time: number });
    const shutdown = log.find((line) => line.msg === 'shutting down' && line.signal === 'SIGTERM');
    const answered = log.findLast((line) => line.msg === 'request completed' && line.url === '/api/echo');
    assert.ok(shutdown && answered && shutdown.time <= answered.time, 'SIGTERM came while the request was in flight');
    // From `podman stop` to the container's exit, as podman recorded it.
    const ms = Date.parse(finishedAt as string) - signalled;
    figures.exit_after_stop_ms = ms;
    assert.ok(ms < 2000, `exited ${ms} ms after podman stop`);
  });

  it('takes the stack down, leaving no container, network or volume', { skip: STACK_SKIP_REASON }, async () => {
    await compose(['down', '-v', '-t', '15']);
    // podman-compose 1.0.3 leaves the project's network behind; docker compose removes it.
    podman(['network', 'rm', `${PROJECT}_default`]);
    assert.deepEqual(leftovers(), []);
  });
});
