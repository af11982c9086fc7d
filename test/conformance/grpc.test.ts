import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { runConformance } from '../../packages/conformance/src/index.js';
import { type ListeningApp, listening } from '../helpers.js';
import { type Alteration, startBrokenProxy } from './broken-server.js';
import { GRPC_SKIPPED_OVER_HTTP1, notPassed } from './report.js';

const close = (server: Server) => new Promise((resolve) => server.close(resolve));

describe('the conformance kit: --grpc against the service', () => {
  it('passes every Connect check over HTTP/1.1, writes included, and says why the gRPC-over-HTTP/2 ones skip', async () => {
    const service = await listening({ logLevel: 'silent' });
    try {
      const report = await runConformance({ baseUrl: service.origin, only: ['grpc'], grpc: true, write: true });
      assert.deepEqual(notPassed(report), GRPC_SKIPPED_OVER_HTTP1);
      assert.equal(report.passed, 14);
      const res = await service.app.inject({ url: '/api/profile' });
      assert.deepEqual(res.json(), { name: null, email: null, bio: null });
    } finally {
      await service.app.close();
    }
  });

  it('passes every check over h2c, gRPC itself and reflection included', async () => {
    const service = await listening({ logLevel: 'silent', http2: true });
    try {
      const report = await runConformance({
        baseUrl: service.origin,
        only: ['grpc'],
        grpc: true,
        write: true,
        http2: true,
      });
      assert.deepEqual(notPassed(report), []);
      assert.equal(report.passed, 18);
    } finally {
      await service.app.close();
    }
  });

  it('under a context path, calls the methods at the root, where gRPC clients call them', async () => {
    const service = await listening({ logLevel: 'silent', contextPath: '/svc' });
    try {
      const report = await runConformance({ baseUrl: `${service.origin}/svc/`, only: ['grpc'], grpc: true });
      assert.deepEqual(notPassed(report), ['skip grpc.update-profile: needs --write | ', ...GRPC_SKIPPED_OVER_HTTP1]);
    } finally {
      await service.app.close();
    }
  });

  it('without --grpc, the checks say what they need', async () => {
    const service = await listening({ logLevel: 'silent', grpc: false });
    try {
      const report = await runConformance({ baseUrl: service.origin, only: ['grpc.say-hello'] });
      assert.deepEqual(notPassed(report), ['skip grpc.say-hello: needs --grpc | ']);
    } finally {
      await service.app.close();
    }
  });

  it('stops, saying gRPC is not served, against GRPC=false', async () => {
    const service = await listening({ logLevel: 'silent', grpc: false });
    try {
      await assert.rejects(
        runConformance({ baseUrl: service.origin, only: ['grpc'], grpc: true }),
        /^Error: http:\/\/127\.0\.0\.1:\d+ does not serve gRPC: POST \/helloworld\.Greeter\/SayHello answered 404 \(a deployment with GRPC=false, or a proxy that does not pass gRPC's paths on\): run without --grpc$/,
      );
      // The other groups run as ever.
      const report = await runConformance({ baseUrl: service.origin, only: ['hello'], grpc: true });
      assert.equal(report.failed, 0);
    } finally {
      await service.app.close();
    }
  });

  it('skips, naming the injected answer, each check a fault answered; health, which faults leave alone, passes', async () => {
    const service = await listening({ logLevel: 'silent', faultErrorRate: 1, rateLimitMax: 0 });
    try {
      const report = await runConformance({ baseUrl: service.origin, only: ['grpc'], grpc: true });
      assert.equal(report.failed, 0, notPassed(report).join('\n'));
      const reasons = new Map(report.results.map((result) => [result.id, result.reason]));
      assert.equal(
        reasons.get('grpc.say-hello'),
        'an injected fault answered POST /helloworld.Greeter/SayHello: 503 unavailable (x-fault-injected: abort)',
      );
      assert.equal(
        reasons.get('grpc.stream-greetings'),
        'an injected fault answered POST /greeting.v1.GreetingService/StreamGreetings: 200 unavailable (x-fault-injected: abort)',
      );
      assert.equal(report.results.find((result) => result.id === 'grpc.health')?.outcome, 'pass');
    } finally {
      await service.app.close();
    }
  });
});

describe("the conformance kit: --grpc against Envoy's gRPC abort header", () => {
  it('skips each gRPC check the header aborted, naming the status, over the Connect protocol and gRPC itself', async () => {
    const service = await listening({ logLevel: 'silent', http2: true, faultHeaders: true, rateLimitMax: 0 });
    try {
      const report = await runConformance({
        baseUrl: service.origin,
        only: ['grpc.say-hello', 'grpc.http2-say-hello'],
        grpc: true,
        http2: true,
        headers: [['x-envoy-fault-abort-grpc-request', '14']],
      });
      assert.deepEqual(notPassed(report), [
        'skip grpc.say-hello: an injected fault answered POST /helloworld.Greeter/SayHello: 503 unavailable (x-fault-injected: abort) | ',
        'skip grpc.http2-say-hello: an injected fault answered POST /helloworld.Greeter/SayHello: 200 grpc-status 14 (x-fault-injected: abort) | ',
      ]);
    } finally {
      await service.app.close();
    }
  });
});

/** Whether the request calls `method` (`Service/Method`) of any package. */
const on = (url: string, method: string) => url.endsWith(`.${method}`);

/** A Connect answer's JSON body, changed by `change`. */
function changed(answer: Parameters<Alteration>[1], change: (body: Record<string, unknown>) => unknown) {
  return { ...answer, body: JSON.stringify(change(JSON.parse(answer.body) as Record<string, unknown>)) };
}

/** Deployments broken in one gRPC clause, each by a proxy in front of the service: the check that must fail, and no other. */
const DEPLOYMENTS: Record<string, { alter: Alteration; fails: string }> = {
  'an INVALID_ARGUMENT answered as INTERNAL (HTTP 500)': {
    alter: (req, answer) =>
      on(req.url, 'GreetingService/Greet') && answer.status === 400
        ? { ...changed(answer, (body) => ({ ...body, code: 'internal' })), status: 500 }
        : answer,
    fails: 'grpc.errors',
  },
  'an error without its BadRequest detail': {
    alter: (req, answer) =>
      on(req.url, 'GreetingService/Greet') && answer.status === 400
        ? changed(answer, (body) => ({
            ...body,
            details: (body.details as { type: string }[]).filter((detail) => detail.type !== 'google.rpc.BadRequest'),
          }))
        : answer,
    fails: 'grpc.errors',
  },
  'decimals as JSON numbers': {
    alter: (req, answer) =>
      on(req.url, 'GreetingService/Exchange') && answer.status === 200
        ? { ...answer, body: answer.body.replace(/"(amount|rate|result)":"([\d.]+)"/g, '"$1":$2') }
        : answer,
    fails: 'grpc.exchange',
  },
  'no next_page_token after the first page': {
    alter: (req, answer) =>
      on(req.url, 'GreetingService/ListCurrencies') && answer.status === 200
        ? changed(answer, ({ nextPageToken: _, ...body }) => body)
        : answer,
    fails: 'grpc.list-currencies',
  },
  'health NOT_SERVING': {
    alter: (req, answer) =>
      on(req.url, 'Health/Check') && answer.status === 200 ? { ...answer, body: '{"status":"NOT_SERVING"}' } : answer,
    fails: 'grpc.health',
  },
  'an unknown method answered 404 NOT_FOUND': {
    alter: (req, answer) =>
      on(req.url, 'GreetingService/NoSuchMethod')
        ? { ...changed(answer, (body) => ({ ...body, code: 'not_found' })), status: 404 }
        : answer,
    fails: 'grpc.unimplemented',
  },
};

describe('the conformance kit: --grpc against the service behind a proxy that breaks one thing', () => {
  let service: ListeningApp;
  before(async () => {
    service = await listening({ rateLimitMax: 1_000_000, logLevel: 'silent' });
  });
  after(() => service.app.close());

  /** The checks failed through a proxy that alters answers by `alter`; the stream's timing aside, which the proxy's buffering breaks. */
  async function failing(alter: Alteration, only = ['grpc']): Promise<string[]> {
    const { url, server } = await startBrokenProxy(service.origin, alter);
    try {
      const report = await runConformance({ baseUrl: url, grpc: true, only, skip: ['grpc.stream-greetings'] });
      return report.results.filter((result) => result.outcome === 'fail').map((result) => result.id);
    } finally {
      await close(server);
    }
  }

  it('fails nothing through a proxy that breaks nothing', async () => {
    assert.deepEqual(await failing((_req, answer) => answer), []);
  });

  for (const [name, { alter, fails }] of Object.entries(DEPLOYMENTS)) {
    it(`fails exactly ${fails} for ${name}`, async () => {
      assert.deepEqual(await failing(alter), [fails]);
    });
  }

  it('fails grpc.stream-greetings through a proxy that buffers the stream whole', async () => {
    const { url, server } = await startBrokenProxy(service.origin, (_req, answer) => answer);
    try {
      const report = await runConformance({ baseUrl: url, grpc: true, only: ['grpc.stream-greetings'] });
      const failed = notPassed(report);
      assert.equal(failed.length, 1, failed.join('\n'));
      assert.match(
        failed[0] ?? '',
        /^fail grpc\.stream-greetings: greeting \d at \d+ ms after the first \(within 500 ms\) \| \d+ ms: held back on the way/,
      );
    } finally {
      await close(server);
    }
  });
});
