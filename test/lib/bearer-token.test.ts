import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bearerToken, sameSecret } from '../../src/lib/bearer-token.js';

describe('bearerToken', () => {
  it("reads the token of the Bearer scheme, in the scheme's any case", () => {
    assert.equal(bearerToken('Bearer abc.DEF-123_~+/=='), 'abc.DEF-123_~+/==');
    assert.equal(bearerToken('bearer abc'), 'abc');
    assert.equal(bearerToken('BEARER   abc '), 'abc');
  });

  it('reads no token from another scheme, an absent header, or a bearer without one', () => {
    for (const header of [undefined, '', 'Basic YTpi', 'Bearer', 'Bearer ', 'Bearerabc', 'Bearer a b', 'Token abc']) {
      assert.equal(bearerToken(header), null, JSON.stringify(header));
    }
  });
});

describe('sameSecret', () => {
  it('is true for the secret only, whatever the length of what was sent', () => {
    const secret = 'c3dpdGNoLXRva2VuLWZvci10ZXN0cw==';
    assert.equal(sameSecret(secret, secret), true);
    for (const given of ['', 'c', secret.slice(0, -1), `${secret}=`, secret.toUpperCase(), 'x'.repeat(10_000)]) {
      assert.equal(sameSecret(given, secret), false, given.slice(0, 40));
    }
  });
});
