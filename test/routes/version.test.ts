import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { buildFacts } from '../../scripts/build-info.js';
import { type Client, samples, transports } from '../helpers.js';
import { ROOT, type RunningServer, startServer } from '../server-process.js';

/** From the sources there is no build: its commit and time are unknown, the rest is known. */
const FROM_SOURCES = {
  version: JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version,
  commit: 'unknown',
  build_time: 'unknown',
  runtime: `node ${process.version}`,
};

for (const [transport, connect] of transports) {
  describe(`GET /version (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect();
    });
    after(() => client.close());

    it('answers the version, commit, build time and runtime, exactly', async () => {
      const res = await client.send({ path: '/version' });
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
      assert.equal(res.headers['cache-control'], 'no-store');
      assert.equal(res.text, JSON.stringify(FROM_SOURCES));
    });

    it('takes HEAD and ignores version and Accept, as /healthz does', async () => {
      const head = await client.send({ method: 'HEAD', path: '/version' });
      assert.equal(head.status, 200);
      assert.equal(head.text, '');
      const asked = await client.send({
        path: '/version?version=2',
        headers: { accept: 'application/vnd.greeting.v2+json' },
      });
      assert.deepEqual(asked.json(), FROM_SOURCES);
      assert.equal((await client.send({ path: '/api/version' })).status, 404);
    });
  });
}

describe('GET /version under CONTEXT_PATH', () => {
  it('is served under the context path, and not at the root', async () => {
    const [, connect] = transports[0];
    const client = await connect({ contextPath: '/svc' });
    try {
      assert.deepEqual((await client.send({ path: '/svc/version' })).json(), FROM_SOURCES);
      assert.equal((await client.send({ path: '/version' })).status, 404);
    } finally {
      await client.close();
    }
  });
});

describe("the build's facts (scripts/build-info.js)", () => {
  const NOW = new Date('2026-11-29T12:00:00.123Z');
  let outside: string;
  before(() => {
    outside = mkdtempSync(join(tmpdir(), 'greeting-no-git-'));
  });
  after(() => rmSync(outside, { recursive: true, force: true }));

  it('in a git checkout: the commit checked out, and the time of the build', () => {
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    assert.deepEqual(buildFacts({}, ROOT, NOW), { commit: head, build_time: '2026-11-29T12:00:00.123Z' });
  });

  it('SOURCE_COMMIT and SOURCE_DATE_EPOCH win over git and the clock', () => {
    const env = { SOURCE_COMMIT: 'abc1234', SOURCE_DATE_EPOCH: '1764417600' };
    const expected = { commit: 'abc1234', build_time: '2025-11-29T12:00:00.000Z' };
    assert.deepEqual(buildFacts(env, ROOT, NOW), expected);
    assert.deepEqual(buildFacts(env, outside, NOW), expected);
  });

  it('outside git, with neither variable (or both empty): commit unknown', () => {
    for (const env of [{}, { SOURCE_COMMIT: '', SOURCE_DATE_EPOCH: ' ' }]) {
      assert.deepEqual(buildFacts(env, outside, NOW), { commit: 'unknown', build_time: '2026-11-29T12:00:00.123Z' });
    }
  });

  it('a SOURCE_DATE_EPOCH that is not whole seconds stops the build, naming it', () => {
    for (const epoch of ['-1', '1.5', '2026-11-29', '0x10', '1e9', '999999999999']) {
      assert.throws(() => buildFacts({ SOURCE_DATE_EPOCH: epoch }, outside, NOW), {
        message: `SOURCE_DATE_EPOCH must be whole seconds since 1970-01-01 UTC, not ${JSON.stringify(epoch)}`,
      });
    }
  });
});

describe('the built service: /version, build_info and --version say the same', { timeout: 60_000 }, () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer();
  });
  after(() => server.kill());

  it('as the build wrote them into dist/build-info.json', async () => {
    const built = JSON.parse(readFileSync(join(ROOT, 'dist/build-info.json'), 'utf8'));
    assert.match(built.commit, /^([0-9a-f]{40}|unknown)$/);
    assert.ok(new Date(built.build_time).toISOString() === built.build_time, built.build_time);
    const expected = { ...FROM_SOURCES, ...built };

    const base = `http://127.0.0.1:${server.port}`;
    const version = await request(`${base}/version`);
    assert.equal(version.statusCode, 200);
    assert.deepEqual(await version.body.json(), expected);

    const metrics = await (await request(`${base}/metrics`)).body.text();
    const labels = Object.entries(expected).map(([name, value]) => `${name}="${value}"`);
    assert.deepEqual([...samples(metrics, 'build_info')], [[`{${labels.join(',')}}`, 1]]);

    const cli = spawnSync(process.execPath, ['dist/server.js', '--version'], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(cli.status, 0, cli.stderr);
    assert.equal(
      cli.stdout,
      `${expected.version}\ncommit: ${expected.commit}\nbuild_time: ${expected.build_time}\nruntime: ${expected.runtime}\n`,
    );
  });
});
