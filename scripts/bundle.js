/**
 * Bundles the service (src/main.ts) and everything it imports into dist/main.js (over the file tsc
 * wrote), and the parts it imports only when asked for (the Redis client, span export, the OpenAPI
 * document and the documentation page) into chunks of their own beside it (dist/main.*.js). Node then reads
 * and compiles a few files at start-up instead of resolving and loading some 2,000 modules, and
 * never reads what the configuration does not use. The process entry, dist/server.js, stays as tsc
 * wrote it: a few lines that install the signal handlers before they import this bundle.
 * dist/app.js and the other modules stay as tsc wrote them, for `import`.
 *
 * Whitespace and comments are left out and the syntax shortened, which halves what V8 reads and
 * holds at start-up (and keeps the source in one byte per character: a comment outside ASCII
 * would double it); names are kept, so a stack trace still names its functions.
 */
import { readdirSync, rmSync } from 'node:fs';
import { build } from 'esbuild';

/** The chunks of an earlier build, named as below: a chunk's name changes with its content. */
const CHUNK = /^main\.[\w-]+\.js$/;
for (const file of readdirSync('dist')) if (CHUNK.test(file)) rmSync(`dist/${file}`);

await build({
  entryPoints: { main: 'src/main.ts' },
  outdir: 'dist',
  chunkNames: 'main.[name]-[hash]',
  allowOverwrite: true,
  bundle: true,
  splitting: true,
  minifyWhitespace: true,
  minifySyntax: true,
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
