import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { PAGE, renderPage, settingsTable } from '../../scripts/configuration-page.js';
import { SETTINGS } from '../../src/config/index.js';

describe('docs/configuration.md', () => {
  it('has the table of settings that SETTINGS makes now (npm run docs:configuration remakes it)', async () => {
    const page = await readFile(PAGE, 'utf8');
    assert.equal(page, renderPage(page), 'docs/configuration.md is stale: run npm run docs:configuration');
  });

  it('is found stale when a setting changes', async () => {
    const page = await readFile(PAGE, 'utf8');
    const edited = page.replace('| `PORT` | `--port` | `8080` |', '| `PORT` | `--port` | `8081` |');
    assert.notEqual(edited, page);
    assert.equal(renderPage(edited), page);
  });

  it('lists every setting with its flag, its default unless secret, and what --help says of it', () => {
    const table = settingsTable();
    for (const setting of Object.values(SETTINGS)) {
      const { env, flag, help, secret, default: value } = setting;
      const row = table.split('\n').find((line) => line.startsWith(`| \`${env}\` |`));
      assert.ok(row, env);
      assert.ok(row.includes(help), `${env}: ${row}`);
      if (flag !== undefined) assert.ok(row.includes(`\`--${flag}\``), `${env}: ${row}`);
      const empty = value === null || (Array.isArray(value) && value.length === 0);
      const shown = empty ? 'unset' : Array.isArray(value) ? value.join(',') : String(value);
      if (!secret) assert.ok(row.includes(setting.defaultText ?? `\`${shown}\``), `${env}: ${row}`);
    }
  });

  it('refuses a page whose markers are gone', () => {
    assert.throws(() => renderPage('# Configuration\n'), /lost its markers/);
  });
});
