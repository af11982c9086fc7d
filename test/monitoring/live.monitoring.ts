import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { panelQueries } from '../../scripts/monitoring/dashboard.js';
import { type RecordingRule, rules } from '../../scripts/monitoring/rules.js';
import { RULES_FILE, rulesFile } from '../../scripts/monitoring/write.js';
import { freePort } from '../ports.js';
import { ROOT, type RunningServer, startServer } from '../server-process.js';
import { PROMETHEUS_SKIP_REASON, type Prometheus, type RuleState, startPrometheus } from './prometheus.js';

/**
 * The rules and the dashboard against the real thing: the built service, scraped every second by
 * real Prometheus servers while the test sends it traffic.
 *
 * Every instance answers /api requests and unary gRPC calls (the Connect protocol, JSON over
 * HTTP/1.1), which the SLIs count together, each once.
 *
 * - **The shipped file, as it stands**, in a Prometheus whose one scrape job (of a name of no
 *   meaning) holds three instances of the service (one injecting faults, one serving event
 *   streams besides the API) and another app's exporter, whose answers are 10% 500s and all slow,
 *   and whose gRPC calls all fail;
 *   and a second job, a deployment whose Redis cannot be reached, so that its profile answers
 *   503. The faults page as unexpected, the deployment without Redis pages its fast burn, the other
 *   app, the faults and the streams raise no SLO alert; then every instance is killed, and the
 *   outage is paged within 90 s and stays so.
 * - **The rules rendered with every window and `for` divided by 60** (an hour in a minute), and
 *   with injected faults spending the budget, since they are what is measured there: the SLI read
 *   back against the share of 5xx and failed calls the test saw with FAULT_ERROR_RATE=0.2, the fast
 *   burn firing, nothing firing without faults, the calls counted in gRPC's metrics and not in
 *   HTTP's, and every panel of the dashboard answered.
 */

const ERROR_RATE = 0.2;
const TIME_SCALE = 60;
/** Any name: the rules find the service by what it exports, not by its scrape job's name. */
const JOB = 'whatever-the-team-calls-it';
/** The deployment whose Redis cannot be reached. */
const BROKEN_JOB = 'without-redis';
const FAST_BURN = 'GreetingServiceAvailabilityFastBurn';

/** A unary call in the Connect protocol over HTTP/1.1 (JSON), as curl sends one: counted as a gRPC call. */
const connectCall = (method: string, message: object) => ({
  path: `/${method}`,
  init: {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'connect-protocol-version': '1' },
    body: JSON.stringify(message),
  },
  rpc: true,
});

/**
 * The codes (as the Connect protocol writes them) of a call the service failed: those the SLI
 * counts bad (GRPC_SERVER_FAULT_CODES).
 */
const FAILED_CALL = new Set(['unknown', 'internal', 'unavailable', 'deadline_exceeded', 'data_loss']);

