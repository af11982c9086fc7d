import { readdirSync, readFileSync } from 'node:fs';

/** The package's `proto/` folder, from the source and from the build alike (both one level below the package). */
const ROOT = new URL('../proto/', import.meta.url);

/** Where the standard files the service serves beside its own are kept, under their import paths. */
const VENDOR = 'vendor/';

/**
 * Every `.proto` file of the gRPC services, by its import path (`greeting/v1/greeting.proto`,
 * `grpc/health/v1/health.proto`), with its text: what `/proto/` serves for download.
 */
export function protoFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const path of readdirSync(ROOT, { recursive: true, encoding: 'utf8' }).sort()) {
    if (!path.endsWith('.proto')) continue;
    const importPath = path.startsWith(VENDOR) ? path.slice(VENDOR.length) : path;
    files.set(importPath.replaceAll('\\', '/'), readFileSync(new URL(path, ROOT), 'utf8'));
  }
  return files;
}
