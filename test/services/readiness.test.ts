import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Readiness } from '../../src/services/readiness.js';

describe('Readiness', () => {
  const stores = (reason: string | null) => ({ unavailableReason: async () => reason });

  it('is ready when nothing says otherwise', async () => {
    assert.equal(await new Readiness(() => false, stores(null)).notReadyReason(), null);
  });

  it('says why not: shutting down first, then the operator, then the stores', async () => {
    let draining = false;
    const readiness = new Readiness(() => draining, stores('Redis is unreachable.'));
    assert.equal(await readiness.notReadyReason(), 'Not ready: Redis is unreachable.');
    assert.equal(readiness.disable('op-1'), true);
    assert.equal(
      await readiness.notReadyReason(),
      'Not ready: taken out of service by an operator (POST /readyz/disable, request op-1).',
    );
    draining = true;
    assert.equal(await readiness.notReadyReason(), 'The service is shutting down.');
  });

  it('keeps the request that took it out; enabling twice, or disabling twice, changes nothing more', async () => {
    const readiness = new Readiness(() => false, stores(null));
    assert.equal(readiness.enable(), false);
    assert.equal(readiness.disable('first'), true);
    assert.equal(readiness.disable('second'), false);
    assert.match((await readiness.notReadyReason()) ?? '', /request first\)/);
    assert.equal(readiness.enable(), true);
    assert.equal(readiness.enable(), false);
    assert.equal(await readiness.notReadyReason(), null);
  });

  it('does not ask the stores while it is out of service', async () => {
    let asked = 0;
    const readiness = new Readiness(() => false, {
      unavailableReason: async () => {
        asked += 1;
        return null;
      },
    });
    readiness.disable('op');
    await readiness.notReadyReason();
    assert.equal(asked, 0);
  });
});

describe('Readiness, with the store excluded or every check listed', () => {
  const failing = { unavailableReason: async () => 'Redis is unreachable.' };

  it('leaves the store out when excluded, and never asks it', async () => {
    let asked = 0;
    const readiness = new Readiness(() => false, {
      unavailableReason: async () => {
        asked += 1;
        return 'Redis is unreachable.';
      },
    });
    assert.equal(await readiness.notReadyReason(true), null);
    assert.deepEqual(await readiness.checks(true), {
      shutdown: { state: 'ok', reason: null },
      operator: { state: 'ok', reason: null },
      store: { state: 'excluded', reason: null },
    });
    assert.equal(asked, 0);
  });

  it('still counts shutting down and the operator when the store is excluded', async () => {
    let draining = false;
    const readiness = new Readiness(() => draining, failing);
    readiness.disable('op-2');
    assert.match((await readiness.notReadyReason(true)) ?? '', /request op-2\)/);
    draining = true;
    assert.equal(await readiness.notReadyReason(true), 'The service is shutting down.');
  });

  it('lists every check with its state and reason, the failed ones all named', async () => {
    const readiness = new Readiness(() => true, failing);
    readiness.disable('op-3');
    assert.deepEqual(await readiness.checks(), {
      shutdown: { state: 'failed', reason: 'The service is shutting down.' },
      operator: {
        state: 'failed',
        reason: 'Not ready: taken out of service by an operator (POST /readyz/disable, request op-3).',
      },
      store: { state: 'failed', reason: 'Not ready: Redis is unreachable.' },
    });
  });
});
