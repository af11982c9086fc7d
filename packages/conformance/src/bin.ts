#!/usr/bin/env node
import { conformanceMain } from './cli.js';

// An interrupted run does not exit 0.
process.on('SIGINT', () => process.exit(130));
process.on('SIGTERM', () => process.exit(143));
process.exitCode = await conformanceMain(process.argv.slice(2), 'greeting-service-conformance');
