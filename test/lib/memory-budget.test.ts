import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { type Holding, MemoryBudget } from '../../src/lib/memory-budget.js';

const MiB = 1024 * 1024;

/** A holding of `bytes` that records being shed. */
function holding(bytes: number, shed: string[], action = 'connection_reset'): Holding {
  return { bytes, action, shed: () => shed.push(`${action} ${bytes / MiB}`) };
}

describe('MemoryBudget', () => {
  it('sheds nothing under its limit, and is full from 80% of it', () => {
    const shed: string[] = [];
    const budget = new MemoryBudget(10 * MiB, () => {});
    let holdings = [holding(3 * MiB, shed), holding(4 * MiB, shed)];
    budget.add(() => holdings);
    budget.measure();
    assert.equal(budget.held, 7 * MiB);
    assert.equal(budget.full, false);
    holdings = [holding(3 * MiB, shed), holding(5 * MiB, shed)];
    budget.measure();
    assert.equal(budget.full, true);
    assert.deepEqual(shed, []);
    budget.close();
  });

  it('past its limit, sheds what holds the most until under 80% of it, telling each', () => {
    const shed: string[] = [];
    const told: [string, number, number][] = [];
    const budget = new MemoryBudget(10 * MiB, (h, held, limit) => told.push([h.action, held / MiB, limit / MiB]));
    budget.add(() => [holding(1 * MiB, shed), holding(5 * MiB, shed), holding(2 * MiB, shed)]);
    budget.add(() => [holding(4 * MiB, shed, 'stream_reset'), holding(0, shed)]);
    budget.measure();
    // 12 MiB held: the 5 (to 7), then under 8 MiB.
    assert.deepEqual(shed, ['connection_reset 5']);
    assert.deepEqual(told, [['connection_reset', 12, 10]]);
    assert.equal(budget.held, 7 * MiB);
    assert.equal(budget.full, false);
    budget.close();
  });

  it('counts what is being let go of already, but sheds neither it again nor anything else for it', () => {
    const shed: string[] = [];
    const budget = new MemoryBudget(10 * MiB, () => {});
    const leaving = { ...holding(6 * MiB, shed, 'websocket_closed'), leaving: true };
    budget.add(() => [leaving, holding(3 * MiB, shed), holding(2 * MiB, shed)]);
    budget.measure();
    assert.deepEqual(shed, []);
    budget.close();
  });

  it('resumes what waits for room once a measurement finds it no longer full', () => {
    const budget = new MemoryBudget(10 * MiB, () => {});
    let held = 9 * MiB;
    budget.add(() => [holding(held, [])]);
    budget.measure();
    let resumed = 0;
    budget.whenRoom(() => {
      resumed += 1;
    });
    budget.measure();
    assert.equal(resumed, 0);
    held = 7 * MiB;
    budget.measure();
    budget.measure();
    assert.equal(resumed, 1);
    budget.close();
  });

  it('counts what is charged between two measurements, until the next', () => {
    const budget = new MemoryBudget(10 * MiB, () => {});
    budget.add(() => [holding(2 * MiB, [])]);
    budget.measure();
    budget.charge(6 * MiB);
    assert.equal(budget.full, true);
    budget.measure();
    assert.equal(budget.held, 2 * MiB);
    assert.equal(budget.full, false);
    budget.close();
  });

  it('while full, measures every 10 ms as long as what it holds grows, and at its interval once it is still', (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'setInterval'] });
    const budget = new MemoryBudget(10 * MiB, () => {});
    let held = 9 * MiB;
    let measured = 0;
    budget.add(() => {
      measured += 1;
      return [holding(held, [])];
    });
    t.mock.timers.tick(50);
    assert.equal(measured, 1); // the interval's: full, and grown from nothing
    held = 9.5 * MiB;
    t.mock.timers.tick(10);
    assert.equal(measured, 2); // grown again
    t.mock.timers.tick(10);
    assert.equal(measured, 3); // still: none sooner than the interval's
    t.mock.timers.tick(29);
    assert.equal(measured, 3);
    t.mock.timers.tick(1);
    assert.equal(measured, 4);
    budget.close();
  });

  it('says its limit, what it held and what it shed or refused in /metrics', async () => {
    const budget = new MemoryBudget(10 * MiB, () => {});
    const registry = new Registry();
    budget.registerMetrics(registry);
    budget.add(() => [holding(6 * MiB, []), holding(7 * MiB, [], 'websocket_closed')]);
    budget.measure();
    assert.equal(budget.admits('stream_refused'), true);
    budget.charge(2 * MiB);
    assert.equal(budget.admits('stream_refused'), false);
    const text = await registry.metrics();
    assert.match(text, /^memory_budget_bytes 10485760$/m);
    // The 6 MiB left at the measurement, and the 2 MiB charged since.
    assert.match(text, /^memory_held_bytes 8388608$/m);
    assert.match(text, /^memory_shed_total\{action="websocket_closed"\} 1$/m);
    assert.match(text, /^memory_shed_total\{action="stream_refused"\} 1$/m);
    budget.close();
  });
});
