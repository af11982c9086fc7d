import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { signToken, verifyToken } from '../../src/lib/signed-token.js';

const KEY = 'k'.repeat(32);
const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

describe('signed tokens', () => {
  it('give back the text they carry, with the key they were signed with', () => {
    fc.assert(fc.property(fc.string(), (text) => assert.equal(verifyToken(signToken(text, KEY), KEY), text)));
    const token = signToken('{"a":1}', KEY);
    assert.match(token, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
  });

  it('refuse a token signed with another key', () => {
    assert.equal(verifyToken(signToken('x', 'another key'), KEY), undefined);
  });

  it('refuse a token altered in any one character', () => {
    const token = signToken('{"query":"abc","after":[2,"Euro","EUR"]}', KEY);
    for (let i = 0; i < token.length; i++) {
      for (const replacement of [...BASE64URL, '.', '=', '%']) {
        if (replacement === token[i]) continue;
        const altered = token.slice(0, i) + replacement + token.slice(i + 1);
        assert.equal(verifyToken(altered, KEY), undefined, altered);
      }
    }
  });

  it('refuse anything added or removed', () => {
    const token = signToken('text', KEY);
    for (const altered of [`${token}A`, `${token}=`, `A${token}`, token.slice(1), token.slice(0, -1), `${token}.x`]) {
      assert.equal(verifyToken(altered, KEY), undefined, altered);
    }
    for (const junk of ['', '.', 'abc', 'a.b', `.${token.split('.')[1]}`])
      assert.equal(verifyToken(junk, KEY), undefined);
  });
});
