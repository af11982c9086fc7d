import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FaultChooser, type FaultSettings, faultsOn } from '../../src/domain/faults.js';

const OFF: FaultSettings = {
  errorRate: 0,
  errorStatus: 503,
  delayRate: 0,
  delayMs: { min: 1000, max: 1000 },
  headers: false,
};
const HEADERS: FaultSettings = { ...OFF, headers: true };

/** A random source that gives these values in turn, then 0.5. */
function draws(...values: number[]): () => number {
  return () => values.shift() ?? 0.5;
}

describe('faultsOn', () => {
  it('is off at the defaults, on with a rate above 0 or the headers', () => {
    assert.equal(faultsOn(OFF), false);
    assert.equal(faultsOn({ ...OFF, errorStatus: 500, delayMs: { min: 1, max: 2 } }), false);
    assert.equal(faultsOn({ ...OFF, errorRate: 0.01 }), true);
    assert.equal(faultsOn({ ...OFF, delayRate: 0.01 }), true);
    assert.equal(faultsOn(HEADERS), true);
  });
});

describe('FaultChooser: the headers, read as Envoy reads them', () => {
  const plan = (headers: Record<string, string | string[]>, random = draws()) =>
    new FaultChooser(HEADERS, random).plan(headers);

  it('plans nothing for a request without fault headers', () => {
    assert.equal(plan({}), null);
    assert.equal(plan({ 'x-envoy-fault-abort-request-percentage': '100' }), null);
  });

  it('takes an abort status from 200 to 599, and ignores one outside or no number', () => {
    for (const status of ['200', '204', '302', '418', '503', '599', ' 503 ', '+503']) {
      assert.deepEqual(plan({ 'x-envoy-fault-abort-request': status })?.abort, {
        status: Number(status.trim()),
        grpcStatus: null,
        source: 'headers',
      });
    }
    for (const status of ['199', '600', '0', '-503', '503.0', '5e2', 'abc', '', '99999999999999999999']) {
      assert.equal(plan({ 'x-envoy-fault-abort-request': status }), null, JSON.stringify(status));
    }
  });

  it("takes a gRPC call's gRPC status from 1 to 16 before the HTTP status, and ignores it elsewhere", () => {
    const grpcPlan = (headers: Record<string, string>) => new FaultChooser(HEADERS, draws()).plan(headers, true);
    const both = { 'x-envoy-fault-abort-grpc-request': '14', 'x-envoy-fault-abort-request': '418' };
    assert.deepEqual(grpcPlan(both)?.abort, { status: 503, grpcStatus: 14, source: 'headers' });
    assert.deepEqual(grpcPlan({ 'x-envoy-fault-abort-grpc-request': '9' })?.abort, {
      status: 400,
      grpcStatus: 9,
      source: 'headers',
    });
    assert.deepEqual(plan(both)?.abort, { status: 418, grpcStatus: null, source: 'headers' });
    for (const status of ['0', '17', 'abc', '-1']) {
      assert.equal(grpcPlan({ 'x-envoy-fault-abort-grpc-request': status }), null, status);
    }
  });

  it('takes the first value of a header given twice, as Envoy does', () => {
    assert.equal(plan({ 'x-envoy-fault-abort-request': '503, 404' })?.abort?.status, 503);
    assert.equal(plan({ 'x-envoy-fault-abort-request': ['418', '500'] })?.abort?.status, 418);
  });

  it('takes a delay of 0 to 60000 ms, and ignores a longer one or no number', () => {
    assert.deepEqual(plan({ 'x-envoy-fault-delay-request': '250' })?.delay, { ms: 250, source: 'headers' });
    assert.deepEqual(plan({ 'x-envoy-fault-delay-request': '60000' })?.delay, { ms: 60000, source: 'headers' });
    assert.deepEqual(plan({ 'x-envoy-fault-delay-request': '0' })?.delay, { ms: 0, source: 'headers' });
    for (const ms of ['60001', '1s', '-1', '1.5']) assert.equal(plan({ 'x-envoy-fault-delay-request': ms }), null);
  });

  it('takes a throughput above 0 KiB/s, and ignores 0 or no number', () => {
    assert.equal(plan({ 'x-envoy-fault-throughput-response': '8' })?.throughput, 8);
    for (const kibps of ['0', 'fast', '-8']) assert.equal(plan({ 'x-envoy-fault-throughput-response': kibps }), null);
  });

  it('takes the four connection faults by name, and ignores anything else', () => {
    for (const kind of ['reset', 'empty', 'truncate', 'malformed']) {
      assert.equal(plan({ 'x-fault-connection': kind })?.connection, kind);
    }
    for (const kind of ['RESET', 'close', '', 'reset, empty']) assert.equal(plan({ 'x-fault-connection': kind }), null);
  });

  it('applies each fault to its percentage of requests: an integer capped at 100; absent or no number, all', () => {
    const abort = (percentage: string | undefined, draw: number) =>
      plan(
        {
          'x-envoy-fault-abort-request': '503',
          ...(percentage !== undefined && { 'x-envoy-fault-abort-request-percentage': percentage }),
        },
        draws(draw),
      )?.abort?.status ?? null;
    // A draw of d falls within a percentage p when 100 d < p.
    assert.equal(abort('30', 0.29), 503);
    assert.equal(abort('30', 0.3), null);
    assert.equal(abort('0', 0), null);
    assert.equal(abort('100', 0.999), 503);
    assert.equal(abort('250', 0.999), 503, 'capped at 100, as Envoy caps it at the configured percentage');
    assert.equal(abort(undefined, 0.999), 503);
    assert.equal(abort('half', 0.999), 503, 'no number: the configured percentage, 100');
    const delayed = plan(
      { 'x-envoy-fault-delay-request': '10', 'x-envoy-fault-delay-request-percentage': '50' },
      draws(0.7),
    );
    assert.equal(delayed, null);
    const paced = plan(
      { 'x-envoy-fault-throughput-response': '1', 'x-envoy-fault-throughput-response-percentage': '50' },
      draws(0.2),
    );
    assert.equal(paced?.throughput, 1);
  });

  it('reads no header unless FAULT_HEADERS is on', () => {
    const chooser = new FaultChooser(OFF, draws());
    assert.equal(
      chooser.plan({
        'x-envoy-fault-abort-request': '503',
        'x-envoy-fault-delay-request': '10',
        'x-fault-connection': 'reset',
      }),
      null,
    );
  });
});

