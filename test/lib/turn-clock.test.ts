import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { turnClock } from '../../src/lib/turn-clock.js';

describe('turnClock', () => {
  it('reads its clock once per turn of the event loop, and again in the next', async () => {
    let readings = 0;
    const now = turnClock(() => ++readings);
    assert.deepEqual([now(), now(), now()], [1, 1, 1]);
    await Promise.resolve();
    assert.equal(now(), 1, 'a microtask is the same turn');
    await nextTurn();
    assert.deepEqual([now(), now()], [2, 2]);
    await nextTurn();
    await nextTurn();
    assert.equal(now(), 3, 'turns without a reading read nothing');
    assert.equal(readings, 3);
  });

  it('reads each of several clocks once per turn', async () => {
    let a = 0;
    let b = 0;
    const first = turnClock(() => ++a);
    const second = turnClock(() => ++b);
    assert.deepEqual([first(), second(), first(), second()], [1, 1, 1, 1]);
    await nextTurn();
    assert.equal(second(), 2, 'read again in the next turn');
    assert.equal(first(), 2);
    await nextTurn();
    assert.equal(first(), 3, 'a clock read alone still moves on');
    assert.equal(first(), 3);
    assert.deepEqual([a, b], [3, 2]);
  });
});
