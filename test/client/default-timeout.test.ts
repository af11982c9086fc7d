import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createClient, TimeoutError } from '../../packages/client/src/index.js';
import { rejection } from '../helpers.js';

// A file of its own: its clock is mocked, which would run the timers of any connection the
// platform's fetch keeps open (undici's, in another test of the same process) before their time.
describe('the default timeout', () => {
  it("is 10 s, as ky's", { timeout: 10_000 }, async (t) => {
    let sent!: () => void;
    const fetched = new Promise<void>((resolve) => {
      sent = resolve;
    });
    // A fetch that answers only its signal, as the platform's does when nothing comes.
    const never: typeof fetch = (_input, init) =>
      new Promise((_resolve, reject) => {
        init?.signal?.addEventListener('abort', () => reject(init.signal?.reason));
        sent();
      });
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const call = createClient({ baseUrl: 'http://127.0.0.1:8080', fetch: never }).hello();
    let settled = false;
    call
      .catch(() => {})
      .finally(() => {
        settled = true;
      });
    await fetched;
    t.mock.timers.tick(9_999);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(settled, false);
    t.mock.timers.tick(1);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(settled, true, 'the call ended at 10 s');
    const error = await rejection(call, TimeoutError);
    assert.equal(error.message, 'GET http://127.0.0.1:8080/api/hello timed out after 10000 ms');
  });
});
