import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from './server-process.js';

const run = promisify(execFile);
const KIT = join(ROOT, 'src/conformance');
const CLIENT = join(ROOT, 'src/client');

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

describe('the client as a package', () => {
  it("imports at run time nothing but its own modules and the JSON writer: no Node module, no dependency, the platform's fetch; @opentelemetry/api only where the application has it", async () => {
    const writer = join(ROOT, 'src/lib/json-writer.ts');
    const outside = await importsFromOutside(
      CLIENT,
      (specifier, file) => resolve(dirname(file), specifier.replace(/\.js$/, '.ts')) === writer,
      ['/* @vite-ignore */ /* webpackIgnore: true */ OPENTELEMETRY_API'],
    );
    assert.deepEqual(outside, []);
    const client = await readFile(join(CLIENT, 'index.ts'), 'utf8');
    assert.match(client, /^const OPENTELEMETRY_API = '@opentelemetry\/api';$/m);
    const { peerDependencies, peerDependenciesMeta } = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8'));
    assert.deepEqual(peerDependenciesMeta, { '@opentelemetry/api': { optional: true } });
    assert.ok(peerDependencies['@opentelemetry/api']);
    assert.doesNotMatch(await readFile(writer, 'utf8'), /^import /m, 'the JSON writer imports nothing');
  });
});

describe('the conformance kit as a package', () => {
  it('imports nothing of the service: only Node, decimal.js, its own modules and the shown values', async () => {
    const shownValues = join(ROOT, 'src/lib/shown.ts');
    const outside = await importsFromOutside(
      KIT,
      (specifier, file) =>
        specifier.startsWith('node:') ||
        specifier === 'decimal.js' ||
        resolve(dirname(file), specifier.replace(/\.js$/, '.ts')) === shownValues,
    );
    assert.deepEqual(outside, []);
    assert.doesNotMatch(await readFile(shownValues, 'utf8'), /^import /m, 'the shown values import nothing');
  });

  describe('packed (npm pack, after npm run build)', () => {
    let scratch: string;
    let files: string[];
    let sourceFiles: Set<string>;

    before(async () => {
      sourceFiles = new Set((await sources(join(ROOT, 'src'))).map((file) => relative(ROOT, file)));
      scratch = await mkdtemp(join(tmpdir(), 'conformance-pack-'));
      const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', scratch], {
        cwd: ROOT,
      });
      const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
      assert.ok(packed !== undefined);
      files = packed.files.map((file) => file.path);
      // The tarball unpacked as npm installs it, its dependencies taken from this checkout.
      const modules = join(scratch, 'node_modules');
      await mkdir(join(modules, 'greeting-service'), { recursive: true });
      await run('tar', [
        '-xzf',
        join(scratch, packed.filename),
        '-C',
        join(modules, 'greeting-service'),
        '--strip-components=1',
      ]);
      await symlink(join(ROOT, 'node_modules/decimal.js'), join(modules, 'decimal.js'));
    });
    after(() => rm(scratch, { recursive: true, force: true }));

    it('ships dist/conformance, its library, its command line and its types', () => {
      for (const file of ['index.js', 'index.d.ts', 'cli.js', 'http.js', 'checks/all.js']) {
        assert.ok(files.includes(`dist/conformance/${file}`), file);
      }
    });

    it('ships no module of a source that is gone: the build starts from an empty dist/', async () => {
      const bundled = /^dist\/(?:main\.[\w-]+\.js|schema-code-table\.cjs)$/;
      const compiled = files.filter((file) => /\.(?:js|cjs)$/.test(file) && !bundled.test(file));
      const stale = compiled.filter(
        (file) => !sourceFiles.has(file.replace(/^dist\//, 'src/').replace(/\.js$/, '.ts')),
      );
      assert.deepEqual(stale, []);
    });

    it("resolves import('greeting-service/conformance') to runConformance", async () => {
      const script =
        "const kit = await import('greeting-service/conformance');" +
        "const pkg = await import('greeting-service/package.json', { with: { type: 'json' } });" +
        'process.stdout.write(JSON.stringify([typeof kit.runConformance, kit.GROUPS.length, pkg.default.name]));';
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: scratch });
      assert.deepEqual(JSON.parse(stdout), ['function', 21, 'greeting-service']);
    });

    it('maps the package root to the service, as main did', async () => {
      const manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8'));
      assert.equal(manifest.exports['.'].default, `./${manifest.main}`);
      assert.deepEqual(Object.keys(manifest.exports), ['.', './client', './conformance', './package.json']);
    });

    it("ships the client and resolves import('greeting-service/client') to createClient", async () => {
      for (const file of ['client/index.js', 'client/index.d.ts', 'client/exact-json.js', 'lib/json-writer.js']) {
        assert.ok(files.includes(`dist/${file}`), file);
      }
      const script =
        "const { createClient, JsonNumber } = await import('greeting-service/client');" +
        "const client = createClient({ baseUrl: 'http://127.0.0.1:1' });" +
        "process.stdout.write(JSON.stringify([typeof client.exchange, typeof client.currencies.all, new JsonNumber('1e400').text]));";
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: scratch });
      assert.deepEqual(JSON.parse(stdout), ['function', 'function', '1e400']);
    });
  });
});
