import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { compactJson } from '../../src/lib/json-text.js';
import { assertEnvelope, assertLocalNow, type Client, type TestResponse, transports } from '../helpers.js';

const JSON_TYPE = { 'content-type': 'application/json' };

/**
 * Asserts a 200 echo whose `received` is exactly `expected` as JSON text: the response is
 * compared as text, so every digit, escape, key and key order counts.
 */
function assertEchoed(res: TestResponse, expected: string): void {
  assert.equal(res.status, 200, res.text);
  assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
  const prefix = `{"received":${expected},"echo":true,"timestamp":"`;
  assert.ok(res.text.startsWith(prefix), `${res.text.slice(0, 200)} starts with ${prefix.slice(0, 200)}`);
  assert.ok(res.text.endsWith('"}'));
  const body = res.json();
  assert.deepEqual(Object.keys(body), ['received', 'echo', 'timestamp']);
  assertLocalNow(body.timestamp);
}

for (const [transport, connect] of transports) {
  describe(`POST /api/echo (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect({ bodyLimit: 1024 * 1024 });
    });
    after(() => client.close());

    function echo(body: string | Buffer, headers: Record<string, string> = JSON_TYPE) {
      return client.send({ method: 'POST', path: '/api/echo', headers, body });
    }

    const lossless: [string, string][] = [
      ['an empty object', '{}'],
      ['a big integer', '{"n":12345678901234567890}'],
      ['a long decimal', '{"n":0.1000000000000000000001}'],
      ['numbers in every form', '{"a":-0,"b":1.0,"c":1e400,"d":-1.5E-7,"e":100,"f":9007199254740993}'],
      ['prototype-pollution keys as plain data', '{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}}}'],
      ['key order', '{"z":1,"a":2,"m":{"y":1,"b":2},"1":3,"0":4}'],
      ['repeated keys', '{"a":1,"a":2}'],
      ['Unicode and escapes', '{"s":"é 世界 😀 \\u00e9 \\ud83d\\ude00 \\" \\\\ \\/ \\n\\t","é":"key"}'],
      ['a lone surrogate escape', '{"s":"\\ud800"}'],
      ['every JSON type', '{"s":"x","n":1,"t":true,"f":false,"z":null,"a":[1,"2",[3]],"o":{"k":{}}}'],
    ];
    for (const [label, body] of lossless) {
      it(`echoes ${label} exactly`, async () => {
        assertEchoed(await echo(body), body);
      });
    }

    it('drops only the whitespace between tokens', async () => {
      const body = '\r\n {\t"a" : [ 1 , "x  y" ] ,\n "b":{ } }  ';
      assertEchoed(await echo(body), '{"a":[1,"x  y"],"b":{}}');
    });

    it('echoes deep nesting without a 500', async () => {
      const depth = 100_000;
      const body = `{"a":${'['.repeat(depth)}${']'.repeat(depth)}}`;
      assertEchoed(await echo(body), body);
      const objects = `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
      assertEchoed(await echo(objects), objects);
    });

    it('echoes a body just under the limit', async () => {
      const body = `{"s":"${'x'.repeat(1024 * 1024 - 8)}"}`;
      assert.equal(Buffer.byteLength(body), 1024 * 1024);
      assertEchoed(await echo(body), body);
    });

    it('accepts application/*+json and a UTF-8 charset', async () => {
      for (const type of [
        'application/merge-patch+json',
        'application/json; charset=utf-8',
        'Application/JSON; Charset="UTF-8"',
      ]) {
        assertEchoed(await echo('{"a":1}', { 'content-type': type }), '{"a":1}');
      }
    });

    it('leaves Object.prototype untouched', async () => {
      await echo('{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}');
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
    });

    for (const [label, body] of [
      ['an array', '[1,2]'],
      ['a string', '"text"'],
      ['a number', '42'],
      ['true', 'true'],
    ] as const) {
      it(`rejects ${label} as the body`, async () => {
        assertEnvelope(await echo(body), 400, 'VALIDATION_ERROR', [
          { field: 'body', message: 'must be a JSON object', value: JSON.parse(body) },
        ]);
      });
    }

    it('rejects null, an empty body and no body', async () => {
      const missing = [{ field: 'body', message: 'must be a JSON object', value: null }];
      assertEnvelope(await echo('null'), 400, 'VALIDATION_ERROR', missing);
      assertEnvelope(await echo(''), 400, 'VALIDATION_ERROR', missing);
      assertEnvelope(await client.send({ method: 'POST', path: '/api/echo' }), 400, 'VALIDATION_ERROR', missing);
    });

    for (const body of ['{"a":', '{a:1}', "{'a':1}", '{"a":1,}', '{"a":1}x', ' ', '\uFEFF{}', '{"a":NaN}']) {
      it(`rejects malformed JSON ${JSON.stringify(body)}`, async () => {
        const error = assertEnvelope(await echo(body), 400, 'MALFORMED_JSON');
        assert.match(error.message, /^The request body is not valid JSON/);
      });
    }

    it('rejects a body that is not UTF-8', async () => {
      const error = assertEnvelope(
        await echo(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d])),
        400,
        'MALFORMED_JSON',
      );
      assert.equal(error.message, 'The request body is not valid UTF-8.');
    });

    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/jsonx',
    ]) {
      it(`rejects Content-Type ${type}`, async () => {
        const error = assertEnvelope(await echo('{}', { 'content-type': type }), 415, 'UNSUPPORTED_MEDIA_TYPE');
        assert.equal(error.message, `The request body must be application/json, not ${type}.`);
      });
    }

    it('rejects a body without a Content-Type, or with an empty one', async () => {
      for (const headers of [{}, { 'content-type': '' }, { 'content-type': ' ' }] as Record<string, string>[]) {
        const error = assertEnvelope(await echo('{}', headers), 415, 'UNSUPPORTED_MEDIA_TYPE');
        assert.equal(error.message, 'A request body needs Content-Type: application/json.', JSON.stringify(headers));
      }
    });

    it('rejects a charset other than UTF-8', async () => {
      const error = assertEnvelope(
        await echo('{}', { 'content-type': 'application/json; charset=latin1' }),
        415,
        'UNSUPPORTED_MEDIA_TYPE',
      );
      assert.equal(error.message, 'The charset latin1 is not supported; JSON bodies must be UTF-8.');
    });

    it('reads a body under an empty Content-Encoding as it came: a list with no element names no coding', async () => {
      assertEchoed(await echo('{"a":1}', { 'content-type': 'application/json', 'content-encoding': '' }), '{"a":1}');
    });

    it('rejects a body over the limit', async () => {
      const body = `{"s":"${'x'.repeat(1024 * 1024 - 7)}"}`;
      const error = assertEnvelope(await echo(body), 413, 'PAYLOAD_TOO_LARGE');
      assert.equal(error.message, 'The request body is larger than the limit of 1048576 bytes.');
    });

    it('answers other methods with 405 and Allow: POST', async () => {
      for (const method of ['GET', 'PUT', 'PATCH', 'DELETE']) {
        const res = await client.send({ method, path: '/api/echo' });
        assertEnvelope(res, 405, 'METHOD_NOT_ALLOWED');
        assert.equal(res.headers.allow, 'POST');
      }
    });
  });
}

describe('POST /api/echo, property: any JSON object comes back as sent', () => {
  let client: Client;
  before(async () => {
    client = await transports[0][1]();
  });
  after(() => client.close());

  it('round-trips generated objects, pretty-printed or not, to their compact text', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(fc.string({ unit: 'binary' }), fc.jsonValue()),
        fc.nat(4),
        async (object, indent) => {
          const body = JSON.stringify(object, null, indent);
          const res = await client.send({ method: 'POST', path: '/api/echo', headers: JSON_TYPE, body });
          assertEchoed(res, JSON.stringify(object));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('compacts any JSON text to the same value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.nat(4), (value, indent) => {
        assert.equal(compactJson(JSON.stringify(value, null, indent)), JSON.stringify(value));
      }),
    );
  });
});