/** /api requests of every kind, one outside it, and unary gRPC calls (the profile's needs the store). */
const REQUESTS: { path: string; init?: RequestInit; rpc?: boolean }[] = [
  { path: '/api/hello' },
  { path: '/api/hello/Ada' },
  { path: '/api/search?q=x' },
  { path: '/api/exchange?from=USD&to=EUR&amount=10' },
  { path: '/api/currencies' },
  { path: '/api/profile' },
  { path: '/api/echo', init: { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' } },
  { path: '/api/nope' },
  connectCall('helloworld.Greeter/SayHello', { name: 'Ada' }),
  connectCall('greeting.v1.GreetingService/Greet', { name: 'Ada' }),
  connectCall('greeting.v1.GreetingService/GetProfile', {}),
];

interface Tally {
  /** Answers from routes under /api and gRPC calls (the SLI's total), and the 5xx and failed calls among them. */
  api: number;
  errors: number;
  /** The gRPC calls among them, and those that ended with their answer (OK). */
  calls: number;
  answeredCalls: number;
}

/** Sends REQUESTS round and round from two clients, each pausing between requests, until `stop`. */
async function drive(port: number, tally: Tally, stop: AbortSignal): Promise<void> {
  const client = async (offset: number) => {
    for (let i = offset; !stop.aborted; i++) {
      const { path, init, rpc } = REQUESTS[i % REQUESTS.length] as (typeof REQUESTS)[number];
      const res = await fetch(`http://127.0.0.1:${port}${path}`, init).catch(() => null);
      if (res === null) continue;
      const body = await res.text();
      if (rpc) {
        // A failed call's code is in its JSON body; its HTTP status is the protocol's, not the SLI's.
        const failed = res.status !== 200 && FAILED_CALL.has((JSON.parse(body) as { code: string }).code);
        tally.api++;
        tally.calls++;
        if (res.status === 200) tally.answeredCalls++;
        if (failed) tally.errors++;
      } else if (path !== '/api/nope') {
        tally.api++;
        if (res.status >= 500) tally.errors++;
      }
      await sleep(5);
    }
  };
  await Promise.all([client(0), client(3)]);
}

/**
 * Event streams until `stop`: three that stay open throughout, and two clients that each open a
 * short one (two events 150 ms apart) as soon as the last has ended; every one of those lasts
 * longer than the latency SLO's 100 ms, about one in ten answers of the instance.
 */
async function stream(port: number, stop: AbortSignal): Promise<void> {
  const read = async (query: string) => {
    const res = await fetch(`http://127.0.0.1:${port}/api/events?${query}`, { signal: stop }).catch(() => null);
    await res?.arrayBuffer().catch(() => {});
  };
  const short = async () => {
    while (!stop.aborted) await read('count=2&interval_ms=150');
  };
  await Promise.all([read('count=100000'), read('count=100000'), read('count=100000'), short(), short()]);
}

/**
 * Another app in the same scrape job: its own `http_requests_total` and `http_request_duration_seconds`,
 * on routes named as the service's, 100 answers a second of which 10% are 500s, every one slower
 * than 100 ms; its own `grpc_server_handled_total` of a service named as one of ours, as many
 * calls, all Unavailable; and its own `faults_injected_total`.
 */
async function startNeighbour(): Promise<{ target: string; close(): Promise<void> }> {
  const started = performance.now();
  const server: Server = createServer((_req, res) => {
    const total = Math.floor((performance.now() - started) / 10);
    const errors = Math.floor(total / 10);
    const series = '{method="GET",route="/api/hello",status="500"}';
    res.setHeader('content-type', 'text/plain; version=0.0.4');
    res.end(
      [
        '# TYPE http_requests_total counter',
        `http_requests_total{method="GET",route="/api/hello",status="200"} ${total - errors}`,
        `http_requests_total${series} ${errors}`,
        '# TYPE http_request_duration_seconds histogram',
        `http_request_duration_seconds_bucket{method="GET",route="/api/hello",status="500",le="0.1"} 0`,
        `http_request_duration_seconds_bucket{method="GET",route="/api/hello",status="500",le="+Inf"} ${errors}`,
        `http_request_duration_seconds_sum${series} ${errors}`,
        `http_request_duration_seconds_count${series} ${errors}`,
        '# TYPE grpc_server_handled_total counter',
        `grpc_server_handled_total{grpc_service="helloworld.Greeter",grpc_method="SayHello",grpc_type="unary",grpc_code="Unavailable"} ${total}`,
        '# TYPE faults_injected_total counter',
        `faults_injected_total{kind="abort",source="settings"} ${errors}`,
        '',
      ].join('\n'),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    target: `127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Polls `check` every half second until it returns a value other than undefined, or fails after `ms`. */
async function until<T>(what: string, ms: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = performance.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(500);
  }
}

const recordingRules = (): RecordingRule[] =>
  rules().flatMap((group) => group.rules.filter((rule): rule is RecordingRule => 'record' in rule));

const selector = (rule: RecordingRule) =>
  `${rule.record}{${Object.entries(rule.labels ?? {})
    .map(([name, value]) => `${name}="${value}"`)
    .join(',')}}`;

/** Each alert of `states` in one of `wanted` states, as `name {labels}`. */
const alertsIn = (states: RuleState[], ...wanted: string[]) =>
  states.flatMap((rule) =>
    (rule.alerts ?? [])
      .filter((alert) => wanted.includes(alert.state))
      .map((alert) => ({ name: rule.name, state: alert.state, labels: alert.labels })),
  );

const firing = (states: RuleState[]) =>
  alertsIn(states, 'firing').map(({ name, labels }) => `${name} ${JSON.stringify(labels)}`);

/** The dashboard's variables at "All", as Grafana sends them. */
const allVariables = (expr: string) => expr.replaceAll('$namespace', '.*').replaceAll('$instance', '.*');

describe('the rules and the dashboard in a real Prometheus scraping the service', {
  skip: PROMETHEUS_SKIP_REASON,
}, () => {
  const instances: Record<'faulty' | 'healthy' | 'broken', { server?: RunningServer; tally: Tally }> = {
    faulty: { tally: { api: 0, errors: 0, calls: 0, answeredCalls: 0 } },
    healthy: { tally: { api: 0, errors: 0, calls: 0, answeredCalls: 0 } },
    broken: { tally: { api: 0, errors: 0, calls: 0, answeredCalls: 0 } },
  };
  const scaled: Partial<Record<'faulty' | 'healthy', Prometheus>> = {};
  const traffic = new AbortController();
  let driving: Promise<unknown> = Promise.resolve();
  let shipped: Prometheus | undefined;
  let neighbour: Awaited<ReturnType<typeof startNeighbour>> | undefined;
  let trafficSince = 0;

  before(async () => {
    if (PROMETHEUS_SKIP_REASON) return;
    const env = { RATE_LIMIT_MAX: '1000000' };
    const closedPort = await freePort();
    const envs = {
      faulty: { ...env, FAULT_ERROR_RATE: String(ERROR_RATE) },
      healthy: env,
      broken: { ...env, REDIS_URL: `redis://127.0.0.1:${closedPort}` },
    };
    for (const [name, instance] of Object.entries(instances)) {
      // Its log is of no use here: thousands of request lines, not kept.
      instance.server = await startServer(envs[name as keyof typeof envs], [], { logFile: '/dev/null' });
    }
    const target = (name: keyof typeof instances) => `127.0.0.1:${instances[name].server?.port}`;
    neighbour = await startNeighbour();
    const rendered = rulesFile({ timeScale: TIME_SCALE, injectedFaultsSpendBudget: true });
    scaled.faulty = await startPrometheus({ [JOB]: [target('faulty')] }, rendered);
    scaled.healthy = await startPrometheus({ [JOB]: [target('healthy')] }, rendered);
    shipped = await startPrometheus(
      { [JOB]: [target('healthy'), target('faulty'), neighbour.target], [BROKEN_JOB]: [target('broken')] },
      readFileSync(join(ROOT, RULES_FILE), 'utf8'),
    );
    trafficSince = performance.now();
    driving = Promise.all([
      ...Object.values(instances).map(({ server, tally }) => drive(server?.port as number, tally, traffic.signal)),
      stream(instances.healthy.server?.port as number, traffic.signal),
    ]);
  });

  after(async () => {
    traffic.abort();
    await driving.catch(() => {});
    await shipped?.stop();
    for (const prometheus of Object.values(scaled)) await prometheus?.stop();
    for (const { server } of Object.values(instances)) server?.kill();
    await neighbour?.close();
  });

  const prometheus = (name: keyof typeof scaled) => scaled[name] as Prometheus;

  describe('rendered at 60 times the speed', () => {
    it('with FAULT_ERROR_RATE=0.2: the fast-burn alert fires', async (t) => {
      const started = performance.now();
      await until(FAST_BURN, 45_000, async () =>
        (await prometheus('faulty').rules()).some((rule) => rule.name === FAST_BURN && rule.state === 'firing')
          ? true
          : undefined,
      );
      t.diagnostic(`${FAST_BURN} firing ${((performance.now() - started) / 1000).toFixed(1)} s after the test began`);
    });

    it('every rule is healthy and every recording rule has one series, with and without faults', async () => {
      const count = rules().reduce((sum, group) => sum + group.rules.length, 0);
      for (const name of ['faulty', 'healthy'] as const) {
        const states = await until(`${name}: every rule evaluated`, 15_000, async () => {
          const evaluated = await prometheus(name).rules();
          return evaluated.every((rule) => rule.health === 'ok') ? evaluated : undefined;
        });
        assert.equal(states.length, count, name);
        for (const rule of recordingRules()) {
          const samples = await prometheus(name).query(selector(rule));
          assert.equal(samples.length, 1, `${name}: ${selector(rule)} has one series`);
        }
      }
    });

    it('the availability SLI read back is the share of /api answers and gRPC calls that failed, near FAULT_ERROR_RATE; latency 0', async (t) => {
      // Enough answers for the share to settle: 15 s of traffic, about 1,500 of them.
      await sleep(Math.max(0, trafficSince + 15_000 - performance.now()));
      const { tally } = instances.faulty;
      const [availability] = await prometheus('faulty').query('slo:errors:ratio_rate30d{slo="availability"}');
      const sli = Number(availability?.value[1]);
      const sent = tally.errors / tally.api;
      t.diagnostic(
        `SLI ${sli.toFixed(4)}; the test saw ${tally.errors} 5xx and failed calls in ${tally.api} /api answers and gRPC calls (${tally.calls}) (${sent.toFixed(4)})`,
      );
      assert.ok(Math.abs(sli - sent) < 0.03, `SLI ${sli} against ${sent} sent`);
      const sigma = Math.sqrt((ERROR_RATE * (1 - ERROR_RATE)) / tally.api);
      assert.ok(Math.abs(sli - ERROR_RATE) < 5 * sigma + 0.03, `SLI ${sli} against ${ERROR_RATE} (σ ${sigma})`);
      const [latency] = await prometheus('faulty').query('slo:errors:ratio_rate30d{slo="latency"}');
      assert.ok(Number(latency?.value[1]) < 0.01, `latency SLI ${latency?.value[1]}`);
    });

    it('without faults, with event streams besides the API, nothing fires', async () => {
      assert.deepEqual(firing(await prometheus('healthy').rules()), []);
      const [availability] = await prometheus('healthy').query('slo:errors:ratio_rate30d{slo="availability"}');
      assert.equal(Number(availability?.value[1]), 0);
      assert.equal(instances.healthy.tally.errors, 0);
      const { calls, answeredCalls } = instances.healthy.tally;
      assert.ok(calls > 0 && answeredCalls === calls, `${answeredCalls} of ${calls} calls answered`);
    });

    it('the gRPC calls are counted in grpc_server_handled_total, and not in http_requests_total', async () => {
      const methods = await prometheus('healthy').query(
        'sum by (grpc_service, grpc_method, grpc_code) (grpc_server_handled_total)',
      );
      assert.deepEqual(
        methods.map(({ metric }) => `${metric.grpc_service}/${metric.grpc_method} ${metric.grpc_code}`).sort(),
        [
          'greeting.v1.GreetingService/GetProfile OK',
          'greeting.v1.GreetingService/Greet OK',
          'helloworld.Greeter/SayHello OK',
        ],
      );
      // Every call is a POST: counted by HTTP's metrics too, it would be a POST of a route other than the echo's.
      const posts = await prometheus('healthy').query('sum by (route) (http_requests_total{method="POST"})');
      assert.deepEqual(
        posts.map(({ metric }) => metric.route),
        ['/api/echo'],
      );
    });

    it("every dashboard panel's query, its variables at All, is accepted, and has data (faults in one, streams in the other) but for the WebSocket's", async () => {
      for (const { panel, expr, mayBeEmpty } of panelQueries()) {
        // A query Prometheus refuses throws here, its error said.
        const faulty = await prometheus('faulty').query(allVariables(expr));
        const healthy = await prometheus('healthy').query(allVariables(expr));
        if (!mayBeEmpty) assert.ok(faulty.length + healthy.length > 0, `${panel}: ${expr} has no data`);
      }
      const streams = panelQueries().filter((query) => query.mayBeEmpty);
      assert.ok(streams.length === 4 && streams.every((query) => /websocket|event/.test(query.expr)));
    });
  });

  describe('the shipped file, as it stands, with another app in the scrape job', () => {
    const server = () => shipped as Prometheus;

    it('the faults injected at 20% page as unexpected (GreetingServiceFaultsInjected), for that instance alone', async (t) => {
      const alerts = await until('GreetingServiceFaultsInjected firing', 120_000, async () => {
        const found = alertsIn(await server().rules(), 'firing').filter(
          (alert) => alert.name === 'GreetingServiceFaultsInjected',
        );
        return found.length > 0 ? found : undefined;
      });
      t.diagnostic(`firing by ${((performance.now() - trafficSince) / 1000).toFixed(1)} s into the traffic`);
      assert.deepEqual(
        alerts.map((alert) => [alert.labels.severity, alert.labels.job, alert.labels.instance]),
        [['critical', JOB, `127.0.0.1:${instances.faulty.server?.port}`]],
      );
    });

    // Pending is enough here: that the shipped expression matches, with its labels; that it fires
    // once its `for` (2 minutes) has passed is the render's test above and promtool's.
    it('the deployment whose Redis cannot be reached (its profile answers 503) pages its fast burn, with its job', async (t) => {
      const alerts = await until(`${FAST_BURN} pending`, 90_000, async () => {
        const found = alertsIn(await server().rules(), 'pending', 'firing').filter((alert) => alert.name === FAST_BURN);
        return found.length > 0 ? found : undefined;
      });
      t.diagnostic(`${FAST_BURN} pending ${((performance.now() - trafficSince) / 1000).toFixed(1)} s into the traffic`);
      assert.deepEqual(
        alerts.map((alert) => alert.labels.job),
        [BROKEN_JOB],
      );
      assert.ok(instances.broken.tally.errors > 0);
    });

    it("the other app's 500s and slow answers, the injected faults and the event streams raise no SLO alert, though scraped", async () => {
      // Once what the rules must leave out has been scraped in numbers (the broken deployment's
      // page is pending within seconds of as much).
      const otherAppErrors = `http_requests_total{instance="${neighbour?.target}",status="500"} > 100`;
      const slowStreams =
        'sum(http_request_duration_seconds_count{route="/api/events"}) - sum(http_request_duration_seconds_bucket{route="/api/events",le="0.1"}) > 100';
      for (const query of [otherAppErrors, slowStreams]) {
        await until(query, 90_000, async () => ((await server().query(query)).length > 0 ? true : undefined));
      }
      const slo = alertsIn(await server().rules(), 'pending', 'firing').filter(
        (alert) => alert.labels.slo !== undefined && alert.labels.job !== BROKEN_JOB,
      );
      assert.deepEqual(slo, []);
      for (const window of ['5m', '1h']) {
        const samples = await server().query(`slo:errors:ratio_rate${window}{job="${JOB}"}`);
        assert.equal(samples.length, 2, `${window}: one SLI per SLO for the job`);
        for (const { metric, value } of samples) {
          assert.ok(Number(value[1]) < 0.01, `${metric.slo} over ${window}: ${value[1]}`);
        }
      }
      // What the rules left out is there: the other app's 500s, and finished streams over 100 ms.
      assert.equal((await server().query(otherAppErrors)).length, 1);
      assert.equal((await server().query(slowStreams)).length, 1, 'finished streams, slower than 100 ms');
    });

    it('every rule is healthy, and every recording rule has a series for each deployment', async () => {
      // The 30-day group is evaluated once a minute: its first evaluation may still be to come.
      const states = await until('every rule evaluated', 90_000, async () => {
        const evaluated = await server().rules();
        return evaluated.every((rule) => rule.health !== 'unknown') ? evaluated : undefined;
      });
      assert.deepEqual(
        states.filter((rule) => rule.health !== 'ok').map((rule) => `${rule.name}: ${rule.lastError}`),
        [],
      );
      assert.equal(
        states.length,
        rules().reduce((sum, group) => sum + group.rules.length, 0),
      );
      // A first evaluation before two scrapes of a counter leaves a rate over 30 days empty until the
      // next, a minute later.
      for (const rule of recordingRules()) {
        const expected = rule.record === 'slo:objective:ratio' ? [undefined] : [JOB, BROKEN_JOB];
        const jobsOf = async () =>
          [...new Set((await server().query(selector(rule))).map((sample) => sample.metric.job))].sort();
        await until(selector(rule), 90_000, async () =>
          JSON.stringify(await jobsOf()) === JSON.stringify(expected) ? true : undefined,
        ).catch(() => undefined);
        assert.deepEqual(await jobsOf(), expected, selector(rule));
      }
    });

    it('every instance killed: GreetingServiceUnavailable (critical) is pending within 90 s, and stays so', async (t) => {
      traffic.abort();
      await driving.catch(() => {});
      const killed = performance.now();
      for (const { server } of Object.values(instances)) server?.kill();
      const ofJob = async () =>
        alertsIn(await server().rules(), 'pending', 'firing').filter(
          (alert) => alert.name === 'GreetingServiceUnavailable' && alert.labels.job === JOB,
        );
      const [first] = await until('GreetingServiceUnavailable', 90_000, async () => {
        const found = await ofJob();
        return found.length > 0 ? found : undefined;
      });
      t.diagnostic(`${first?.state} ${((performance.now() - killed) / 1000).toFixed(1)} s after the kill`);
      assert.equal(first?.labels.severity, 'critical');
      // A page stays until the service is back: 30 s more, seen every second.
      const end = performance.now() + 30_000;
      while (performance.now() < end) {
        assert.equal((await ofJob()).length, 1, `${((performance.now() - killed) / 1000).toFixed(1)} s after the kill`);
        await sleep(1000);
      }
    });
  });
});
