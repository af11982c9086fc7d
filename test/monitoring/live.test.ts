import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { panelQueries } from '../../scripts/monitoring/dashboard.js';
import { type RecordingRule, rules } from '../../scripts/monitoring/rules.js';
import { RULES_FILE, rulesFile } from '../../scripts/monitoring/write.js';
import { ROOT, type RunningServer, startServer } from '../server-process.js';
import { PROMETHEUS_SKIP_REASON, type Prometheus, type RuleState, startPrometheus } from './prometheus.js';

/**
 * The rules and the dashboard against the real thing: the built service, one instance injecting
 * faults (FAULT_ERROR_RATE) and one not, each scraped every second by a Prometheus of its own with
 * the rules loaded, while the test sends them the same traffic. The rules are those of
 * deploy/prometheus rendered with every window and `for` divided by 60 (an hour in a minute), and
 * with injected faults spending the budget, since they are what is measured here; a third
 * Prometheus loads the shipped file itself, to show each of its rules evaluated as it stands.
 */

const ERROR_RATE = 0.2;
const TIME_SCALE = 60;
/** Any name: the rules find the service by what it exports, not by its scrape job's name. */
const JOB = 'whatever-the-team-calls-it';
const FAST_BURN = 'GreetingServiceAvailabilityFastBurn';

