import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { request } from 'undici';
import { documentedOperations, type Operation } from '../openapi-conformance.js';
import { freePort } from '../ports.js';
import { type RunningServer, startServer } from '../server-process.js';

/**
 * The OpenAPI document fed to the tools API teams import it into, each pinned in this folder's own
 * package (installed by `npm run test:interop`), against a live service: Portman's contract tests
 * and fuzz variations run by Newman, Prism's mock, and the clients of @hey-api/openapi-ts and orval
 * compiled by TypeScript and called. Each must read, for every operation, the URL the service serves.
 */

const run = promisify(execFile);
const HERE = fileURLToPath(new URL('.', import.meta.url));
const bin = (name: string) => join(HERE, 'node_modules/.bin', name);

/** The tools talk to no one but the service: no usage reports, no look for a newer version. */
const TOOL_ENV = {
  ...process.env,
  DO_NOT_TRACK: '1',
  SCARF_ANALYTICS: 'false',
  NO_UPDATE_NOTIFIER: '1',
  npm_config_update_notifier: 'false',
  FORCE_COLOR: '0',
  NO_COLOR: '1',
};

/** Runs one of the tools in `cwd`; its output is given with the error when it fails. */
async function tool(name: string, args: string[], cwd: string): Promise<string> {
  try {
    const { stdout } = await run(bin(name), args, { cwd, env: TOOL_ENV, maxBuffer: 64 * 1024 * 1024 });
    return stdout;
  } catch (error) {
    const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
    assert.fail(`${name} ${args.join(' ')} failed:\n${stdout.slice(-4000)}\n${stderr.slice(-4000)}`);
  }
}

// biome-ignore lint/suspicious/noExplicitAny: the OpenAPI document and the tools' reports, walked by their structure
type Json = any;

/** The service as deployed at the host's root, and under a context path, which every path then carries. */
const DEPLOYMENTS: { context: string; env: Record<string, string> }[] = [
  { context: '', env: {} },
  { context: '/svc', env: { CONTEXT_PATH: '/svc' } },
];

