import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acceptedRanges, accepts } from '../../src/lib/accept.js';

test('acceptedRanges: lower case, parameters dropped, q=0 left out, in order', () => {
  assert.deepEqual(acceptedRanges('Application/JSON; charset=utf-8, text/*;q=0, */*;q=0.1'), [
    'application/json',
    '*/*',
  ]);
});

test('accepts: no Accept (or an empty one), the type itself, its type/*, or */*', () => {
  assert.equal(accepts(undefined, 'text/event-stream'), true);
  assert.equal(accepts(' ', 'text/event-stream'), true);
  for (const accept of [
    'text/event-stream',
    'TEXT/Event-Stream;q=0.5',
    'text/*',
    '*/*',
    'application/json, */*;q=0.1',
  ]) {
    assert.equal(accepts(accept, 'text/event-stream'), true, accept);
  }
});

test('accepts: other types, q=0, and a more specific q=0 over a wildcard are refused', () => {
  for (const accept of [
    'application/json',
    'application/vnd.greeting.v1+json',
    'text/html',
    'text/event-stream;q=0',
    'text/event-stream;q=0, */*',
    'text/*;q=0, */*',
  ]) {
    assert.equal(accepts(accept, 'text/event-stream'), false, accept);
  }
});