/** /api requests of every kind, and one outside it. */
const REQUESTS: { path: string; init?: RequestInit }[] = [
  { path: '/api/hello' },
  { path: '/api/hello/Ada' },
  { path: '/api/search?q=x' },
  { path: '/api/exchange?from=USD&to=EUR&amount=10' },
  { path: '/api/currencies' },
  { path: '/api/profile' },
  { path: '/api/echo', init: { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' } },
  { path: '/api/nope' },
];

interface Tally {
  /** Answers from routes under /api (the SLI's total), and the 5xx among them. */
  api: number;
  errors: number;
}

/** Sends REQUESTS round and round from two clients, each pausing between requests, until `stop`. */
async function drive(port: number, tally: Tally, stop: AbortSignal): Promise<void> {
  const client = async (offset: number) => {
    for (let i = offset; !stop.aborted; i++) {
      const { path, init } = REQUESTS[i % REQUESTS.length] as (typeof REQUESTS)[number];
      const res = await fetch(`http://127.0.0.1:${port}${path}`, init);
      await res.arrayBuffer();
      if (path !== '/api/nope') {
        tally.api++;
        if (res.status >= 500) tally.errors++;
      }
      await sleep(5);
    }
  };
  await Promise.all([client(0), client(3)]);
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

const firing = (states: RuleState[]) =>
  states.filter((rule) => rule.state === 'firing').map((rule) => `${rule.name} ${JSON.stringify(rule.alerts)}`);

describe('the rules and the dashboard in a real Prometheus scraping the service', {
  skip: PROMETHEUS_SKIP_REASON,
}, () => {
  const instances: Record<'faulty' | 'healthy', { server?: RunningServer; prometheus?: Prometheus; tally: Tally }> = {
    faulty: { tally: { api: 0, errors: 0 } },
    healthy: { tally: { api: 0, errors: 0 } },
  };
  const traffic = new AbortController();
  let driving: Promise<unknown> = Promise.resolve();
  let shipped: Prometheus | undefined;
  let trafficSince = 0;

  before(async () => {
    if (PROMETHEUS_SKIP_REASON) return;
    const rendered = rulesFile({ timeScale: TIME_SCALE, injectedFaultsSpendBudget: true });
    const env = { RATE_LIMIT_MAX: '1000000' };
    for (const [name, instance] of Object.entries(instances)) {
      // Its log is of no use here: thousands of request lines, not kept.
      instance.server = await startServer(
        name === 'faulty' ? { ...env, FAULT_ERROR_RATE: String(ERROR_RATE) } : env,
        [],
        { logFile: '/dev/null' },
      );
      instance.prometheus = await startPrometheus(JOB, [`127.0.0.1:${instance.server.port}`], rendered);
    }
    shipped = await startPrometheus(
      JOB,
      [`127.0.0.1:${instances.faulty.server?.port}`],
      readFileSync(join(ROOT, RULES_FILE), 'utf8'),
    );
    trafficSince = performance.now();
    driving = Promise.all(
      Object.values(instances).map(({ server, tally }) => drive(server?.port as number, tally, traffic.signal)),
    );
  });

  after(async () => {
    traffic.abort();
    await driving.catch(() => {});
    await shipped?.stop();
    for (const { server, prometheus } of Object.values(instances)) {
      await prometheus?.stop();
      server?.kill();
    }
  });

  const prometheus = (name: keyof typeof instances) => instances[name].prometheus as Prometheus;

  it('with FAULT_ERROR_RATE=0.2: the fast-burn alert fires', async (t) => {
    const started = performance.now();
    await until(FAST_BURN, 45_000, async () =>
      (await prometheus('faulty').rules()).some((rule) => rule.name === FAST_BURN && rule.state === 'firing')
        ? true
        : undefined,
    );
    t.diagnostic(`${FAST_BURN} firing ${((performance.now() - started) / 1000).toFixed(1)} s after the test began`);
  });

  it('every rule is healthy and every recording rule has series, in each: with and without faults, and the shipped file', async () => {
    const all = { faulty: prometheus('faulty'), healthy: prometheus('healthy'), shipped: shipped as Prometheus };
    const count = rules().reduce((sum, group) => sum + group.rules.length, 0);
    for (const [name, server] of Object.entries(all)) {
      const states = await until(`${name}: every rule evaluated`, 15_000, async () => {
        const evaluated = await server.rules();
        return evaluated.every((rule) => rule.health === 'ok') ? evaluated : undefined;
      });
      assert.equal(states.length, count, name);
      for (const rule of recordingRules()) {
        const samples = await server.query(selector(rule));
        assert.equal(samples.length, 1, `${name}: ${selector(rule)} has one series`);
      }
    }
  });

  it('the availability SLI read back is the share of /api answers that were 503s, near FAULT_ERROR_RATE; latency 0', async (t) => {
    // Enough answers for the share to settle: 15 s of traffic, about 1,500 of them.
    await sleep(Math.max(0, trafficSince + 15_000 - performance.now()));
    const { tally } = instances.faulty;
    const [availability] = await prometheus('faulty').query('slo:errors:ratio_rate30d{slo="availability"}');
    const sli = Number(availability?.value[1]);
    const sent = tally.errors / tally.api;
    t.diagnostic(
      `SLI ${sli.toFixed(4)}; the test saw ${tally.errors} 5xx in ${tally.api} /api answers (${sent.toFixed(4)})`,
    );
    assert.ok(Math.abs(sli - sent) < 0.03, `SLI ${sli} against ${sent} sent`);
    const sigma = Math.sqrt((ERROR_RATE * (1 - ERROR_RATE)) / tally.api);
    assert.ok(Math.abs(sli - ERROR_RATE) < 5 * sigma + 0.03, `SLI ${sli} against ${ERROR_RATE} (σ ${sigma})`);
    const [latency] = await prometheus('faulty').query('slo:errors:ratio_rate30d{slo="latency"}');
    assert.ok(Number(latency?.value[1]) < 0.01, `latency SLI ${latency?.value[1]}`);
  });

  it('the shipped rules count the injected faults apart: their availability SLI stays near 0, and it does not burn', async (t) => {
    const server = shipped as Prometheus;
    const [availability] = await server.query('slo:errors:ratio_rate5m{slo="availability"}');
    t.diagnostic(`the shipped rules' SLI over 5m: ${availability?.value[1]}`);
    assert.ok(Number(availability?.value[1]) < 0.01, `SLI ${availability?.value[1]}`);
    assert.deepEqual(firing(await server.rules()), []);
  });

  it('without faults, nothing fires', async () => {
    const states = await prometheus('healthy').rules();
    assert.deepEqual(firing(states), []);
    const [availability] = await prometheus('healthy').query('slo:errors:ratio_rate30d{slo="availability"}');
    assert.equal(Number(availability?.value[1]), 0);
    assert.equal(instances.healthy.tally.errors, 0);
  });

  it("every dashboard panel's query is accepted, and has data but for the streams' (none yet)", async () => {
    for (const { panel, expr, mayBeEmpty } of panelQueries()) {
      assert.doesNotMatch(expr, /\$/, `${panel}: PromQL as it stands, no variable to substitute`);
      // A query Prometheus refuses throws here, its error said.
      const samples = await prometheus('faulty').query(expr);
      if (!mayBeEmpty) assert.ok(samples.length > 0, `${panel}: ${expr} has no data`);
    }
    const streams = panelQueries().filter((query) => query.mayBeEmpty);
    assert.ok(streams.length === 4 && streams.every((query) => /websocket|event/.test(query.expr)));
  });
});
