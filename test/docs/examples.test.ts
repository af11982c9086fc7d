import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { killAllServers, ROOT, type RunningServer, startServer } from '../server-process.js';
import { type Example, matchOutput, parseExamples, runExample, runSetup, untestedOutputs } from './examples.js';

/**
 * Every ```console example of README.md and docs/ runs against a service of its own, built as
 * users run it, and prints what the page shows: a changed answer fails here until its page changes.
 */

const PAGES = ['README.md', ...(await readdir(`${ROOT}docs`)).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const TEXTS = new Map(
  await Promise.all(PAGES.map(async (page) => [page, await readFile(`${ROOT}${page}`, 'utf8')] as const)),
);
const EXAMPLES = [...TEXTS].flatMap(([page, text]) => parseExamples(page, text));
const CURL = ['/usr/bin/curl', '/usr/local/bin/curl', '/bin/curl'].some((path) => existsSync(path));

if (!CURL) console.log('SKIPPED: the documentation examples need curl (apt-get install curl)');

after(killAllServers);

/** Runs `example` against a fresh service with its settings; the mismatch, described, or null. */
async function check(example: Example): Promise<string | null> {
  const setup = await runSetup(example);
  if (setup !== null) {
    return `${example.file}:${setup.step.line}: $ ${setup.step.command}\n--- expected\n${setup.step.expected}--- actual\n${setup.actual}`;
  }
  const server = await startServer(example.env);
  try {
    const mismatch = await runExample(example, server.port);
    if (mismatch === null) return null;
    const { step, actual } = mismatch;
    return `${example.file}:${step.line}: $ ${step.command}\n--- expected\n${step.expected}--- actual\n${actual}`;
  } finally {
    server.kill();
    await server.exited;
  }
}

// Each block has a service of its own, so two run at once.
describe('documentation examples', { skip: !CURL, concurrency: 2 }, () => {
  it(`are found (${EXAMPLES.length} blocks, ${EXAMPLES.reduce((n, e) => n + e.steps.length, 0)} commands)`, () => {
    assert.ok(EXAMPLES.length >= 10, `only ${EXAMPLES.length} examples found`);
  });

  it('show no output outside a console block, where nothing would compare it', () => {
    assert.deepEqual(
      [...TEXTS].flatMap(([page, text]) => untestedOutputs(page, text)),
      [],
    );
  });

  for (const example of EXAMPLES) {
    it(`${example.file}:${example.line} prints what it shows`, async () => {
      const mismatch = await check(example);
      assert.equal(mismatch, null, mismatch ?? '');
    });
  }
});

describe('the example runner', () => {
  it('reads commands, continuation lines, outputs and the settings of the service', () => {
    const [example] = parseExamples(
      'x.md',
      [
        'text',
        '```console',
        '$ RATE_LIMIT_MAX=2 TRUST_PROXY=1 npm start &',
        "$ curl -s localhost:8080/api/echo -H 'Content-Type: application/json' \\",
        "  -d '{}'",
        '{"received":{},…}',
        '$ curl -s -o /dev/null localhost:8080/api/hello',
        '',
        '```',
      ].join('\n'),
    );
    assert.deepEqual(example, {
      file: 'x.md',
      line: 2,
      env: { RATE_LIMIT_MAX: '2', TRUST_PROXY: '1' },
      setup: [],
      steps: [
        {
          command: "curl -s localhost:8080/api/echo -H 'Content-Type: application/json' \\\n  -d '{}'",
          expected: '{"received":{},…}\n',
          line: 4,
        },
        { command: 'curl -s -o /dev/null localhost:8080/api/hello', expected: '', line: 7 },
      ],
    });
  });

  it('reads settings whose names hold digits, such as HTTP2', () => {
    const [example] = parseExamples(
      'x.md',
      ['```console', '$ HTTP2=true OTEL_SERVICE_NAME=x npm start &', '$ curl -s localhost:8080/healthz', '```'].join(
        '\n',
      ),
    );
    assert.deepEqual(example?.env, { HTTP2: 'true', OTEL_SERVICE_NAME: 'x' });
    assert.deepEqual(
      example?.steps.map(({ command }) => command),
      ['curl -s localhost:8080/healthz'],
    );
  });

  it('runs the commands before the npm start line before the service starts', () => {
    const [example] = parseExamples(
      'x.md',
      [
        '```console',
        "$ printf 'token\\n' > /tmp/x-token",
        '$ ADMIN_TOKEN_FILE=/tmp/x-token npm start &',
        '$ curl -s localhost:8080/healthz',
        '{"status":"ok"}',
        '```',
      ].join('\n'),
    );
    assert.deepEqual(example?.env, { ADMIN_TOKEN_FILE: '/tmp/x-token' });
    assert.deepEqual(example?.setup, [{ command: "printf 'token\\n' > /tmp/x-token", expected: '', line: 2 }]);
    assert.deepEqual(example?.steps, [
      { command: 'curl -s localhost:8080/healthz', expected: '{"status":"ok"}\n', line: 4 },
    ]);
  });

  it('matches placeholders by their shape only, and everything else exactly', () => {
    const shown = '{"id":<request-id>,"at":"<timestamp>"}\netag: <etag>';
    const values = matchOutput(
      shown,
      '{"id":0f8fad5b-d9cb-469f-a165-70867728950e,"at":"2026-11-21T20:25:15.609"}\r\netag: "17"\r\n',
    );
    assert.deepEqual(
      values,
      new Map([
        ['request-id', '0f8fad5b-d9cb-469f-a165-70867728950e'],
        ['timestamp', '2026-11-21T20:25:15.609'],
        ['etag', '"17"'],
      ]),
    );
    assert.equal(matchOutput(shown, '{"id":0f8fad5b-d9cb-469f-a165-70867728950e,"at":"2026-11-21"}\netag: "17"'), null);
    assert.equal(matchOutput('etag: <etag>', 'etag: W/"17"'), null);
    assert.equal(matchOutput('{"result":92}', '{"result":92.00}'), null);
    assert.equal(matchOutput('{"result":92}', '{"result":92}\nmore'), null);
    assert.deepEqual(matchOutput('', ''), new Map());
    assert.equal(matchOutput('', '{"result":92}'), null);
  });

  it('reads … alone on a line as any lines, and within a line as any text', () => {
    assert.ok(
      matchOutput('HTTP/1.1 200 OK\n…\netag: <etag>\n…\n{"a":1}', 'HTTP/1.1 200 OK\na: 1\nb: 2\netag: "5"\n\n{"a":1}'),
    );
    assert.ok(matchOutput('HTTP/1.1 200 OK\n…\n{"a":1}', 'HTTP/1.1 200 OK\n{"a":1}'));
    assert.ok(matchOutput('{"a":1,…}', '{"a":1,"b":2}'));
    assert.equal(matchOutput('{"a":1,…}', '{"a":1,"b":2}\n{"c":3}'), null);
  });

  it('finds outputs shown in a shell block, which no test runs', () => {
    const text =
      '```sh\ncurl -s localhost:8080/api/hello/Ada   # {"greeting":"Hello, Ada!"}\n# HTTP/1.1 200 OK\nnpm start   # serves\n```\n';
    assert.deepEqual(untestedOutputs('x.md', text), [
      'x.md:2: curl -s localhost:8080/api/hello/Ada   # {"greeting":"Hello, Ada!"}',
      'x.md:3: # HTTP/1.1 200 OK',
    ]);
  });

  describe('against a live service', { skip: !CURL }, () => {
    let server: RunningServer;
    before(async () => {
      server = await startServer();
    });

    const example = (lines: string[]) => {
      const [parsed] = parseExamples('x.md', ['```console', ...lines, '```'].join('\n'));
      assert.ok(parsed);
      return parsed;
    };

    it('passes an example whose output is the service’s', async () => {
      const mismatch = await runExample(
        example(['$ curl -s localhost:8080/api/hello/Ada', '{"greeting":"Hello, Ada!"}']),
        server.port,
      );
      assert.equal(mismatch, null);
    });

    it('fails an example whose output the service does not give, showing what it gave', async () => {
      const mismatch = await runExample(
        example(['$ curl -s localhost:8080/api/hello/Ada', '{"greeting":"Hello, Ada"}']),
        server.port,
      );
      assert.equal(mismatch?.step.line, 2);
      assert.equal(mismatch?.actual, '{"greeting":"Hello, Ada!"}');
    });

    it('puts the value a placeholder matched into the later commands', async () => {
      const steps = [
        '$ curl -si localhost:8080/api/profile',
        'HTTP/1.1 200 OK',
        '…',
        'etag: <etag>',
        '…',
        `$ curl -s -o /dev/null -w '%{http_code}' localhost:8080/api/profile -H 'If-None-Match: <etag>'`,
      ];
      assert.equal(await runExample(example([...steps, '304']), server.port), null);
      assert.equal((await runExample(example([...steps, '200']), server.port))?.actual, '304');
    });
  });
});
