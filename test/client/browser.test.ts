import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { buildApp } from '../../src/app.js';
import { BROWSER_SKIP, launchBrowser } from '../browser.js';
import { testConfig } from '../helpers.js';
import { ROOT } from '../server-process.js';

/**
 * The built client (`packages/client/dist`, `npm run build`) as a browser loads it: an ES module from a page
 * of another origin than the service's, so every call is a CORS request, with its preflight when
 * it needs one.
 */
function serveClientFiles(): Server {
  return createServer(async (request, response) => {
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    if (path === '/') {
      response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>client</title>');
      return;
    }
    if (path !== '/index.js') {
      response.writeHead(404).end();
      return;
    }
    const code = await readFile(join(ROOT, 'packages/client/dist/index.js'), 'utf8');
    response.writeHead(200, { 'content-type': 'text/javascript' }).end(code);
  });
}

describe('the client in Chromium', { skip: BROWSER_SKIP, timeout: 60_000 }, () => {
  let app: FastifyInstance;
  let files: Server;
  let browser: Browser;
  let page: Page;
  let service: string;
  let filesOrigin: string;

  before(async () => {
    app = await buildApp(testConfig());
    service = await app.listen({ host: '127.0.0.1', port: 0 });
    files = serveClientFiles().listen(0, '127.0.0.1');
    await once(files, 'listening');
    const { port } = files.address() as { port: number };
    browser = await launchBrowser();
    page = await browser.newPage();
    filesOrigin = `http://127.0.0.1:${port}`;
    await page.goto(`${filesOrigin}/`);
  });
  after(async () => {
    await browser?.close();
    files?.close();
    await app?.close();
  });

  it('calls every kind of operation across origins, exact numbers and ETags included', async () => {
    const results = await page.evaluate(
      async ([baseUrl, filesUrl]) => {
        const { createClient, JsonNumber, ApiError } = await import(`${filesUrl}/index.js`);
        const client = createClient({ baseUrl });
        const hello = await client.hello();
        const exchange = await client.exchange({ from: 'USD', to: 'VND', amount: '999999999999.99' });
        const echo = await client.echo({ big: new JsonNumber('123456789012345678901234567890') });
        const read = await client.profile.get();
        const written = await client.profile.update(
          { name: 'Ada' },
          { ifMatch: read.etag, requestId: 'from-the-page' },
        );
        let error = null;
        try {
          await client.currencies.get('XXX', {}, { requestId: 'missing-one' });
        } catch (thrown) {
          const failure = thrown as { status: number; code: string; requestId: string };
          error = {
            isApiError: thrown instanceof ApiError,
            status: failure.status,
            code: failure.code,
            id: failure.requestId,
          };
        }
        let count = 0;
        for await (const _ of client.currencies.all({ limit: 10 })) count++;
        return {
          hello: hello.message,
          result: exchange.result,
          big: echo.received.big.text,
          etags: [read.etag, written.etag],
          name: written.profile.name,
          error,
          count,
        };
      },
      [service, filesOrigin] as const,
    );
    assert.equal(results.hello, 'Hello, World!');
    assert.match(results.result, /^\d{17,}(\.\d+)?$/);
    assert.equal(results.big, '123456789012345678901234567890');
    assert.match(results.etags[0] ?? '', /^"\d+"$/);
    assert.notEqual(results.etags[1], results.etags[0]);
    assert.equal(results.name, 'Ada');
    assert.deepEqual(results.error, { isApiError: true, status: 404, code: 'NOT_FOUND', id: 'missing-one' });
    const total = (await app.inject({ url: '/api/currencies' })).json().pagination.total;
    assert.equal(results.count, total);
  });
});
