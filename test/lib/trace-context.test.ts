import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { newSpanId, parseTraceParent, parseTraceState } from '../../src/lib/trace-context.js';
import { INVALID_TRACEPARENTS, PARENT_ID, TRACE_ID, VALID_TRACEPARENT as VALID } from '../tracing/traceparents.js';

describe('parseTraceParent', () => {
  it('reads a version-00 header', () => {
    assert.deepEqual(parseTraceParent(VALID), { traceId: TRACE_ID, parentId: PARENT_ID, flags: 1 });
    assert.deepEqual(parseTraceParent(`00-${TRACE_ID}-${PARENT_ID}-00`), {
      traceId: TRACE_ID,
      parentId: PARENT_ID,
      flags: 0,
    });
  });

  it('reads a later version as version 00, with or without more after it', () => {
    const expected = { traceId: TRACE_ID, parentId: PARENT_ID, flags: 1 };
    assert.deepEqual(parseTraceParent(`cc-${TRACE_ID}-${PARENT_ID}-01`), expected);
    assert.deepEqual(parseTraceParent(`cc-${TRACE_ID}-${PARENT_ID}-01-what-comes-next`), expected);
  });

  for (const [what, header] of INVALID_TRACEPARENTS) {
    it(`ignores ${what}`, () => assert.equal(parseTraceParent(header), null));
  }

  it('ignores an absent header', () => assert.equal(parseTraceParent(undefined), null));

  it('reads exactly the valid version-00 headers among any strings of its shape', () => {
    const hexDigit = fc.constantFrom(...'0123456789abcdefABCDEFg-'.split(''));
    const field = (length: number) => fc.string({ unit: hexDigit, minLength: length - 1, maxLength: length + 1 });
    const header = fc
      .tuple(field(2), field(32), field(16), field(2))
      .map(([version, trace, parent, flags]) => `${version}-${trace}-${parent}-${flags}`);
    fc.assert(
      fc.property(header, (text) => {
        const [version = '', trace = '', parent = '', flags = '', ...rest] = text.split('-');
        const valid =
          rest.length === 0 &&
          /^[0-9a-f]{2}$/.test(version) &&
          version !== 'ff' &&
          /^[0-9a-f]{32}$/.test(trace) &&
          /^[0-9a-f]{16}$/.test(parent) &&
          /^[0-9a-f]{2}$/.test(flags) &&
          /[1-9a-f]/.test(trace) &&
          /[1-9a-f]/.test(parent);
        assert.equal(parseTraceParent(text) !== null, valid, text);
      }),
      { seed: 2929, numRuns: 5000 },
    );
  });
});

describe('parseTraceState', () => {
  it('keeps a valid list, spaces and empty members dropped, as one header', () => {
    assert.equal(parseTraceState('rojo=00f067aa0ba902b7,congo=t61rcWkgMzE'), 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE');
    assert.equal(parseTraceState(' rojo=1 ,, tenant@vendor=a b,'), 'rojo=1,tenant@vendor=a b');
  });

  const invalid: [string, string][] = [
    ['an upper-case key', 'Rojo=1'],
    ['a member without =', 'rojo'],
    ['an empty value', 'rojo='],
    ['a value ending in a space', 'rojo=1 =2'],
    ['a key twice', 'rojo=1,rojo=2'],
    ['33 members', Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(',')],
    ['a value of 257 characters', `rojo=${'x'.repeat(257)}`],
    ['nothing but commas', ', ,'],
  ];
  for (const [what, header] of invalid) {
    it(`discards the whole header for ${what}`, () => assert.equal(parseTraceState(header), undefined));
  }
});

describe('newSpanId', () => {
  it('makes 16 lower-case hex digits, a new one each time', () => {
    const ids = new Set(Array.from({ length: 5000 }, newSpanId));
    assert.equal(ids.size, 5000);
    for (const id of ids) assert.match(id, /^[0-9a-f]{16}$/);
    assert.ok(!ids.has('0'.repeat(16)));
  });
});
