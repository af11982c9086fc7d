import { createRequire } from 'node:module';
import type { SchemaCodeTable } from '../src/lib/schema-code.js';

/** The validators' and serializers' code the build compiled (npm run test:unit builds first), as the bundle holds it. */
export function builtSchemaCode(): SchemaCodeTable {
  return createRequire(import.meta.url)('../dist/schema-code-table.cjs').SCHEMA_CODE;
}
