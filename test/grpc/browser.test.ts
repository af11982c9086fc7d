import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { build } from 'esbuild';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { buildApp } from '../../src/app.js';
import { BROWSER_SKIP, launchBrowser } from '../browser.js';
import { testConfig } from '../helpers.js';
import { ROOT } from '../server-process.js';

/** What a web application would bundle: ConnectRPC's web transports and the code generated from the service's .proto. */
const ENTRY = `
export { createClient, ConnectError, Code } from '@connectrpc/connect';
export { createGrpcWebTransport, createConnectTransport } from '@connectrpc/connect-web';
export { Greeter } from './src/grpc/generated/helloworld/helloworld_pb.ts';
export { GreetingService } from './src/grpc/generated/greeting/v1/greeting_pb.ts';
export { BadRequestSchema, ErrorInfoSchema, RequestInfoSchema } from './src/grpc/generated/google/rpc/error_details_pb.ts';
`;

/** The bundle and an empty page, from another origin than the service's: every call is a CORS request. */
async function serveBundle(): Promise<Server> {
  const bundled = await build({
    stdin: { contents: ENTRY, resolveDir: ROOT, loader: 'ts' },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    write: false,
  });
  const code = bundled.outputFiles[0]?.text ?? '';
  return createServer((request, response) => {
    if (request.url === '/grpc.js') response.writeHead(200, { 'content-type': 'text/javascript' }).end(code);
    else response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>gRPC-Web</title>');
  });
}

describe('gRPC-Web and Connect from Chromium', { skip: BROWSER_SKIP, timeout: 60_000 }, () => {
  let app: FastifyInstance;
  let files: Server;
  let browser: Browser;
  let page: Page;
  let service: string;
  let filesOrigin: string;

  before(async () => {
    app = await buildApp(testConfig());
    service = await app.listen({ host: '127.0.0.1', port: 0 });
    files = (await serveBundle()).listen(0, '127.0.0.1');
    await once(files, 'listening');
    filesOrigin = `http://127.0.0.1:${(files.address() as { port: number }).port}`;
    browser = await launchBrowser();
    page = await browser.newPage();
    await page.goto(`${filesOrigin}/`);
  });
  after(async () => {
    await browser?.close();
    files?.close();
    await app?.close();
  });

  for (const protocol of ['grpc-web', 'connect'] as const) {
    it(`calls, streams and reads an error's details over ${protocol}, across origins`, async () => {
      const results = await page.evaluate(
        async ([baseUrl, filesUrl, kind]) => {
          const grpc = await import(`${filesUrl}/grpc.js`);
          const transport =
            kind === 'grpc-web' ? grpc.createGrpcWebTransport({ baseUrl }) : grpc.createConnectTransport({ baseUrl });
          const greeter = grpc.createClient(grpc.Greeter, transport);
          const greeting = grpc.createClient(grpc.GreetingService, transport);
          const hello = await greeter.sayHello({ name: 'Ada' });
          const ids: number[] = [];
          for await (const message of greeting.streamGreetings({ count: 3, intervalMs: 50, name: 'Ada' })) {
            ids.push(message.id);
          }
          let error = null;
          try {
            await greeting.greet({ name: '' }, { headers: { 'x-request-id': 'from-the-page' } });
          } catch (thrown) {
            const failure = grpc.ConnectError.from(thrown);
            error = {
              code: failure.code,
              message: failure.rawMessage,
              reason: failure.findDetails(grpc.ErrorInfoSchema)[0]?.reason,
              field: failure.findDetails(grpc.BadRequestSchema)[0]?.fieldViolations[0]?.field,
              requestId: failure.findDetails(grpc.RequestInfoSchema)[0]?.requestId,
            };
          }
          return { hello: hello.message, ids, error, invalidArgument: grpc.Code.InvalidArgument };
        },
        [service, filesOrigin, protocol],
      );
      assert.deepEqual(results, {
        hello: 'Hello, Ada!',
        ids: [1, 2, 3],
        error: {
          code: results.invalidArgument,
          message: 'The request is not valid.',
          reason: 'VALIDATION_ERROR',
          field: 'name',
          requestId: 'from-the-page',
        },
        invalidArgument: 3,
      });
    });
  }
});
