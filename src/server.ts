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

const { main, shutdown } = await import('./main.js');
onSignal = shutdown;
await main(process.argv.slice(2));
