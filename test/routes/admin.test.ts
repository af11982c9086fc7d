import assert from 'node:assert/strict';
import { once } from 'node:events';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { FrameType, headersFrame, RawH2, requestFields } from '../h2-frames.js';
import {
  assertEnvelope,
  type Client,
  injectClient,
  type ListeningApp,
  LogCapture,
  listening,
  sendTo,
  transports,
} from '../helpers.js';
import { connectTo, ResponseReader } from '../raw-http.js';

/**
 * The operator's readiness switch: POST /readyz/disable and /readyz/enable with the bearer token
 * of ADMIN_TOKEN_FILE. Every answer is also checked against the app's OpenAPI document.
 */

const TOKEN = 'c3dpdGNoLXRva2VuLWZvci10ZXN0cw==';
const dir = mkdtempSync(join(tmpdir(), 'greeting-admin-'));
after(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
/** A token file of its own for each app, holding `token` and a newline. */
function tokenFile(token = TOKEN): string {
  const path = join(dir, `token-${files++}`);
  writeFileSync(path, `${token}\n`);
  return path;
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

for (const [transport, connect] of transports) {
  describe(`the readiness switch (${transport})`, () => {
    let client: Client;
    let log: LogCapture;
    before(async () => {
      log = new LogCapture();
      client = await connect({ adminTokenFile: tokenFile(), logLevel: 'info' }, { logStream: log });
    });
    after(() => client.close());

    it('without a token: 401 UNAUTHORIZED, WWW-Authenticate: Bearer, and nothing changes', async () => {
      for (const path of ['/readyz/disable', '/readyz/enable']) {
        const res = await client.send({ method: 'POST', path });
        const error = assertEnvelope(res, 401, 'UNAUTHORIZED');
        assert.equal(error.message, "This needs the operator's bearer token: Authorization: Bearer <token>.");
        assert.equal(res.headers['www-authenticate'], 'Bearer');
      }
      // Another scheme, or a bearer without its token, is no token either.
      for (const authorization of [`Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}`, 'Bearer', 'Bearer ']) {
        const res = await client.send({ method: 'POST', path: '/readyz/disable', headers: { authorization } });
        assertEnvelope(res, 401, 'UNAUTHORIZED');
        assert.equal(res.headers['www-authenticate'], 'Bearer', authorization);
      }
      assert.equal((await client.send({ path: '/readyz' })).status, 200);
    });

    it('without the token, 401 whatever else is wrong with the request; with it, the request is read as any other', async () => {
      const json = { 'content-type': 'application/json' };
      const attempts: { name: string; headers: Record<string, string>; body?: string | Buffer }[] = [
        { name: 'malformed JSON', headers: json, body: '{"enable":' },
        { name: 'a text/plain body', headers: { 'content-type': 'text/plain' }, body: 'enable' },
        { name: 'a body over BODY_LIMIT', headers: json, body: Buffer.alloc(2 * 1024 * 1024, 0x20) },
        { name: 'a body in Latin-1', headers: { 'content-type': 'application/json; charset=iso-8859-1' }, body: '{}' },
      ];
      for (const { name, headers, body } of attempts) {
        for (const [sent, wwwAuthenticate] of [
          [{}, 'Bearer'],
          [bearer('wrong'), 'Bearer error="invalid_token"'],
        ] as const) {
          const res = await client.send({
            method: 'POST',
            path: '/readyz/disable',
            headers: { ...headers, ...sent },
            body,
          });
          assertEnvelope(res, 401, 'UNAUTHORIZED');
          assert.equal(res.headers['www-authenticate'], wwwAuthenticate, name);
        }
      }
      assert.equal((await client.send({ path: '/readyz' })).status, 200);
      const malformed = attempts[0] as (typeof attempts)[number];
      const withToken = await client.send({
        method: 'POST',
        path: '/readyz/enable',
        headers: { ...malformed.headers, ...bearer(TOKEN) },
        body: malformed.body,
      });
      assertEnvelope(withToken, 400, 'MALFORMED_JSON');
    });

    it('with a wrong token: 401, error="invalid_token", and nothing changes', async () => {
      for (const token of ['wrong', `${TOKEN}x`, TOKEN.slice(0, -1), TOKEN.toLowerCase()]) {
        const res = await client.send({ method: 'POST', path: '/readyz/disable', headers: bearer(token) });
        const error = assertEnvelope(res, 401, 'UNAUTHORIZED');
        assert.equal(error.message, 'The bearer token is not the right one.');
        assert.equal(res.headers['www-authenticate'], 'Bearer error="invalid_token"');
      }
      assert.deepEqual((await client.send({ path: '/readyz' })).json(), { status: 'ready' });
    });

    it('with the token: 204; /readyz 503 naming the request, /healthz and the API still served', async () => {
      const res = await client.send({
        method: 'POST',
        path: '/readyz/disable',
        headers: { ...bearer(TOKEN), 'x-request-id': 'drain-rehearsal-1' },
      });
      assert.equal(res.status, 204);
      assert.equal(res.text, '');
      assert.equal(res.headers['x-request-id'], 'drain-rehearsal-1');
      const ready = await client.send({ path: '/readyz' });
      const error = assertEnvelope(ready, 503, 'SERVICE_UNAVAILABLE');
      assert.equal(
        error.message,
        'Not ready: taken out of service by an operator (POST /readyz/disable, request drain-rehearsal-1).',
      );
      assert.deepEqual((await client.send({ path: '/healthz' })).json(), { status: 'ok' });
      assert.deepEqual((await client.send({ path: '/api/hello/Ada' })).json(), { greeting: 'Hello, Ada!' });
      // Again: 204, and still the first request named.
      const again = await client.send({ method: 'POST', path: '/readyz/disable', headers: bearer(TOKEN) });
      assert.equal(again.status, 204);
      assert.match((await client.send({ path: '/readyz' })).json().error.message, /request drain-rehearsal-1\)/);
    });

    it('the log says who took it out and who put it back, once each', async () => {
      const res = await client.send({
        method: 'POST',
        path: '/readyz/enable',
        headers: { ...bearer(TOKEN), 'x-request-id': 'drain-rehearsal-2' },
      });
      assert.equal(res.status, 204);
      assert.deepEqual((await client.send({ path: '/readyz' })).json(), { status: 'ready' });
      assert.equal((await client.send({ method: 'POST', path: '/readyz/enable', headers: bearer(TOKEN) })).status, 204);
      const switched = log.lines.filter((line) => /by an operator/.test(String(line.msg)));
      assert.deepEqual(
        switched.map(({ level, request_id, msg }) => ({ level, request_id, msg })),
        [
          {
            level: 40,
            request_id: 'drain-rehearsal-1',
            msg: 'taken out of service by an operator: /readyz answers 503 until POST /readyz/enable',
          },
          { level: 30, request_id: 'drain-rehearsal-2', msg: 'put back in service by an operator' },
        ],
      );
    });

    it('is neither rate-limited nor versioned', async () => {
      const res = await client.send({ method: 'POST', path: '/readyz/enable', headers: bearer(TOKEN) });
      for (const name of ['ratelimit-limit', 'ratelimit-remaining', 'api-version']) {
        assert.equal(res.headers[name], undefined, name);
      }
      assert.equal(res.headers['x-content-type-options'], 'nosniff');
      const versioned = await client.send({ method: 'POST', path: '/api/v1/readyz/disable', headers: bearer(TOKEN) });
      assert.equal(versioned.status, 404);
    });

    it('takes POST only: another method is a 405 naming it', async () => {
      const res = await client.send({ path: '/readyz/disable', headers: bearer(TOKEN) });
      assertEnvelope(res, 405, 'METHOD_NOT_ALLOWED');
      assert.equal(res.headers.allow, 'POST');
    });
  });
}

describe('the readiness switch: where it is served', () => {
  it('without ADMIN_TOKEN_FILE: the paths are 404, and the document has neither them nor a security scheme', async () => {
    const client = await injectClient();
    try {
      for (const path of ['/readyz/disable', '/readyz/enable']) {
        assertEnvelope(await client.send({ method: 'POST', path, headers: bearer(TOKEN) }), 404, 'NOT_FOUND');
      }
      const doc = (await client.send({ path: '/openapi.json' })).json();
      assert.equal(doc.paths['/readyz/disable'], undefined);
      assert.equal(doc.components.securitySchemes, undefined);
      assert.deepEqual(doc.security, []);
    } finally {
      await client.close();
    }
  });

  it('with it: both operations, under the bearer scheme, in the document; the rest of the API stays open', async () => {
    const client = await injectClient({ adminTokenFile: tokenFile() });
    try {
      const doc = (await client.send({ path: '/openapi.json' })).json();
      assert.deepEqual(doc.components.securitySchemes, {
        operatorToken: {
          type: 'http',
          scheme: 'bearer',
          description:
            'The operator’s token, the content of the file `ADMIN_TOKEN_FILE` names: `Authorization: Bearer <token>`.',
        },
      });
      for (const [path, operationId] of [
        ['/readyz/disable', 'disableReadiness'],
        ['/readyz/enable', 'enableReadiness'],
      ] as const) {
        const operation = doc.paths[path].post;
        assert.equal(operation.operationId, operationId);
        assert.deepEqual(operation.security, [{ operatorToken: [] }]);
        assert.deepEqual(Object.keys(operation.responses).sort(), [
          '204',
          '400',
          '401',
          '404',
          '405',
          '408',
          '413',
          '415',
          '417',
          '431',
          '500',
          '501',
          '505',
        ]);
        assert.equal(operation.responses['401'].headers['WWW-Authenticate'].required, true);
        assert.equal(
          operation.parameters?.some((p: { name: string }) => p.name.toLowerCase() === 'authorization'),
          undefined,
        );
      }
      assert.deepEqual(doc.security, []);
      assert.equal(doc.paths['/api/v1/hello'].get.security, undefined);
    } finally {
      await client.close();
    }
  });
});

describe('the readiness switch: the token file', () => {
  it('is read again at each request: a rotated token is taken, the old one refused', async () => {
    const file = tokenFile();
    const client = await injectClient({ adminTokenFile: file });
    try {
      assert.equal((await client.send({ method: 'POST', path: '/readyz/enable', headers: bearer(TOKEN) })).status, 204);
      const rotated = 'cm90YXRlZC10b2tlbi1mb3ItdGVzdHM=';
      writeFileSync(file, `${rotated}\n`);
      assertEnvelope(
        await client.send({ method: 'POST', path: '/readyz/enable', headers: bearer(TOKEN) }),
        401,
        'UNAUTHORIZED',
      );
      assert.equal(
        (await client.send({ method: 'POST', path: '/readyz/enable', headers: bearer(rotated) })).status,
        204,
      );
    } finally {
      await client.close();
    }
  });

  it('keeps the token read last while the file cannot be read or holds no token, with one warning per cause', async () => {
    const file = tokenFile();
    const log = new LogCapture();
    const client = await injectClient({ adminTokenFile: file, logLevel: 'warn' }, { logStream: log });
    try {
      writeFileSync(file, '\n');
      for (let i = 0; i < 3; i++) {
        assert.equal(
          (await client.send({ method: 'POST', path: '/readyz/enable', headers: bearer(TOKEN) })).status,
          204,
        );
      }
      rmSync(file);
      assert.equal((await client.send({ method: 'POST', path: '/readyz/enable', headers: bearer(TOKEN) })).status, 204);
      assertEnvelope(
        await client.send({ method: 'POST', path: '/readyz/enable', headers: bearer('wrong') }),
        401,
        'UNAUTHORIZED',
      );
      assert.deepEqual(
        log.lines.map(({ level, file: named, reason, msg }) => ({ level, file: named, reason, msg })),
        [
          { level: 40, file, reason: 'is empty', msg: 'ADMIN_TOKEN_FILE: the token read last is used' },
          { level: 40, file, reason: 'cannot be read (ENOENT)', msg: 'ADMIN_TOKEN_FILE: the token read last is used' },
        ],
      );
      writeFileSync(file, `${TOKEN}\n`);
      chmodSync(file, 0o600);
      assert.equal((await client.send({ method: 'POST', path: '/readyz/enable', headers: bearer(TOKEN) })).status, 204);
    } finally {
      await client.close();
    }
  });
});

describe('the readiness switch: Authorization given twice, over HTTP/1.1 and h2c alike', () => {
  let server: ListeningApp;
  before(async () => {
    server = await listening({ http2: true, adminTokenFile: tokenFile() });
  });
  after(() => server.app.close());

  const pairs = [
    ['the token twice', TOKEN, TOKEN],
    ['the token, then a wrong one', TOKEN, 'wrong'],
    ['a wrong one, then the token', 'wrong', TOKEN],
  ] as const;

  it('HTTP/1.1: 401, Authorization must be given once, and nothing changes', async () => {
    for (const [what, first, second] of pairs) {
      const socket = await connectTo(server.port);
      try {
        const reader = new ResponseReader(socket);
        socket.write(
          `POST /readyz/disable HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${first}\r\nAuthorization: Bearer ${second}\r\n\r\n`,
        );
        const res = await reader.next();
        assert.equal(res.status, 401, what);
        assert.equal(res.headers['www-authenticate'], 'Bearer', what);
        assert.equal(
          res.json().error.message,
          'Authorization must be given once: Authorization: Bearer <token>.',
          what,
        );
      } finally {
        socket.destroy();
      }
    }
    assert.deepEqual((await sendTo(server.origin, { path: '/readyz' })).json(), { status: 'ready' });
  });

  it('h2c: 401, Authorization must be given once, and nothing changes', async () => {
    for (const [what, first, second] of pairs) {
      const raw = await RawH2.open(server.port);
      try {
        const id = `twice-${pairs.findIndex(([named]) => named === what)}`;
        await raw.write(
          headersFrame(
            1,
            requestFields('/readyz/disable', 'POST', [
              ['authorization', `Bearer ${first}`],
              ['authorization', `Bearer ${second}`],
              ['x-request-id', id],
            ]),
          ),
        );
        const data = await raw.waitFor((f) => f.type === FrameType.DATA && f.streamId === 1 && f.payload.length > 0);
        assert.ok(data !== undefined, what);
        const { error } = JSON.parse(data.payload.toString('utf8'));
        assert.equal(error.code, 'UNAUTHORIZED', what);
        assert.equal(error.message, 'Authorization must be given once: Authorization: Bearer <token>.', what);
        for (let i = 0; i < 100 && !server.logs.lines.some((line) => line.request_id === id); i++) await sleep(20);
        assert.equal(server.logs.lineOf(id).status, 401, what);
      } finally {
        raw.destroy();
      }
    }
    assert.deepEqual((await sendTo(server.origin, { path: '/readyz' })).json(), { status: 'ready' });
  });
});

describe('the readiness switch: Expect: 100-continue, over HTTP/1.1 and h2c alike', () => {
  let server: ListeningApp;
  before(async () => {
    server = await listening({ http2: true, adminTokenFile: tokenFile() });
  });
  after(() => server.app.close());

  const head = (authorization: string) =>
    `POST /readyz/enable HTTP/1.1\r\nHost: x\r\n${authorization}Expect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n`;

  it('HTTP/1.1: without the token, the 401 and no 100 (the body is not asked for), then the connection closes', async () => {
    const reader = new ResponseReader(await connectTo(server.port));
    reader.socket.write(head(''));
    const res = await reader.next();
    assertEnvelope(res, 401, 'UNAUTHORIZED');
    assert.equal(res.headers.connection, 'close');
    await reader.closed();
  });

  it('HTTP/1.1: with the token, 100 Continue, and the body read', async () => {
    const reader = new ResponseReader(await connectTo(server.port));
    try {
      reader.socket.write(head(`Authorization: Bearer ${TOKEN}\r\n`));
      assert.equal((await reader.next()).status, 100);
      reader.socket.write('{}');
      assert.equal((await reader.next()).status, 204);
    } finally {
      reader.socket.destroy();
    }
  });

  /** The answer's status and whether a 100 came before it, for a POST whose body waits for the 100. */
  async function h2cExchange(headers: Record<string, string>): Promise<{ continued: boolean; status: number }> {
    const session = http2.connect(server.origin);
    try {
      const stream = session.request(
        {
          ':method': 'POST',
          ':path': '/readyz/enable',
          expect: '100-continue',
          'content-type': 'application/json',
          'content-length': '2',
          ...headers,
        },
        { endStream: false },
      );
      let continued = false;
      stream.on('continue', () => {
        continued = true;
        stream.end('{}');
      });
      const [fields] = (await once(stream, 'response')) as [http2.IncomingHttpHeaders];
      stream.resume();
      await once(stream, 'close');
      return { continued, status: Number(fields[':status']) };
    } finally {
      session.close();
    }
  }

  it('h2c: without the token, the 401 and no 100; with it, 100 Continue and the body read', async () => {
    assert.deepEqual(await h2cExchange({}), { continued: false, status: 401 });
    assert.deepEqual(await h2cExchange(bearer(TOKEN)), { continued: true, status: 204 });
  });
});
