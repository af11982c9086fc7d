import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Decimal } from '../../src/lib/decimal.js';
import { compactJson, deepJson, exactJson, jsonString } from '../../src/lib/json-text.js';

describe('exactJson', () => {
  it('writes decimals as exact JSON numbers in plain notation', () => {
    const text = exactJson({
      big: new Decimal('80484237894052649'),
      huge: new Decimal('1e21'),
      tiny: new Decimal('0.0000000001'),
      long: new Decimal('999999999999.9999999999'),
      trailing: new Decimal('92.00'),
      zero: new Decimal('0'),
      negative: new Decimal('-1.5'),
    });
    assert.equal(
      text,
      '{"big":80484237894052649,"huge":1000000000000000000000,"tiny":0.0000000001,' +
        '"long":999999999999.9999999999,"trailing":92,"zero":0,"negative":-1.5}',
    );
  });

  it('writes everything else as JSON.stringify does, in key order', () => {
    const value = { s: 'é "q" \\ \n', n: 1.5, t: true, f: false, z: null, a: [1, 'x', [null]], o: { b: 1, a: 2 } };
    assert.equal(exactJson(value), JSON.stringify(value));
    assert.equal(exactJson({ skipped: undefined, kept: 1 }), '{"kept":1}');
    assert.equal(exactJson([undefined]), '[null]');
    fc.assert(fc.property(fc.jsonValue(), (json) => assert.equal(exactJson(json), JSON.stringify(json))));
  });

  it('refuses what JSON cannot hold', () => {
    assert.throws(() => exactJson({ x: new Decimal(Number.NaN) }), RangeError);
    assert.throws(() => exactJson(new Decimal(Number.POSITIVE_INFINITY)), RangeError);
  });
});

describe('deepJson', () => {
  it('writes plain data as JSON.stringify does', () => {
    assert.equal(deepJson({ skipped: undefined, a: [undefined, 'é\ud800'] }), '{"a":[null,"é\\ud800"]}');
    fc.assert(fc.property(fc.jsonValue(), (json) => assert.equal(deepJson(json), JSON.stringify(json))));
  });

  it('writes values nested deeper than JSON.stringify can go, in key order', () => {
    const depth = 200_000;
    const text = `{"b":${'[{"k":'.repeat(depth)}[1,"x",null,{}]${'}]'.repeat(depth)},"a":{"c":true}}`;
    assert.throws(() => JSON.stringify(JSON.parse(text)), RangeError);
    assert.equal(deepJson(JSON.parse(text)), text);
  });
});

describe('jsonString', () => {
  it('writes every string exactly as JSON.stringify does', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.string({ unit: 'grapheme' })), (text) => {
        assert.equal(jsonString(text), JSON.stringify(text));
      }),
      { numRuns: 2000 },
    );
    for (const text of ['', '"', '\\', '\u0000', '\u001f', '\u007f', '\ud800', '\udc00x', '😀', '/api/hello?a=b']) {
      assert.equal(jsonString(text), JSON.stringify(text), JSON.stringify(text));
    }
  });
});

describe('compactJson', () => {
  it('keeps strings as written, however many backslashes come before a quote', () => {
    const text = '{ "a\\\\" : "b\\\\\\"c" ,\n "d\\"" : [ 1 , "\\\\\\\\" ] }';
    assert.equal(compactJson(text), '{"a\\\\":"b\\\\\\"c","d\\"":[1,"\\\\\\\\"]}');
    assert.deepEqual(JSON.parse(compactJson(text)), JSON.parse(text));
  });

  it('ends on a string that never closes, which valid JSON never has', () => {
    assert.equal(compactJson('[ "a\\"'), '["a\\"');
  });
});