describe('FaultChooser: the settings', () => {
  it('delays FAULT_DELAY_RATE of requests, by a uniform draw from FAULT_DELAY_MS', () => {
    const settings = { ...OFF, delayRate: 0.25, delayMs: { min: 100, max: 200 } };
    assert.equal(new FaultChooser(settings, draws(0.25)).plan({}), null);
    assert.deepEqual(new FaultChooser(settings, draws(0.1, 0)).plan({})?.delay, { ms: 100, source: 'settings' });
    assert.deepEqual(new FaultChooser(settings, draws(0.1, 0.999999)).plan({})?.delay, { ms: 200, source: 'settings' });
    assert.deepEqual(new FaultChooser(settings, draws(0.1, 0.5)).plan({})?.delay, { ms: 150, source: 'settings' });
  });

  it('answers FAULT_ERROR_RATE of requests with FAULT_ERROR_STATUS', () => {
    const settings = { ...OFF, errorRate: 0.1, errorStatus: 500 };
    assert.deepEqual(new FaultChooser(settings, draws(0.05)).plan({})?.abort, {
      status: 500,
      grpcStatus: null,
      source: 'settings',
    });
    assert.equal(new FaultChooser(settings, draws(0.1)).plan({}), null);
  });

  it('draws the delay and the error independently: a request may get both', () => {
    const settings = { ...OFF, errorRate: 0.5, delayRate: 0.5, delayMs: { min: 10, max: 10 } };
    const plan = new FaultChooser(settings, draws(0.1, 0.3, 0.2)).plan({});
    assert.deepEqual(plan, {
      delay: { ms: 10, source: 'settings' },
      abort: { status: 503, grpcStatus: null, source: 'settings' },
      throughput: null,
      connection: null,
    });
  });

  it('lets a fault the request asks for decide that kind of fault, hit or miss', () => {
    const settings = { ...HEADERS, errorRate: 1, delayRate: 1, delayMs: { min: 10, max: 10 } };
    const asked = new FaultChooser(settings, draws(0.9, 0.9)).plan({
      'x-envoy-fault-abort-request': '418',
      'x-envoy-fault-abort-request-percentage': '50',
      'x-envoy-fault-delay-request': '20',
    });
    assert.deepEqual(asked?.delay, { ms: 20, source: 'headers' });
    assert.equal(asked?.abort, null, 'the request asked for an abort at 50% and missed: no random error either');
  });

  it('draws nothing more than needed: with rates 0 the random source is not read', () => {
    let read = 0;
    const chooser = new FaultChooser(HEADERS, () => {
      read += 1;
      return 0.5;
    });
    assert.equal(chooser.plan({ accept: 'application/json' }), null);
    assert.equal(read, 0);
  });
});
