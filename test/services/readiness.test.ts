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
