import type { FastifyInstance } from 'fastify';
import { helpText, versionText } from './cli.js';
import { type Config, ConfigError, listenError, loadConfig, parseCommandLine } from './config/index.js';
import { checkTimeZone } from './config/service.js';
import { logDestination } from './logging/log-destination.js';

/**
 * The process, once src/server.ts has installed the signal handlers: read the configuration,
 * listen, and shut down gracefully on SIGTERM/SIGINT: readiness turns 503, the listener closes so
 * no new connection is accepted, in-flight requests finish, and the process exits 0; if they have
 * not finished within SHUTDOWN_TIMEOUT_MS, it exits 1. A second signal forces an immediate exit 1.
 */

// Log lines are written asynchronously, so every exit below first waits for those still buffered.
const logs = logDestination();

let exiting = false;

// An uncaught exception ends the process as Node ends it (the stack on stderr, exit 1), once the
// buffered lines, and one saying why, are written.
process.on('uncaughtExceptionMonitor', (error) => {
  app?.log.fatal({ err: error }, 'uncaught exception');
  logs.flushSync();
});

/** The longest an exit waits for the buffered log lines to be written. */
const LOG_WAIT_MS = 1000;

/** Exits with `code` once the buffered log lines are written, or once `waitMs` have passed. */
function exitAfterLogs(code: number, waitMs = LOG_WAIT_MS): void {
  if (exiting) return;
  exiting = true;
  setTimeout(() => process.exit(code), waitMs).unref();
  logs.end(() => process.exit(code));
}

/** A setting that cannot be used: one line on stderr, no stack trace, and exit 1. */
function refuse(error: ConfigError): void {
  process.stderr.write(`greeting-service: ${error.message}\n`);
  exitAfterLogs(1);
}

let config: Config;
let app: FastifyInstance | undefined;
let stopping = false;

/** What SIGTERM and SIGINT do, from the moment this module is loaded. */
export async function shutdown(signal: NodeJS.Signals): Promise<void> {
  if (stopping || exiting) exitAtOnce(signal);
  stopping = true;
  if (app === undefined) process.exit(0); // nothing is served yet, so nothing to drain
  app.log.info({ signal, timeout_ms: config.shutdownTimeoutMs }, 'shutting down');
  // The process is gone by the deadline, whatever standard output does: a stalled reader costs lines.
  const deadline = performance.now() + config.shutdownTimeoutMs;
  setTimeout(() => {
    if (exiting) return; // drained, and writing its last lines until the deadline at most
    exiting = true;
    app?.log.error({ timeout_ms: config.shutdownTimeoutMs }, 'in-flight requests did not finish in time');
    logs.flushSync();
    process.exit(1);
  }, config.shutdownTimeoutMs).unref();
  await app.close();
  app.log.info('stopped');
  exitAfterLogs(0, Math.min(LOG_WAIT_MS, deadline - performance.now()));
}

/**
 * A signal once the process is on its way out: exit 1 now, with one line saying so. An exit
 * already under way has closed the log, so the line goes to stderr then.
 */
function exitAtOnce(signal: NodeJS.Signals): never {
  if (exiting) {
    process.stderr.write(`greeting-service: second signal (${signal}): exiting without waiting\n`);
  } else {
    app?.log.warn({ signal }, 'second signal: exiting without waiting');
    logs.flushSync();
  }
  process.exit(1);
}

/** Starts the service as the command line `argv` and the environment say. */
export async function main(argv: readonly string[]): Promise<void> {
  try {
    const { help, version } = parseCommandLine(argv);
    if (help || version) {
      process.stdout.write(help ? helpText() : versionText());
      process.exit(0);
    }
    config = loadConfig(argv, process.env);
    // Node reads an empty TZ as UTC; like any empty variable, it counts as unset: the system's zone.
    if (process.env.TZ === '') delete process.env.TZ;
    checkTimeZone(process.env.TZ);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    refuse(error);
    return;
  }

  // Loaded only once the configuration is known to be good, so a bad one fails fast.
  const { buildApp } = await import('./app.js');
  try {
    app = await buildApp(config, { logStream: logs.stream, droppedLogLines: logs.droppedLines });
  } catch (error) {
    // The TLS files read again, changed since the configuration was checked.
    if (!(error instanceof ConfigError)) throw error;
    refuse(error);
    return;
  }
  // SIGHUP asks for the certificate files to be read again; without TLS it ends the process, as by default.
  const log = app.log;
  logs.reportDropsWith((dropped) =>
    log.warn({ dropped_lines: dropped }, 'log lines dropped: standard output took them too slowly'),
  );
  const { reloadCertificate } = app;
  if (reloadCertificate !== undefined) process.on('SIGHUP', () => reloadCertificate());
  try {
    await app.listen({ port: config.port, host: config.host });
  } catch (error) {
    refuse(listenError(error, config, argv));
  }
}
