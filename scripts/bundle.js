/**
 * Bundles the service (src/main.ts) and everything it imports into one file, dist/main.js (over
 * the file tsc wrote). Node then reads and compiles one file at start-up instead of resolving and
 * loading some 2,000 modules. The process entry, dist/server.js, stays as tsc wrote it: a few lines that install the
 * signal handlers before they import this bundle. dist/app.js and the other modules stay as tsc
 * wrote them, for `import`.
 */
import { build } from 'esbuild';

await build({
  entryPoints: ['src/main.ts'],
  outfile: 'dist/main.js',
  allowOverwrite: true,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: [
    // These read files beside their own code (Swagger UI's page and assets, swagger's own
    // package.json), so they stay in node_modules and are imported from there.
    '@fastify/swagger-ui',
    '@fastify/swagger',
    // OpenTelemetry's SDK and exporters, loaded only when spans are exported: a start without
    // export neither reads nor compiles them. Its API, which every request may use, is bundled.
    '@opentelemetry/context-async-hooks',
    '@opentelemetry/core',
    '@opentelemetry/exporter-*',
    '@opentelemetry/resources',
    '@opentelemetry/sdk-*',
  ],
  // The CommonJS packages inside the bundle call require(); an ES module has none of its own.
  banner: {
    js: "import { createRequire as __bundleRequire } from 'node:module';\nconst require = __bundleRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
