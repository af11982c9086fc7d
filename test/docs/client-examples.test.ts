import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { ROOT } from '../server-process.js';
import { typeCheck, typescriptBlocks } from './typescript-blocks.js';

/** The client as the examples import it, and the source that name stands for here. */
const CLIENT = { specifier: 'greeting-service-client', source: `${ROOT}packages/client/src/index.ts` };
const PAGE = 'docs/client.md';

describe(`the TypeScript examples of ${PAGE}`, { timeout: 120_000 }, () => {
  it('compile as they are written, under --strict, against the client', async () => {
    const blocks = typescriptBlocks(PAGE, await readFile(`${ROOT}${PAGE}`, 'utf8'));
    assert.ok(blocks.length >= 3, `only ${blocks.length} blocks found`);
    assert.deepEqual(await typeCheck(blocks, { [CLIENT.specifier]: CLIENT.source }), []);
  });

  it('are found in list items too, and an error is reported at its line of the page', async () => {
    const page = [
      'text',
      '',
      '- item',
      '',
      '  ```ts',
      '  const n: number = 1;',
      '  const s: string = n;',
      '  ```',
      '',
    ].join('\n');
    const blocks = typescriptBlocks('x.md', page);
    assert.deepEqual(blocks, [
      { file: 'x.md', line: 5, indent: 2, code: 'const n: number = 1;\nconst s: string = n;\n' },
    ]);
    const errors = await typeCheck(blocks, {});
    assert.equal(errors.length, 1, errors.join('\n'));
    assert.match(errors[0] ?? '', /^x\.md:7:9: error TS2322: Type 'number' is not assignable to type 'string'\.$/);
  });
});
