import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Turns } from '../../src/lib/turns.js';

describe('Turns', () => {
  it('runs at most max at once, the rest as turns are released', () => {
    const turns = new Turns(2);
    const ran: number[] = [];
    for (let i = 1; i <= 4; i += 1) turns.take(() => ran.push(i));
    assert.deepEqual(ran, [1, 2]);
    turns.release();
    assert.deepEqual(ran, [1, 2, 3]);
    turns.release();
    turns.release();
    turns.release();
    assert.deepEqual(ran, [1, 2, 3, 4]);
  });

  it("gives waiting turns an owner at a time in rotation: one owner's many wait behind another's few", () => {
    const turns = new Turns(1);
    const ran: string[] = [];
    turns.take(() => ran.push('running'), 'a');
    for (let i = 1; i <= 3; i += 1) turns.take(() => ran.push(`a${i}`), 'a');
    turns.take(() => ran.push('b1'), 'b');
    turns.take(() => ran.push('c1'), 'c');
    turns.take(() => ran.push('b2'), 'b');
    for (let i = 0; i < 7; i += 1) turns.release();
    assert.deepEqual(ran, ['running', 'a1', 'b1', 'c1', 'a2', 'b2', 'a3']);
  });
});
