#!/usr/bin/env node
import { buildApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';

/**
 * Process entry: read the configuration, listen, and shut down gracefully on SIGTERM/SIGINT:
 * readiness turns 503, the listener closes so no new connection is accepted, in-flight
 * requests finish, and the process exits 0; if they have not finished within
 * SHUTDOWN_TIMEOUT_MS, it exits 1.
 */

let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig(process.argv.slice(2), process.env);
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`greeting-service: ${error.message}\n`);
  process.exit(1);
}

const app = await buildApp(config);
try {
  await app.listen({ port: config.port, host: config.host });
} catch (error) {
  app.log.fatal({ err: error }, 'could not start listening');
  process.exit(1);
}

let stopping = false;
async function shutdown(signal: NodeJS.Signals): Promise<void> {
  if (stopping) return;
  stopping = true;
  app.log.info({ signal, timeout_ms: config.shutdownTimeoutMs }, 'shutting down');
  const deadline = setTimeout(() => {
    app.log.error({ timeout_ms: config.shutdownTimeoutMs }, 'in-flight requests did not finish in time');
    process.exit(1);
  }, config.shutdownTimeoutMs);
  deadline.unref();
  await app.close();
  app.log.info('stopped');
  process.exit(0);
}

process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
