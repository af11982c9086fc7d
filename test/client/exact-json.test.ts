import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { JsonNumber, parseExactJson, stringifyExactJson } from '../../packages/client/src/exact-json.js';

describe('parseExactJson and stringifyExactJson', () => {
  it('write back every JSON text they read, byte for byte once compact', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const compact = JSON.stringify(value);
        assert.equal(stringifyExactJson(parseExactJson(JSON.stringify(value, null, 2))), compact);
      }),
      { numRuns: 500 },
    );
  });

  it('read what JSON.parse reads, numbers aside, and refuse what it refuses', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.json(),
          fc.string(),
          fc.json().map((text) => text.slice(0, -1)),
        ),
        (text) => {
          let expected: unknown;
          try {
            expected = JSON.parse(text);
          } catch {
            assert.throws(() => parseExactJson(text), SyntaxError, text);
            return;
          }
          const exact = parseExactJson(text);
          assert.deepEqual(JSON.parse(JSON.stringify(exact)), expected);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('keep every digit of numbers a double cannot hold', () => {
    const text = '{"big":12345678901234567890,"long":0.1000000000000000000001,"exp":-1.5E+400,"small":2}';
    const value = parseExactJson(text) as Record<string, JsonNumber>;
    assert.ok(value.big instanceof JsonNumber);
    assert.equal(value.big.text, '12345678901234567890');
    assert.equal(BigInt(value.big.text), 12345678901234567890n);
    assert.equal(value.long?.text, '0.1000000000000000000001');
    assert.equal(Number(value.small), 2);
    assert.equal(stringifyExactJson(value), text);
  });

  it('keep __proto__ as an own key, key order and the last of repeated keys, as JSON.parse does', () => {
    const value = parseExactJson('{"b":1,"__proto__":{"polluted":true},"a":2,"b":3}') as Record<string, unknown>;
    assert.deepEqual(Object.keys(value), ['b', '__proto__', 'a']);
    assert.equal(Object.getPrototypeOf(value), Object.prototype);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.equal(stringifyExactJson(value as never), '{"b":3,"__proto__":{"polluted":true},"a":2}');
  });

  it('read and write values nested 100,000 deep', () => {
    const depth = 100_000;
    const text = `${'[{"a":'.repeat(depth)}1${'}]'.repeat(depth)}`;
    assert.equal(stringifyExactJson(parseExactJson(text)), text);
  });

  it('write bigints as their digits and refuse numbers JSON has not', () => {
    assert.equal(
      stringifyExactJson({ n: 2n ** 70n, x: undefined, list: [1, 'a', null] }),
      '{"n":1180591620717411303424,"list":[1,"a",null]}',
    );
    assert.throws(() => stringifyExactJson([Number.NaN]), RangeError);
    assert.throws(() => new JsonNumber('+1'), SyntaxError);
    assert.throws(() => new JsonNumber('01'), SyntaxError);
  });
});
