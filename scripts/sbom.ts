/**
 * Writes the CycloneDX SBOM (`npm sbom`) of each package this repository publishes, as
 * `<name>.cdx.json` in the directory given (default `sbom/`), after `npm run build`
 * (`npm run sbom [dir]`):
 * - the client and the kit as a user installs them: the packed tarball unpacked into a directory of
 *   the package's name (npm names the SBOM's subject after it), its production dependencies
 *   installed from npm;
 * - the service from the lockfile: its production dependencies from npm. The kit, its one
 *   dependency from this repository, is described by the kit's own SBOM.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(new URL('.', import.meta.url).pathname, '..');
const WORKSPACES = ['packages/client', 'packages/conformance'];

const npm = (args: string[], cwd: string): string =>
  execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const sbom = (cwd: string, ...args: string[]): string =>
  npm(['sbom', '--sbom-format', 'cyclonedx', '--omit', 'dev', ...args], cwd);

/** Writes the SBOMs into `out`; resolves with their files. */
export function writeSboms(out = join(ROOT, 'sbom')): string[] {
  mkdirSync(out, { recursive: true });
  const scratch = mkdtempSync(join(tmpdir(), 'sbom-'));
  try {
    const written: string[] = [];
    const write = (name: string, text: string): void => {
      const file = join(out, `${name}.cdx.json`);
      writeFileSync(file, text);
      written.push(file);
    };
    for (const workspace of WORKSPACES) {
      const { name } = JSON.parse(readFileSync(join(ROOT, workspace, 'package.json'), 'utf8'));
      const [packed] = JSON.parse(
        npm(['pack', '--json', '--workspace', name, '--pack-destination', scratch], ROOT),
      ) as {
        filename: string;
      }[];
      if (packed === undefined) throw new Error(`npm pack wrote no tarball of ${name}`);
      const dir = join(scratch, name);
      mkdirSync(dir);
      execFileSync('tar', ['-xzf', join(scratch, packed.filename), '-C', dir, '--strip-components=1']);
      npm(['install', '--omit=dev', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund'], dir);
      write(name, sbom(dir));
    }
    const service = join(scratch, 'greeting-service');
    mkdirSync(service);
    for (const file of ['package.json', 'package-lock.json']) cpSync(join(ROOT, file), join(service, file));
    write('greeting-service', sbom(service, '--package-lock-only', '--workspaces=false'));
    return written;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  const out = process.argv[2];
  for (const file of writeSboms(out === undefined ? undefined : resolve(out))) console.log(file);
}
