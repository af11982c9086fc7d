#!/usr/bin/env node

/**
 * Process entry. A module's imports are all loaded before its first line runs, and loading the
 * service takes a while; a SIGTERM meanwhile would kill the process by the signal. So this file
 * imports nothing until the signal handlers are in place: they are the first thing that runs.
 */

/** Until the service has loaded, nothing is served: a signal ends the process at once, cleanly. */
let onSignal = (_signal: NodeJS.Signals): void => process.exit(0);
process.on('SIGTERM', (signal) => onSignal(signal));
process.on('SIGINT', (signal) => onSignal(signal));

if (process.argv[2] === 'conformance') {
  // The conformance kit, a package of its own: none of the service is loaded, and an
  // interrupted run does not exit 0.
  onSignal = (signal) => process.exit(signal === 'SIGINT' ? 130 : 143);
  const { conformanceMain } = await import('greeting-service-conformance/cli');
  process.exitCode = await conformanceMain(process.argv.slice(3), 'greeting-service conformance');
} else {
  // Node 22 and later can keep the service's compiled code between starts (in the directory of
  // NODE_COMPILE_CACHE, else the temporary one): a start then compiles nothing it compiled before.
  const { default: module } = await import('node:module');
  (module as { enableCompileCache?: () => unknown }).enableCompileCache?.();
  const { main, shutdown } = await import('./main.js');
  onSignal = shutdown;
  await main(process.argv.slice(2));
}
