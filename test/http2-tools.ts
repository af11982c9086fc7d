import { spawnSync } from 'node:child_process';

export { type Run, run } from './run-command.js';

/**
 * The HTTP/2 clients of other makers the tests drive: curl built with HTTP/2 (nghttp2) and h2load
 * (Debian's nghttp2-client). Without one, its tests skip, saying so once.
 */

const curlVersion = spawnSync('curl', ['--version'], { encoding: 'utf8' });
/** Why curl cannot be used here, or undefined when it speaks HTTP/2. */
export const CURL_SKIP =
  curlVersion.error !== undefined
    ? 'HTTP/2 tests with curl need curl'
    : /^Features:.*\bHTTP2\b/m.test(curlVersion.stdout)
      ? undefined
      : 'HTTP/2 tests with curl need a curl built with HTTP/2';

/** Why h2load cannot be used here, or undefined. */
export const H2LOAD_SKIP =
  spawnSync('h2load', ['--version']).error === undefined
    ? undefined
    : 'h2load tests need h2load (apt-get install nghttp2-client; .ci/run installs it)';

for (const reason of [CURL_SKIP, H2LOAD_SKIP]) if (reason !== undefined) process.stdout.write(`SKIPPED: ${reason}\n`);

/** What the tests read of h2load's report: requests done and succeeded, answers 2xx. */
export function parseH2load(stdout: string): { succeeded: number; status2xx: number } {
  const number = (pattern: RegExp) => Number(pattern.exec(stdout)?.[1] ?? Number.NaN);
  return { succeeded: number(/(\d+) succeeded/), status2xx: number(/(\d+) 2xx/) };
}
