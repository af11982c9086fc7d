import type { SchemaCodeTable } from './schema-code.js';

/**
 * The validators and serializers compiled from the service's schemas when it was built, by schema.
 * Run from source, none: each is compiled when first used. scripts/bundle.js puts the table it
 * compiled in this module's place in the bundle.
 */
export const SCHEMA_CODE: SchemaCodeTable = {};
