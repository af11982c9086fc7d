import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Counter, Histogram, Registry } from 'prom-client';
import { SeriesHistogram } from '../../src/lib/histogram.js';

const LABELS = ['method', 'route', 'status'] as const;
const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const NAME = 'http_request_duration_seconds';
const HELP = 'Time from the start of a request to the end of its response, in seconds.';
const COUNTER = { name: 'http_requests_total', help: 'Requests answered, by method, route template and status.' };

type Observation = { series: [string, string, string]; seconds: number };

/** The same observations through prom-client's own Histogram and Counter, and through SeriesHistogram. */
async function expositions(observations: readonly Observation[]) {
  const library = new Registry();
  const histogram = new Histogram({
    name: NAME,
    help: HELP,
    labelNames: LABELS,
    buckets: BUCKETS,
    registers: [library],
  });
  const counter = new Counter({ ...COUNTER, labelNames: LABELS, registers: [library] });

  const ours = new Registry();
  const folded = new SeriesHistogram({
    name: NAME,
    help: HELP,
    labelNames: LABELS,
    buckets: BUCKETS,
    registers: [ours],
  });
  folded.counter({ ...COUNTER, registers: [ours] });
  const made = new Map<string, ReturnType<typeof folded.series>>();

  for (const { series, seconds } of observations) {
    const [method, route, status] = series;
    histogram.observe({ method, route, status }, seconds);
    counter.inc({ method, route, status });
    const key = series.join(' ');
    let found = made.get(key);
    if (found === undefined) {
      found = folded.series(series);
      made.set(key, found);
    }
    found.observe(seconds);
  }
  return {
    library: { text: await library.metrics(), json: await library.getMetricsAsJSON() },
    ours: { text: await ours.metrics(), json: await ours.getMetricsAsJSON() },
  };
}

const seriesArbitrary = fc.tuple(
  fc.constantFrom('GET', 'POST', 'HEAD'),
  fc.constantFrom('/api/hello', '/api/hello/:name', 'unmatched', '/a "quoted\\" route\n'),
  fc.constantFrom('200', '404', '503'),
);
// Bounds themselves, values between and beyond them, and the tiny and huge.
const secondsArbitrary = fc.oneof(
  fc.constantFrom(...BUCKETS, 0, 10.000001, 1e9),
  fc.double({ min: 0, max: 20, noNaN: true }),
);

describe('SeriesHistogram', () => {
  it('is written exactly as prom-client writes a Histogram and a Counter fed the same observations', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ series: seriesArbitrary, seconds: secondsArbitrary }), { maxLength: 60 }),
        async (observations) => {
          const { library, ours } = await expositions(observations);
          assert.equal(ours.text, library.text);
          assert.deepEqual(ours.json, library.json);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('writes its series in the order they were first observed, buckets cumulative and le first', async () => {
    const { ours } = await expositions([
      { series: ['GET', '/b', '200'], seconds: 0.002 },
      { series: ['GET', '/a', '200'], seconds: 20 },
      { series: ['GET', '/b', '200'], seconds: 0.0005 },
    ]);
    const lines = ours.text.split('\n');
    const b = lines.findIndex((line) => line.includes('route="/b"'));
    const a = lines.findIndex((line) => line.includes('route="/a"'));
    assert.ok(b !== -1 && b < a);
    assert.ok(lines.includes(`${NAME}_bucket{le="0.0005",method="GET",route="/b",status="200"} 1`));
    assert.ok(lines.includes(`${NAME}_bucket{le="0.0025",method="GET",route="/b",status="200"} 2`));
    assert.ok(lines.includes(`${NAME}_bucket{le="10",method="GET",route="/a",status="200"} 0`));
    assert.ok(lines.includes(`${NAME}_bucket{le="+Inf",method="GET",route="/a",status="200"} 1`));
    assert.ok(lines.includes('http_requests_total{method="GET",route="/b",status="200"} 2'));
  });
});
