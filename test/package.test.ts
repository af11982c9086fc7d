import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { writeSboms } from '../scripts/sbom.js';
import { type TypeScriptBlock, typeCheck, typescriptBlocks } from './docs/typescript-blocks.js';
import { killAllServers, ROOT, type RunningServer, startServer, withoutOuterNpx } from './server-process.js';

const exec = promisify(execFile);
const KIT = join(ROOT, 'packages/conformance/src');
const CLIENT = join(ROOT, 'packages/client/src');

async function sources(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile() && e.name.endsWith('.ts')).map((e) => join(e.parentPath, e.name));
}

/**
 * What the modules under `dir` import, at run time, from outside it and not allowed by `allowed`
 * (type-only imports vanish from the built code and are left out).
 */
async function importsFromOutside(
  dir: string,
  allowed: (specifier: string, file: string) => boolean,
  /** What a dynamic import may name, as written between its parentheses. */
  dynamic: readonly string[] = [],
): Promise<string[]> {
  const outside: string[] = [];
  for (const file of await sources(dir)) {
    const text = await readFile(file, 'utf8');
    for (const [, specifier = ''] of text.matchAll(
      /(?:^|\n)\s*(?:import|export)\s(?!type\s)[^'"]*?from\s+'([^']+)'/g,
    )) {
      const inside = specifier.startsWith('.') && !relative(dir, resolve(dirname(file), specifier)).startsWith('..');
      if (!inside && !allowed(specifier, file)) outside.push(`${relative(ROOT, file)}: ${specifier}`);
    }
    const imported = [...text.matchAll(/import\(([^)]*)\)/g)].map(([, what]) => what);
    assert.deepEqual(
      imported.filter((what) => !dynamic.includes(what ?? '')),
      [],
      `${file} imports nothing else dynamically`,
    );
  }
  return outside;
}

/** Whether `specifier`, imported by `file`, is the service's library `library` (src/lib), which the package's build bundles. */
const isLibrary = (specifier: string, file: string, library: string): boolean =>
  resolve(dirname(file), specifier.replace(/\.js$/, '.ts')) === join(ROOT, 'src/lib', library);

interface Packed {
  tarball: string;
  files: string[];
}

/** `npm pack` of a workspace's package, or of the service (built by `npm run build`), into `destination`. */
async function pack(destination: string, workspace?: string): Promise<Packed> {
  const which = workspace === undefined ? ['--workspaces=false'] : ['--workspace', workspace];
  const { stdout } = await exec(
    'npm',
    ['pack', '--ignore-scripts', '--json', ...which, '--pack-destination', destination],
    {
      cwd: ROOT,
    },
  );
  const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  assert.ok(packed !== undefined);
  return { tarball: join(destination, packed.filename), files: packed.files.map((file) => file.path).sort() };
}

/**
 * A project of a user's, empty but for its package.json, with the tarballs installed as npm installs
 * them (their dependencies from npm's cache, as CI's `npm ci` left it).
 */
async function projectWith(dir: string, tarballs: readonly string[]): Promise<string> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'package.json'), JSON.stringify({ name: 'a-project', private: true }));
  await exec(
    'npm',
    ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock', ...tarballs],
    { cwd: dir },
  );
  return dir;
}

/** Bytes of the files under `dir`, as they take on disk rounded to nothing: the sum of their sizes. */
async function bytesUnder(dir: string): Promise<number> {
  let bytes = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) bytes += (await stat(join(entry.parentPath, entry.name))).size;
  }
  return bytes;
}

/** A block that imports ConnectRPC, whose declarations name the Fetch API's `HeadersInit`, which TypeScript's DOM library alone declares. */
const importsConnect = (block: TypeScriptBlock) => /from '@connectrpc\//.test(block.code);

/**
 * tsc's errors in the ```ts blocks of a page of docs/ (and in what they import), compiled under
 * --strict in `project`, beside the directories of it in `beside`: those that import ConnectRPC
 * with the DOM library too, as the page tells a project to.
 */
async function docsTypeErrors(page: string, project: string, beside: readonly string[] = []): Promise<string[]> {
  const blocks = typescriptBlocks(page, await readFile(join(ROOT, page), 'utf8'));
  assert.ok(blocks.length > 0, `no TypeScript in ${page}`);
  const nodeModules = join(project, 'node_modules');
  const connect = blocks.filter(importsConnect);
  return [
    ...(await typeCheck(
      blocks.filter((block) => !importsConnect(block)),
      nodeModules,
      { beside },
    )),
    ...(connect.length === 0 ? [] : await typeCheck(connect, nodeModules, { beside, lib: ['ES2023', 'DOM'] })),
  ];
}

