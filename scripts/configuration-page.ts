import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { settingRows } from '../src/cli.js';

/**
 * docs/configuration.md's table of settings, made from the rows `--help` prints, so that the page
 * and the command line say the same. `npm run docs:configuration` rewrites it in place.
 */

export const PAGE = fileURLToPath(new URL('../docs/configuration.md', import.meta.url));

const BEGIN = '<!-- generated from SETTINGS in src/config/ by npm run docs:configuration: do not edit -->';
const END = '<!-- end of the generated table -->';

/** Markdown table cells: a pipe would end the cell. */
const cell = (text: string) => text.replaceAll('|', '\\|');

export function settingsTable(): string {
  const rows = settingRows().map(({ env, flag, help, shownDefault }) =>
    [
      `\`${env}\``,
      flag === undefined ? '' : `\`--${flag}\``,
      shownDefault === undefined ? '—' : shownDefault.includes(' ') ? shownDefault : `\`${shownDefault}\``,
      cell(help),
    ].join(' | '),
  );
  return [
    '| variable | flag | default | what it takes, and what it does |',
    '| --- | --- | --- | --- |',
    ...rows.map((row) => `| ${row} |`),
  ].join('\n');
}

/** The page with its table as SETTINGS makes it now. */
export function renderPage(page: string): string {
  const begin = page.indexOf(BEGIN);
  const end = page.indexOf(END);
  if (begin === -1 || end < begin) throw new Error(`docs/configuration.md has lost its markers: ${BEGIN} ... ${END}`);
  return `${page.slice(0, begin)}${BEGIN}\n\n${settingsTable()}\n\n${page.slice(end)}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await writeFile(PAGE, renderPage(await readFile(PAGE, 'utf8')));
}
