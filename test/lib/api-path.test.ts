import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { apiBase, apiPathTest } from '../../src/lib/api-path.js';
import { spelledPath } from '../fuzz/arbitraries.js';

/** How a request target may carry a path: as it is, in absolute form, with a query or a fragment. */
const target = (path: fc.Arbitrary<string>) =>
  fc
    .tuple(
      fc.constantFrom('', 'http://localhost', 'HTTPS://example.com:8443'),
      path,
      fc.constantFrom('', '?version=1', '?x=/api/y', '#frag', '?a#b'),
    )
    // An absolute-form target with a fragment is refused by the router, but read as its path.
    .map(([origin, p, rest]) => `${origin}${p}${rest}`);

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
    assert.equal(isApi('/%73vc/%61pi/hello'), true);
    assert.equal(isApi('/api/hello'), false);
  });

  it('reads a path as the router does: escapes decoded, absolute form and fragment taken off', () => {
    const isApi = apiPathTest('/');
    for (const url of [
      '/%61pi/nope',
      '/%61%70%69',
      '/%61pi/',
      '/%61pi?version=2',
      '/api#x',
      '/%61pi#x',
      'http://h/api/nope',
      'HTTP://h/%61pi/nope',
      'https://h:8/api',
      // As their paths would be (`/api/%ZZ`, `/api#x`), though the router refuses them.
      'http://h/api/%ZZ',
      'http://localhost/api/hello?%=#frag',
      'http://h/api#x',
    ]) {
      assert.equal(isApi(url), true, url);
    }
    // The router matches these against no /api route: another case, a double slash, an escaped slash
    // or an escaped `%` (decoded once only), a badly encoded path, a scheme other than HTTP's.
    for (const url of [
      '/API/nope',
      '/%41PI/nope',
      '//api/nope',
      '/api%2Fnope',
      '/%2fapi/nope',
      '/%2561pi/nope',
      '/%61pi%ZZ',
      '/%ZZ/api',
      'ftp://h/api/x',
      '*',
    ]) {
      assert.equal(isApi(url), false, url);
    }
  });

  it('says yes to every spelling of a path under /api, and no to every spelling of one outside', () => {
    const isApi = apiPathTest('/svc');
    const inside = fc.constantFrom('/svc/api', '/svc/api/', '/svc/api/hello', '/svc/api/v1/x/', '/svc/api/a.b~c-d_e');
    const outside = fc.constantFrom('/svc/apis', '/svc/ap', '/svc/API/x', '/svc', '/api/hello', '/svc/x/api/y', '/');
    fc.assert(
      fc.property(target(inside.chain(spelledPath)), (url) => isApi(url)),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(target(outside.chain(spelledPath)), (url) => !isApi(url)),
      { numRuns: 2000 },
    );
  });
});
