import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { apiBase, apiPathTest } from '../../src/lib/api-path.js';

describe('apiPathTest', () => {
  it('matches /api and everything under it, query or not', () => {
    const isApi = apiPathTest('/');
    for (const url of ['/api', '/api/', '/api/hello', '/api?version=1', '/api/v1/hello?x=/y']) {
      assert.equal(isApi(url), true, url);
    }
    for (const url of ['/', '/apis', '/apiary/x', '/healthz', '/x/api', '/healthz?u=/api/x']) {
      assert.equal(isApi(url), false, url);
    }
  });

  it('puts /api under the context path', () => {
    assert.equal(apiBase('/svc'), '/svc/api');
    const isApi = apiPathTest('/svc');
    assert.equal(isApi('/svc/api/hello'), true);
    assert.equal(isApi('/api/hello'), false);
  });
});
