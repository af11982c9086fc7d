import { spawn, spawnSync } from 'node:child_process';

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

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end without blocking the event loop (the server under test may be in this process). */
export function run(command: string, args: string[], timeoutMs = 60_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** What the tests read of h2load's report: requests done and succeeded, answers 2xx. */
export function parseH2load(stdout: string): { succeeded: number; status2xx: number } {
  const number = (pattern: RegExp) => Number(pattern.exec(stdout)?.[1] ?? Number.NaN);
  return { succeeded: number(/(\d+) succeeded/), status2xx: number(/(\d+) 2xx/) };
}
