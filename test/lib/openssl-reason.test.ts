import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSecureContext } from 'node:tls';
import { opensslReason } from '../../src/lib/openssl-reason.js';

describe('opensslReason', () => {
  it("keeps what OpenSSL said, without Node's code and library", () => {
    assert.equal(opensslReason(new Error('error:0A00018F:SSL routines::ee key too small')), 'ee key too small');
    assert.equal(opensslReason(new Error('error:1E08010C:DECODER routines::unsupported')), 'unsupported');
  });

  it('leaves any other message as it is', () => {
    assert.equal(opensslReason(new Error('error: something else')), 'error: something else');
  });

  it("reads a refusal of Node's own TLS context", () => {
    let thrown: unknown;
    try {
      createSecureContext({ cert: 'no certificate', key: 'no key' });
    } catch (error) {
      thrown = error;
    }
    assert.match((thrown as Error).message, /^error:/);
    assert.equal(opensslReason(thrown), 'no start line');
  });
});