/** What the documentation's examples import besides the workspace's packages, at the versions the repository has. */
const EXAMPLES_IMPORT = [
  'undici',
  '@bufbuild/protobuf',
  '@connectrpc/connect',
  '@connectrpc/connect-node',
  '@connectrpc/connect-web',
];

/**
 * The gRPC recipe of docs/client.md followed in `project`: the .proto files its loop downloads
 * (from proto/, which the service serves at /proto/), its buf.gen.yaml, then `buf generate` with
 * the repository's buf and protoc-gen-es. Resolves with the directory of the generated code.
 */
async function generatedAsDocumented(project: string): Promise<string> {
  const page = await readFile(join(ROOT, 'docs/client.md'), 'utf8');
  const files = /^for file in ([^;]+); do$/m.exec(page)?.[1]?.trim().split(/\s+/) ?? [];
  const config = /^```yaml\n([\s\S]*?protoc-gen-es[\s\S]*?)^```$/m.exec(page)?.[1] ?? '';
  const out = /^\s*out: (\S+)$/m.exec(config)?.[1];
  assert.ok(files.length > 0 && out !== undefined, 'the recipe names its .proto files and its buf.gen.yaml');
  for (const file of files) {
    const vendored = join(ROOT, 'proto/vendor', file);
    await mkdir(dirname(join(project, 'proto', file)), { recursive: true });
    await copyFile(existsSync(vendored) ? vendored : join(ROOT, 'proto', file), join(project, 'proto', file));
  }
  await writeFile(join(project, 'buf.gen.yaml'), config);
  const bin = join(ROOT, 'node_modules/.bin');
  await exec(join(bin, 'buf'), ['generate'], {
    cwd: project,
    env: { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH}` },
  });
  return join(project, out);
}

/** `npx greeting-service-conformance ...args` in `project`. */
function npx(project: string, ...args: string[]): Promise<{ stdout: string; stderr: string }> {
  const env = withoutOuterNpx(process.env);
  return exec('npx', ['--no-install', 'greeting-service-conformance', ...args], { cwd: project, env });
}

/** Runs `code` with Node in `cwd`, as a module (`.mjs`) or CommonJS (`.cjs`); resolves with its output. */
async function runIn(cwd: string, file: string, code: string): Promise<string> {
  await writeFile(join(cwd, file), code);
  const { stdout } = await exec(process.execPath, [file], { cwd });
  return stdout;
}

describe('the packages (npm pack after npm run build, installed in a project of their own)', () => {
  let scratch: string;
  let server: RunningServer;
  let baseUrl: string;
  let client: Packed;
  let kit: Packed;
  let service: Packed;

  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'packages-'));
    server = await startServer();
    baseUrl = `http://127.0.0.1:${server.port}`;
    [client, kit, service] = await Promise.all([
      pack(scratch, 'greeting-service-client'),
      pack(scratch, 'greeting-service-conformance'),
      pack(scratch),
    ]);
  });
  after(async () => {
    killAllServers();
    await rm(scratch, { recursive: true, force: true });
  });

  describe('the client, greeting-service-client', () => {
    let project: string;
    before(async () => {
      project = await projectWith(join(scratch, 'client-project'), [client.tarball]);
    });

    it("imports at run time nothing but its own modules and the JSON writer it bundles: no Node module, no dependency, the platform's fetch; @opentelemetry/api only where the application has it", async () => {
      const outside = await importsFromOutside(
        CLIENT,
        (specifier, file) => isLibrary(specifier, file, 'json-writer.ts'),
        ['/* @vite-ignore */ /* webpackIgnore: true */ OPENTELEMETRY_API'],
      );
      assert.deepEqual(outside, []);
      assert.match(
        await readFile(join(CLIENT, 'index.ts'), 'utf8'),
        /^const OPENTELEMETRY_API = '@opentelemetry\/api';$/m,
      );
      const manifest = JSON.parse(await readFile(join(ROOT, 'packages/client/package.json'), 'utf8'));
      assert.equal(manifest.dependencies, undefined);
      assert.deepEqual(manifest.peerDependenciesMeta, { '@opentelemetry/api': { optional: true } });
    });

    it('ships its modules as ES modules and as CommonJS, each with its declarations, and its README', () => {
      assert.deepEqual(client.files, [
        'README.md',
        'dist/cjs/event-stream.d.ts',
        'dist/cjs/exact-json.d.ts',
        'dist/cjs/index.d.ts',
        'dist/cjs/index.js',
        'dist/cjs/package.json',
        'dist/event-stream.d.ts',
        'dist/exact-json.d.ts',
        'dist/index.d.ts',
        'dist/index.js',
        'package.json',
      ]);
    });

    it('installs alone: no other package, under 1 MB', async () => {
      assert.deepEqual(await readdir(join(project, 'node_modules')), ['.package-lock.json', 'greeting-service-client']);
      const bytes = await bytesUnder(join(project, 'node_modules/greeting-service-client'));
      assert.ok(bytes < 1_000_000, `${bytes} bytes`);
    });

    it('has its types from CommonJS too', async () => {
      const code = [
        "import { createClient, type Greeting } from 'greeting-service-client';",
        "const api = createClient({ baseUrl: 'http://localhost:8080' });",
        "export const greeting: Promise<Greeting> = api.greeting('Ada');",
        '// @ts-expect-error: a greeting is no number',
        "export const wrong: Promise<number> = api.greeting('Ada');",
        '',
      ].join('\n');
      const errors = await typeCheck(
        [{ file: 'try.cts', line: 0, indent: 0, code, commonJs: true }],
        join(project, 'node_modules'),
      );
      assert.deepEqual(errors, []);
    });

    for (const [kind, file, load] of [
      ['an ES module', 'try.mjs', "import { createClient, JsonNumber } from 'greeting-service-client';"],
      ['CommonJS', 'try.cjs', "const { createClient, JsonNumber } = require('greeting-service-client');"],
    ] as const) {
      it(`calls the service from ${kind}: exact decimals, exact numbers`, async () => {
        const output = await runIn(
          project,
          file,
          `${load}
(async () => {
  const api = createClient({ baseUrl: ${JSON.stringify(baseUrl)} });
  const { greeting } = await api.greeting('Wörld');
  const { result } = await api.exchange({ from: 'USD', to: 'VND', amount: '999999999999.99' });
  const { received } = await api.echo({ big: new JsonNumber('18446744073709551616') });
  console.log(JSON.stringify([greeting, result, received.big.text]));
})();
`,
        );
        assert.deepEqual(JSON.parse(output), ['Hello, Wörld!', '24764999999999752', '18446744073709551616']);
      });
    }
  });

  describe('the conformance kit, greeting-service-conformance', () => {
    let project: string;
    before(async () => {
      project = await projectWith(join(scratch, 'kit-project'), [kit.tarball]);
    });

    it('imports nothing of the service: only Node, decimal.js, its own modules and the shown values it bundles', async () => {
      const outside = await importsFromOutside(
        KIT,
        (specifier, file) =>
          specifier.startsWith('node:') || specifier === 'decimal.js' || isLibrary(specifier, file, 'shown.ts'),
      );
      assert.deepEqual(outside, []);
      assert.doesNotMatch(await readFile(join(ROOT, 'src/lib/shown.ts'), 'utf8'), /^import /m);
    });

    it('ships its library, its command line, their declarations and its README', () => {
      for (const file of [
        'README.md',
        'dist/index.js',
        'dist/index.d.ts',
        'dist/cli.js',
        'dist/bin.js',
        'package.json',
      ]) {
        assert.ok(kit.files.includes(file), file);
      }
    });

    it('installs with decimal.js alone', async () => {
      assert.deepEqual((await readdir(join(project, 'node_modules'))).sort(), [
        '.bin',
        '.package-lock.json',
        'decimal.js',
        'greeting-service-conformance',
      ]);
    });

    it('runs from the project as npx runs it, against the service, and passes', async () => {
      const { stdout } = await npx(project, baseUrl, '--only', 'hello');
      assert.match(stdout, /^\d+ passed, 0 failed, \d+ skipped/m);
    });

    it('says its own name in its help and its errors', async () => {
      const help = await npx(project, '--help');
      assert.match(help.stdout, /^Usage: greeting-service-conformance <base-url> \[options\]$/m);
      const refused = await npx(project).then(
        () => assert.fail('exit 0 without a URL'),
        (error: { code: number; stderr: string }) => error,
      );
      assert.equal(refused.code, 2);
      assert.match(refused.stderr, /^greeting-service-conformance: takes one base URL/);
    });

    it("runs from another project's tests: import { runConformance }", async () => {
      const output = await runIn(
        project,
        'try.mjs',
        `import { runConformance, GROUPS } from 'greeting-service-conformance';
const report = await runConformance({ baseUrl: ${JSON.stringify(baseUrl)}, only: ['hello'] });
console.log(JSON.stringify([GROUPS.includes('hello'), report.failed, report.passed > 0]));
`,
      );
      assert.deepEqual(JSON.parse(output), [true, 0, true]);
    });
  });

  describe("the documentation's TypeScript, against the packages as installed", () => {
    let project: string;
    let generated: string;
    before(async () => {
      // What the examples import: the two packages, undici for the client over HTTP/2, ConnectRPC
      // and the code its recipe generates for gRPC.
      const others = await Promise.all(
        EXAMPLES_IMPORT.map(async (name) => {
          const { version } = JSON.parse(await readFile(join(ROOT, 'node_modules', name, 'package.json'), 'utf8'));
          return `${name}@${version}`;
        }),
      );
      project = await projectWith(join(scratch, 'docs-project'), [client.tarball, kit.tarball, ...others]);
      generated = await generatedAsDocumented(project);
    });

    for (const page of ['docs/client.md', 'docs/conformance.md']) {
      it(`type-checks every example of ${page} as written, under --strict, with the packages' declarations`, async () => {
        assert.deepEqual(await docsTypeErrors(page, project, [generated]), []);
      });
    }
  });

  describe('the service, greeting-service', () => {
    it('ships no module of a source that is gone (the build starts from an empty dist/), no package of the workspace, and its .proto files', async () => {
      const sourceFiles = new Set((await sources(join(ROOT, 'src'))).map((file) => relative(ROOT, file)));
      const bundled = /^dist\/(?:main\.[\w-]+\.js|schema-code-table\.cjs)$/;
      const compiled = service.files.filter((file) => /\.(?:js|cjs)$/.test(file) && !bundled.test(file));
      const stale = compiled.filter(
        (file) => !sourceFiles.has(file.replace(/^dist\//, 'src/').replace(/\.js$/, '.ts')),
      );
      assert.deepEqual(stale, []);
      assert.deepEqual(
        service.files.filter((file) => !file.startsWith('dist/')),
        [
          'README.md',
          'package.json',
          'proto/greeting/v1/greeting.proto',
          'proto/vendor/google/rpc/error_details.proto',
          'proto/vendor/google/rpc/status.proto',
          'proto/vendor/grpc/health/v1/health.proto',
          'proto/vendor/grpc/reflection/v1/reflection.proto',
          'proto/vendor/grpc/reflection/v1alpha/reflection.proto',
          'proto/vendor/helloworld/helloworld.proto',
        ],
      );
    });

    it('maps its root to the service, and depends on the kit for its conformance command', async () => {
      const manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8'));
      assert.equal(manifest.exports['.'].default, `./${manifest.main}`);
      assert.deepEqual(Object.keys(manifest.exports), ['.', './package.json']);
      const kitManifest = JSON.parse(await readFile(join(ROOT, 'packages/conformance/package.json'), 'utf8'));
      assert.equal(manifest.dependencies['greeting-service-conformance'], kitManifest.version);
    });
  });

  it('each has its SBOM (CycloneDX, npm sbom): the client none of its own dependencies, the kit decimal.js, the service what it runs with', async () => {
    const out = join(scratch, 'sbom');
    const components: Record<string, string[]> = {};
    for (const file of writeSboms(out)) {
      const bom = JSON.parse(await readFile(file, 'utf8'));
      assert.equal(bom.bomFormat, 'CycloneDX');
      const { name, version } = bom.metadata.component;
      components[`${name}@${version}`] = bom.components.map((component: { name: string }) => component.name);
    }
    const version = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')).version;
    assert.deepEqual(Object.keys(components).sort(), [
      `greeting-service-client@${version}`,
      `greeting-service-conformance@${version}`,
      `greeting-service@${version}`,
    ]);
    assert.deepEqual(components[`greeting-service-client@${version}`], []);
    assert.deepEqual(components[`greeting-service-conformance@${version}`], ['decimal.js']);
    const service = components[`greeting-service@${version}`] ?? [];
    assert.ok(service.includes('fastify') && service.includes('decimal.js'));
    assert.ok(!service.includes('typescript') && !service.includes('tsx'), 'no development dependency');
  });
});
