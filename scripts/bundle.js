/**
 * First writes the build's commit and time (dist/build-info.json, scripts/build-info.js says how).
 * Then compiles the service's schemas into code (dist/schema-code-table.cjs; src/lib/schema-code.ts
 * says why), from the service as tsc built it, with every optional route on. Then bundles the
 * service (src/main.ts) and everything it imports, that table in place of src/lib/schema-code-table.ts,
 * into dist/main.js (over the file tsc wrote), and the parts it imports only when asked for (the
 * Redis client, span export, the OpenAPI document and the documentation page) into chunks of their
 * own beside it (dist/main.*.js). Node then reads and compiles a few files at start-up instead of
 * resolving and loading some 2,000 modules, and never reads what the configuration does not use.
 * The process entry, dist/server.js, stays as tsc wrote it: a few lines that install the signal
 * handlers before they import this bundle. dist/app.js and the other modules stay as tsc wrote
 * them, for `import`.
 *
 * Whitespace and comments are left out and the syntax shortened, which halves what V8 reads and
 * holds at start-up (and keeps the source in one byte per character: a comment outside ASCII
 * would double it); names are kept, so a stack trace still names its functions.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { buildFacts } from './build-info.js';

// Before the service is loaded below, which reads them as the built service will.
writeFileSync(resolve('dist/build-info.json'), `${JSON.stringify(buildFacts(process.env, process.cwd()))}\n`);
const { buildApp } = await import('../dist/app.js');
const { DEFAULT_CONFIG } = await import('../dist/config/index.js');
const { SchemaCode } = await import('../dist/lib/schema-code.js');

const TABLE = resolve('dist/schema-code-table.cjs');
const secrets = mkdtempSync(join(tmpdir(), 'greeting-service-build-'));
try {
  const adminTokenFile = join(secrets, 'admin-token');
  writeFileSync(adminTokenFile, 'a'.repeat(32));
  const schemaCode = new SchemaCode({ table: {}, record: true });
  const app = await buildApp({ ...DEFAULT_CONFIG, logLevel: 'silent', adminTokenFile }, { schemaCode });
  await app.ready();
  writeFileSync(TABLE, schemaCode.compileTable());
  await app.close();
} finally {
  rmSync(secrets, { recursive: true, force: true });
}

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
    // The schema compilers, loaded only for a schema the table lacks; their run-time parts that
    // the compiled code requires are small files read when a route first uses them.
    '@fastify/ajv-compiler',
    '@fastify/fast-json-stringify-compiler',
    'ajv',
    'ajv-errors',
    'ajv-formats',
    // Fastify's inject(), for tests: the service never calls it.
    'light-my-request',
  ],
  plugins: [
    {
      name: 'schema-code-table',
      setup(bundler) {
        bundler.onResolve({ filter: /\/schema-code-table\.js$/ }, () => ({ path: TABLE }));
      },
    },
  ],
  // The CommonJS packages inside the bundle call require(); an ES module has none of its own.
  banner: {
    js: "import { createRequire as __bundleRequire } from 'node:module';\nconst require = __bundleRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
