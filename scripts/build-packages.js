/**
 * Builds the workspace's packages, each into its own dist/ (all of them, or those named:
 * `node scripts/build-packages.js client`):
 * - its modules bundled by esbuild, with the small libraries of src/lib it shares with the service
 *   inlined, so that a package needs nothing of the service's at run time, and dependencies left
 *   to be imported;
 * - its declarations by tsc, one beside each module of its src/;
 * - for the client, the same again as CommonJS in dist/cjs/, which a package.json of its own marks
 *   as such, for `require`.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { build } from 'esbuild';

const ROOT = resolve(new URL('.', import.meta.url).pathname, '..');

/** Each package: the modules users import or run, and whether it is also built as CommonJS. */
const PACKAGES = {
  client: { entryPoints: ['index'], commonJs: true },
  conformance: { entryPoints: ['index', 'cli', 'bin'], commonJs: false },
};

/** Bundling options every package shares: readable output, Node 20 and browsers alike. */
const BUNDLE = { bundle: true, packages: 'external', target: ['node20', 'es2022'], logLevel: 'warning' };

async function buildPackage(name) {
  const { entryPoints, commonJs } = PACKAGES[name];
  const dir = join(ROOT, 'packages', name);
  const dist = join(dir, 'dist');
  rmSync(dist, { recursive: true, force: true });
  const entries = Object.fromEntries(entryPoints.map((entry) => [entry, join(dir, 'src', `${entry}.ts`)]));
  await build({ ...BUNDLE, entryPoints: entries, outdir: dist, format: 'esm', splitting: true, platform: 'neutral' });
  declarations(dir, dist);
  if (commonJs) {
    const cjs = join(dist, 'cjs');
    await build({ ...BUNDLE, entryPoints: entries, outdir: cjs, format: 'cjs', platform: 'neutral' });
    writeFileSync(join(cjs, 'package.json'), '{ "type": "commonjs" }\n');
    for (const file of readdirSync(dist)) if (file.endsWith('.d.ts')) cpSync(join(dist, file), join(cjs, file));
  }
}

/**
 * tsc writes the declarations of the package's modules and of the service's libraries they import;
 * only the package's are kept, which name nothing of the service's (the libraries are not in its types).
 */
function declarations(dir, dist) {
  const out = mkdtempSync(join(tmpdir(), 'declarations-'));
  try {
    const project = join(out, 'tsconfig.json');
    const compilerOptions = {
      rootDir: ROOT,
      outDir: out,
      declaration: true,
      emitDeclarationOnly: true,
      sourceMap: false,
      typeRoots: [join(ROOT, 'node_modules/@types')],
    };
    writeFileSync(
      project,
      JSON.stringify({ extends: join(ROOT, 'tsconfig.json'), compilerOptions, include: [join(dir, 'src')] }),
    );
    execFileSync(join(ROOT, 'node_modules/.bin/tsc'), ['-p', project], { stdio: 'inherit' });
    cpSync(join(out, relative(ROOT, dir), 'src'), dist, { recursive: true });
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

const named = process.argv.slice(2);
for (const name of named.length > 0 ? named : Object.keys(PACKAGES)) {
  if (!(name in PACKAGES)) throw new Error(`no package ${name}: ${Object.keys(PACKAGES).join(', ')}`);
  await buildPackage(name);
}
