import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

/** Debian's Chromium, which playwright-core drives (it brings no browser of its own). */
const CHROMIUM = '/usr/bin/chromium';

/** Why the browser suites skip, or false when they run. */
export const BROWSER_SKIP = existsSync(CHROMIUM)
  ? false
  : `SKIPPED: browser tests need ${CHROMIUM} (.ci/run installs chromium)`;

/** Headless, and nothing that would reach out to the internet on its own. */
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-quic',
  '--no-first-run',
  '--disable-component-update',
  '--disable-sync',
];

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}