for (const { context, env } of DEPLOYMENTS) {
  describe(`the OpenAPI document in the tools people import it into, served at ${context || '/'}`, {
    timeout: 300_000,
  }, () => {
    let service: RunningServer;
    let origin: string;
    let dir: string;
    let document: Json;
    let operations: Operation[];

    before(async () => {
      service = await startServer(env);
      origin = `http://127.0.0.1:${service.port}`;
      dir = await mkdtemp(join(tmpdir(), 'greeting-service-interop-'));
      const res = await request(`${origin}${context}/openapi.json`);
      const text = await res.body.text();
      assert.equal(res.statusCode, 200);
      document = JSON.parse(text);
      await writeFile(join(dir, 'openapi.json'), text);
      operations = documentedOperations(document, `${context}/api`);
    });

    after(async () => {
      service?.kill();
      await rm(dir, { recursive: true, force: true });
    });

    it('passes Portman’s contract tests and fuzz variations of every operation, run by Newman', async (t) => {
      const collection = join(dir, 'collection.json');
      const config = join(HERE, 'portman-config.json');
      await tool('portman', ['-l', 'openapi.json', '-b', origin, '-c', config, '-o', collection], dir);
      const report = join(dir, 'newman.json');
      const args = ['run', collection, '--reporters', 'json', '--reporter-json-export', report, '--disable-unicode'];
      // Newman exits 1 when an assertion fails: its report says which.
      await run(bin('newman'), args, { cwd: dir, env: TOOL_ENV }).catch(() => undefined);
      const { run: newman } = JSON.parse(await readFile(report, 'utf8')) as Json;
      const failures = newman.failures.map(
        (failure: Json) => `${failure.source?.name}: ${failure.error?.test}: ${failure.error?.message}`,
      );
      assert.deepEqual(failures, []);
      const { requests, assertions } = newman.stats;
      t.diagnostic(`Newman: ${requests.total} requests, ${assertions.total} assertions, ${assertions.failed} failed`);
      // Every operation was sent to the URL the service serves it at, and answered its success.
      const sent = new Set(
        newman.executions.map(
          (execution: Json) =>
            `${execution.request.method} /${execution.request.url.path.join('/')} ${execution.response.code}`,
        ),
      );
      const missing = operations.filter((op) => !sent.has(`${op.method} ${op.path} 200`));
      assert.deepEqual(
        missing.map((op) => `${op.method} ${op.path}`),
        [],
      );
      // The fuzz variations ran, each answered the documented 400.
      const fuzzed = newman.executions.filter((execution: Json) => execution.item.name.includes('[Fuzzed]'));
      assert.ok(fuzzed.length >= 10, `${fuzzed.length} fuzz variations`);
      assert.ok(fuzzed.every((execution: Json) => execution.response.code === 400));
      assert.ok(assertions.total > requests.total * 5, `${assertions.total} assertions`);
    });

    it('has Prism’s mock answer every documented operation at the URL the service serves it', async (t) => {
      const port = await freePort();
      const prism = spawn(bin('prism'), ['mock', '-h', '127.0.0.1', '-p', String(port), 'openapi.json'], {
        cwd: dir,
        env: TOOL_ENV,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      try {
        await listening(prism, /Prism is listening/);
        const mock = `http://127.0.0.1:${port}`;
        const answers: string[] = [];
        for (const op of operations) {
          const path = op.query === '' ? op.path : `${op.path}?${op.query}`;
          const send = async (base: string) => {
            const res = await request(`${base}${path}`, {
              method: op.method as 'GET',
              ...(op.body !== undefined && { body: op.body, headers: { 'content-type': op.media as string } }),
            });
            await res.body.dump();
            return res.statusCode;
          };
          answers.push(`${op.method} ${path}: service ${await send(origin)}, mock ${await send(mock)}`);
        }
        assert.deepEqual(
          answers.filter((answer) => !/service 200, mock 200$/.test(answer)),
          [],
        );
        t.diagnostic(`Prism: ${answers.length} operations answered at the service's URLs`);
        // A path the document does not have is no operation of the mock's either.
        const res = await request(`${mock}${context}/api/v2/hello`);
        assert.equal(res.statusCode, 404, await res.body.text());
      } finally {
        prism.kill();
      }
    });

    /** The GET operations of the document, by id: what a generated client's read calls must cover. */
    const reads = () => operations.filter((op) => op.method === 'GET').map((op) => op.id);

    /** Compiles a generated client and the calls of its read operations with TypeScript 5, runs them, and checks each answer. */
    async function callAll(t: { diagnostic(message: string): void }, name: string, generated: string): Promise<void> {
      const client = join(dir, name);
      await mkdir(client, { recursive: true });
      for (const file of ['report.ts', `${name}.ts`]) await copyFile(join(HERE, 'clients', file), join(client, file));
      await writeFile(join(client, 'package.json'), '{"type":"module"}');
      const options = ['--strict', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext'];
      await tool(
        'tsc',
        [...options, '--lib', 'es2022,dom,dom.iterable', '--skipLibCheck', '--outDir', 'out', `${name}.ts`],
        client,
      );
      const { stdout } = await run(process.execPath, [join(client, 'out', `${name}.js`)], { cwd: client });
      const answers = stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { operation: string; status: number; data: Json });
      assert.deepEqual(
        answers.map(({ operation }) => operation).sort(),
        reads().sort(),
        `${generated}: read operations`,
      );
      const failed = answers.filter(({ status }) => status !== 200);
      assert.deepEqual(failed, [], generated);
      const by = Object.fromEntries(answers.map(({ operation, data }) => [operation, data]));
      assert.deepEqual(by.getHealth, { status: 'ok' });
      assert.deepEqual(by.getReadiness, { status: 'ready' });
      assert.equal(by.getVersion.version, document.info.version);
      assert.equal(by.getOpenApi.openapi, '3.1.0');
      assert.equal(by.getAsyncApi.asyncapi, '3.0.0');
      assert.deepEqual(by.getGreeting, { greeting: 'Hello, Ada!' });
      assert.deepEqual(by.getCurrency, { code: 'EUR', rate: by.getCurrency.rate });
      assert.deepEqual(
        by.listCurrencies.data.map((currency: { code: string }) => currency.code).length,
        by.listCurrencies.pagination.per_page,
      );
      assert.match(by.getMetrics, /^# HELP /m);
      assert.deepEqual(
        by.getEvents.map(({ id, greeting }: { id: number; greeting: string }) => ({ id, greeting })),
        [1, 2].map((id) => ({ id, greeting: 'Hello, Ada!' })),
      );
      t.diagnostic(`${generated}: ${answers.length} read operations called, each answered 200`);
    }

    it('compiles the client @hey-api/openapi-ts generates, whose every read operation the service answers', async (t) => {
      const config = join(dir, 'openapi-ts.config.mjs');
      const settings = {
        input: 'openapi.json',
        output: 'hey-api/generated',
        plugins: ['@hey-api/typescript', '@hey-api/sdk', { name: '@hey-api/client-fetch', baseUrl: origin }],
      };
      await writeFile(config, `export default ${JSON.stringify(settings)};\n`);
      await tool('openapi-ts', ['--file', config], dir);
      await callAll(t, 'hey-api', '@hey-api/openapi-ts');
    });

    it('compiles the client orval generates, whose every read operation the service answers', async (t) => {
      const config = join(dir, 'orval.config.mjs');
      const settings = {
        greeting: {
          input: { target: './openapi.json' },
          output: { target: './orval/generated/api.ts', client: 'fetch', mode: 'single', baseUrl: origin },
        },
      };
      await writeFile(config, `export default ${JSON.stringify(settings)};\n`);
      await tool('orval', ['--config', config], dir);
      await callAll(t, 'orval', 'orval');
    });
  });
}

/** Resolves once the process prints a line matching `ready`; fails if it exits first. */
function listening(child: ChildProcess, ready: RegExp, timeoutMs = 60_000): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`not ready in ${timeoutMs} ms:\n${output}`)), timeoutMs);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      if (ready.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', read);
    child.stderr?.on('data', read);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code}:\n${output}`));
    });
  });
}
