import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ROOT } from '../server-process.js';
import { typeCheck, typescriptBlocks } from './typescript-blocks.js';

describe('the TypeScript blocks of a page', () => {
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
    const errors = await typeCheck(blocks, join(ROOT, 'node_modules'));
    assert.equal(errors.length, 1, errors.join('\n'));
    assert.match(errors[0] ?? '', /^x\.md:7:9: error TS2322: Type 'number' is not assignable to type 'string'\.$/);
  });
});
