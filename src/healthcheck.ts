import { loadConfig } from './config/index.js';

/**
 * `node dist/healthcheck.js`: exits 0 if the service configured by the same environment answers
 * `GET /healthz` with 200 within 2 seconds, else 1. The container's HEALTHCHECK, as the slim Node
 * image has no curl; it reads PORT, HOST and CONTEXT_PATH exactly as the server does.
 */
const WILDCARDS = new Map([
  ['0.0.0.0', '127.0.0.1'],
  ['::', '[::1]'],
]);

try {
  const { port, host, contextPath } = loadConfig([], process.env);
  const address = WILDCARDS.get(host) ?? (host.includes(':') ? `[${host}]` : host);
  const response = await fetch(`http://${address}:${port}${contextPath === '/' ? '' : contextPath}/healthz`, {
    signal: AbortSignal.timeout(2000),
  });
  process.exitCode = response.ok ? 0 : 1;
} catch (error) {
  process.stderr.write(`healthcheck: ${(error as Error).message}\n`);
  process.exitCode = 1;
}
