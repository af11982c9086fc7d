import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { runConformance } from '../../packages/conformance/src/index.js';
import { type ListeningApp, listening } from '../helpers.js';
import { notPassed } from './report.js';

/**
 * A proxy that buffers every answer whole before sending it on, as nginx does by default with an
 * event stream (proxy_buffering on): each event reaches the client only once the stream has ended.
 */
async function bufferingProxy(target: string): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    const upstream = httpRequest(`${target}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
      const chunks: Buffer[] = [];
      answer.on('data', (chunk: Buffer) => chunks.push(chunk));
      answer.on('end', () => {
        const { 'transfer-encoding': _, ...headers } = answer.headers;
        res.writeHead(answer.statusCode ?? 502, headers).end(Buffer.concat(chunks));
      });
    });
    req.pipe(upstream);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}` };
}

describe('the conformance kit: the event stream', () => {
  let service: ListeningApp;
  let proxy: { server: Server; url: string };
  before(async () => {
    service = await listening({ logLevel: 'silent' });
    proxy = await bufferingProxy(service.origin);
  });
  after(async () => {
    proxy.server.close();
    await service.app.close();
  });

  it('passes every check of the group against the service', async () => {
    const report = await runConformance({ baseUrl: service.origin, only: ['events'] });
    assert.deepEqual(notPassed(report), []);
    assert.equal(report.passed, 5);
  });

  it('passes them over HTTP/2 too', async () => {
    const h2 = await listening({ logLevel: 'silent', http2: true });
    try {
      const report = await runConformance({ baseUrl: h2.origin, only: ['events'], http2: true });
      assert.deepEqual(notPassed(report), []);
    } finally {
      await h2.app.close();
    }
  });

  it('fails events.last-event-id against a service that answers a finished stream 200 with no events', async () => {
    // What an EventSource reconnects to for ever: the stream's head, and no event.
    const endless = createServer((req, res) => {
      if (req.headers['last-event-id'] !== '4') {
        httpRequest(`${service.origin}${req.url}`, { headers: req.headers }, (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        }).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store' }).end();
    });
    endless.listen(0, '127.0.0.1');
    await once(endless, 'listening');
    try {
      const port = (endless.address() as { port: number }).port;
      const report = await runConformance({ baseUrl: `http://127.0.0.1:${port}`, only: ['events.last-event-id'] });
      const failed = notPassed(report);
      assert.equal(failed.length, 1, failed.join('\n'));
      assert.match(failed[0] ?? '', /^fail events\.last-event-id: .*204/);
    } finally {
      endless.close();
    }
  });

  it('fails events.when-due, and only it, through a proxy that buffers the stream', async () => {
    const report = await runConformance({ baseUrl: proxy.url, only: ['events'] });
    const failed = notPassed(report);
    assert.equal(failed.length, 1, failed.join('\n'));
    assert.match(failed[0] ?? '', /^fail events\.when-due: .*held back on the way/);
  });
});
