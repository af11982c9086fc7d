import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { DiagnosticSeverity, Parser } from '@asyncapi/parser';
import type { Config } from '../../src/config/index.js';
import { type Client, injectClient } from '../helpers.js';

describe('GET /asyncapi.json', () => {
  const clients: Client[] = [];
  after(async () => {
    for (const client of clients) await client.close();
  });

  async function documentOf(
    contextPath: string,
    headers: Record<string, string> = {},
    overrides: Partial<Config> = {},
  ) {
    const client = await injectClient({ contextPath, ...overrides });
    clients.push(client);
    const base = contextPath === '/' ? '' : contextPath;
    const res = await client.send({ path: `${base}/asyncapi.json`, headers });
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
    return { res, doc: res.json(), client };
  }

  it('is AsyncAPI 3.0 that @asyncapi/parser finds no error in, with any context path', async () => {
    const parser = new Parser();
    for (const contextPath of ['/', '/svc']) {
      const { res } = await documentOf(contextPath);
      const diagnostics = await parser.validate(res.text);
      const errors = diagnostics.filter(({ severity }) => severity === DiagnosticSeverity.Error);
      assert.deepEqual(
        errors.map(({ code, message, path }) => `${code}: ${message} at ${path.join('.')}`),
        [],
        contextPath,
      );
    }
  });

  it('describes the echo: its address, the handshake from the route’s schema, text and binary, each replied to', async () => {
    const { doc } = await documentOf('/svc', { host: 'echo.example:8443' });
    assert.equal(doc.asyncapi, '3.0.0');
    assert.deepEqual(doc.servers.service, {
      host: 'echo.example:8443',
      protocol: 'ws',
      pathname: '/svc',
      description: 'The host that serves this document.',
    });
    assert.equal(doc.channels.echo.address, '/api/v1/echo/websocket');
    const { ws } = doc.channels.echo.bindings;
    assert.equal(ws.method, 'GET');
    assert.deepEqual(Object.keys(ws.headers.properties), [
      'upgrade',
      'connection',
      'sec-websocket-key',
      'sec-websocket-version',
      'origin',
    ]);
    assert.deepEqual(Object.keys(doc.components.messages), ['text', 'binary']);
    assert.equal(doc.operations.echo.action, 'receive');
    assert.deepEqual(doc.operations.echo.reply.messages, doc.operations.echo.messages);
  });

  it('says how the connection closes for each limit, as this deployment sends it: code, reason and value', async () => {
    const { doc } = await documentOf('/', {}, { wsMaxMessageBytes: 1024 });
    const { description } = doc.info;
    assert.ok(description.includes('with 1009 (reason `A message may be at most 1024 bytes.`)'), description);
    assert.ok(description.includes('(1024 bytes here, once inflated)'), description);
    assert.ok(description.includes('with 1008 (reason `A message may come in at most 16 fragments.`)'), description);
    assert.match(description, /Every ping is answered, however many come at once/);
  });

  it('describes the handshake, its 101 and each refusal with its code, which the OpenAPI document leaves to it', async () => {
    const { doc } = await documentOf('/svc');
    const { description } = doc.info;
    assert.match(
      description,
      /answered `101 Switching Protocols` with `Upgrade: websocket`, `Connection: Upgrade` and `Sec-WebSocket-Accept`/,
    );
    assert.match(
      description,
      /error envelope of the API \(`ErrorEnvelope` in the OpenAPI document at `\/svc\/openapi\.json`\)/,
    );
    assert.match(
      description,
      /426 `UPGRADE_REQUIRED` without `Upgrade: websocket` \(with `Upgrade: websocket` over HTTP\/1\.1\) or in HTTP\/1\.0/,
    );
    for (const refusal of [
      '400 `VALIDATION_ERROR`',
      '403 `FORBIDDEN`',
      '429 `RATE_LIMIT_EXCEEDED`',
      '503 `SERVICE_UNAVAILABLE`',
    ]) {
      assert.ok(description.includes(refusal), refusal);
    }
  });

  it('is linked from the OpenAPI document, which the documentation page shows', async () => {
    const { client } = await documentOf('/svc');
    const openapi = (await client.send({ path: '/svc/openapi.json' })).json();
    assert.match(openapi.info.description, /\[AsyncAPI 3\.0 document\]\(\/svc\/asyncapi\.json\)/);
  });
});
