import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from '../server-process.js';

const run = promisify(execFile);
const KIT = join(ROOT, 'src/conformance');

async function sources(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile() && e.name.endsWith('.ts')).map((e) => join(e.parentPath, e.name));
}

describe('the conformance kit as a package', () => {
  it('imports nothing of the service: only Node, decimal.js and its own modules', async () => {
    const outside: string[] = [];
    for (const file of await sources(KIT)) {
      const text = await readFile(file, 'utf8');
      for (const [, specifier = ''] of text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+'([^']+)'/g)) {
        const inside = specifier.startsWith('.') && !relative(KIT, resolve(dirname(file), specifier)).startsWith('..');
        if (!inside && !specifier.startsWith('node:') && specifier !== 'decimal.js') {
          outside.push(`${relative(ROOT, file)}: ${specifier}`);
        }
      }
      assert.doesNotMatch(text, /import\(/, `${file} imports nothing dynamically`);
    }
    assert.deepEqual(outside, []);
  });

  describe('packed (npm pack, after npm run build)', () => {
    let scratch: string;
    let files: string[];

    before(async () => {
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

    it("resolves import('greeting-service/conformance') to runConformance", async () => {
      const script =
        "const kit = await import('greeting-service/conformance');" +
        "const pkg = await import('greeting-service/package.json', { with: { type: 'json' } });" +
        'process.stdout.write(JSON.stringify([typeof kit.runConformance, kit.GROUPS.length, pkg.default.name]));';
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: scratch });
      assert.deepEqual(JSON.parse(stdout), ['function', 16, 'greeting-service']);
    });

    it('maps the package root to the service, as main did', async () => {
      const manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8'));
      assert.equal(manifest.exports['.'].default, `./${manifest.main}`);
      assert.deepEqual(Object.keys(manifest.exports), ['.', './conformance', './package.json']);
    });
  });
});
