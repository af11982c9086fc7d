import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { run } from '../run-command.js';
import { ROOT } from '../server-process.js';

/**
 * The documentation's TypeScript: each ```ts block of a page, indented or not, is a module a reader
 * could paste, and compiles as it is written, under `--strict`, against the packages it imports.
 */

export interface TypeScriptBlock {
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The columns of indentation taken off each line. */
  indent: number;
  code: string;
  /** Compiled as CommonJS (a `.cts` file) rather than as an ES module. */
  commonJs?: boolean;
}

const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');

/** The ```ts blocks of a Markdown text, their indentation (a block in a list item) taken off. */
export function typescriptBlocks(file: string, text: string): TypeScriptBlock[] {
  const blocks: TypeScriptBlock[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const fence = /^(\s*)```ts$/.exec(lines[i] ?? '');
    if (fence === null) continue;
    const indent = fence[1] ?? '';
    const start = i;
    const code: string[] = [];
    for (i++; i < lines.length && (lines[i] ?? '').trim() !== '```'; i++)
      code.push((lines[i] ?? '').slice(indent.length));
    blocks.push({ file, line: start + 1, indent: indent.length, code: `${code.join('\n')}\n` });
  }
  return blocks;
}

/**
 * Type-checks each block as an ES module of its own with `tsc --strict`, its imports resolved from
 * `nodeModules` (a project's, where the packages the blocks import are installed), Node's types from
 * the repository's. Resolves with tsc's errors in the blocks, each at `file:line:column` of the page,
 * and in the declarations the packages ship.
 */
export async function typeCheck(
  blocks: readonly TypeScriptBlock[],
  nodeModules: string,
  {
    beside = [],
    lib = ['ES2023'],
  }: {
    /** Directories of the project that the blocks import by relative paths (code generated there), laid beside them under their own names. */
    beside?: readonly string[];
    /** TypeScript's libraries: the language's alone, unless the packages' declarations ask for more. */
    lib?: readonly string[];
  } = {},
): Promise<string[]> {
  const dir = await mkdtemp(join(tmpdir(), 'greeting-service-docs-ts-'));
  try {
    await symlink(nodeModules, join(dir, 'node_modules'), 'dir');
    for (const path of beside) await symlink(path, join(dir, basename(path)), 'dir');
    const names = blocks.map((block, index) => `block-${index}.${block.commonJs === true ? 'cts' : 'mts'}`);
    await Promise.all(blocks.map((block, index) => writeFile(join(dir, names[index] ?? ''), block.code)));
    const compilerOptions = {
      strict: true,
      noEmit: true,
      target: 'ES2022',
      module: 'NodeNext',
      moduleResolution: 'NodeNext',
      lib,
      types: ['node'],
      typeRoots: [join(ROOT, 'node_modules/@types')],
    };
    await writeFile(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: names }));
    const { code, stdout, stderr } = await run(process.execPath, [
      TSC,
      '-p',
      join(dir, 'tsconfig.json'),
      '--pretty',
      'false',
    ]);
    const errors: string[] = [];
    for (const line of `${stdout}${stderr}`.split('\n')) {
      const at = /(?:^|\/)block-(\d+)\.[cm]ts\((\d+),(\d+)\): (.*)$/.exec(line);
      const block = at === null ? undefined : blocks[Number(at[1])];
      if (at !== null && block !== undefined)
        errors.push(`${block.file}:${block.line + Number(at[2])}:${block.indent + Number(at[3])}: ${at[4]}`);
      // An error of the program, or of a package's declarations.
      else if (/^error TS\d+|\.d\.[cm]?ts\(\d+,\d+\): error/.test(line)) errors.push(line);
    }
    // tsc failed without a diagnostic at all: it did not run as it should.
    if (code !== 0 && !/\): error TS\d+/.test(stdout)) errors.push(`tsc exited with ${code}: ${stdout}${stderr}`);
    return errors;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
