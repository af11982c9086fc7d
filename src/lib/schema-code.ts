import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type { SerializerFactory } from '@fastify/fast-json-stringify-compiler';
import type { Ajv, Options, ValidateFunction } from 'ajv';
import { FORMATS, VISIBLE_LINE } from '../schemas.js';
import { compileOnFirstUse, onFirstUse } from './compile-on-first-use.js';
import { SCHEMA_CODE } from './schema-code-table.js';

/**
 * The code that validates requests (Ajv) and writes responses (fast-json-stringify), compiled from
 * the routes' schemas. Compiling it, and loading the compilers, is most of what a start-up would
 * spend on schemas, so the build compiles every schema of the service into one table (scripts/
 * bundle.js); at run time a schema's code is taken from that table, and only a schema it lacks
 * (none, as the service is built) loads a compiler. Either way each is made when first used.
 */

/** Compiled code by schema: each entry makes its validator or serializer, given the service's formats. */
export type SchemaCodeTable = Record<string, (formats: AjvFormats) => unknown>;
type AjvFormats = Record<string, { type: 'string'; validate: (text: string) => boolean }>;
type Serialize = (data: unknown) => string;
type RouteDefinition = Parameters<ReturnType<SerializerFactory>>[0];

/** Request validation: every error at once, never coercing (src/plugins/validation.ts converts numbers). */
const AJV_OPTIONS: Options = {
  allErrors: true,
  useDefaults: true,
  removeAdditional: false,
  coerceTypes: false,
  strict: true,
};

const AJV_FORMATS: AjvFormats = Object.fromEntries(
  Object.entries(FORMATS).map(([name, validate]) => [name, { type: 'string', validate }]),
);

// The serializer's validator only tells the branches of a union apart: the service's own format is
// known to it, and it need not check it.
const SERIALIZER_OPTIONS = { ajv: { formats: { [VISIBLE_LINE]: true } } };

// The compilers, from node_modules, only when a schema's code is not in the table: not bundled.
const load = createRequire(import.meta.url);

/** A schema's key in the table: what it compiles to depends on nothing else. */
function keyOf(kind: 'validator' | 'serializer', schema: unknown, externalSchemas = ''): string {
  return createHash('sha256')
    .update(`${kind}\n${externalSchemas}\n${JSON.stringify(schema)}`)
    .digest('base64url');
}

/** An Ajv as the service validates with; `code` for the build, which writes out what it compiles. */
function makeAjv(code?: Options['code']): Ajv {
  const { Ajv } = load('ajv') as typeof import('ajv');
  const ajvErrors = load('ajv-errors') as typeof import('ajv-errors').default;
  const ajv = new Ajv({ ...AJV_OPTIONS, code });
  ajvErrors(ajv);
  for (const [name, format] of Object.entries(AJV_FORMATS)) ajv.addFormat(name, format);
  return ajv;
}

/** fast-json-stringify as Fastify builds it, with the service's options and `mode` ('standalone' for the build). */
function fastJsonStringify(externalSchemas: unknown, mode?: 'standalone'): ReturnType<SerializerFactory> {
  const { SerializerSelector } = load('@fastify/fast-json-stringify-compiler') as {
    SerializerSelector: () => SerializerFactory;
  };
  // Ajv's types have no `true` format, which fast-json-stringify's validator takes as "known".
  return SerializerSelector()(externalSchemas, { ...SERIALIZER_OPTIONS, mode } as Parameters<SerializerFactory>[1]);
}

/** The module text of a compiled schema as a function that runs it and returns its export. */
function moduleFunction(moduleText: string): string {
  return `(formats) => { const module = { exports: {} }; ${moduleText}\n; return module.exports; }`;
}

interface Recorded {
  readonly kind: 'validator' | 'serializer';
  readonly schema: unknown;
  readonly externalSchemas: unknown;
  readonly route?: RouteDefinition;
}

export class SchemaCode {
  readonly #table: SchemaCodeTable;
  /** What the build compiles: every schema asked for, by key; null when not building. */
  readonly #recorded: Map<string, Recorded> | null;
  readonly #ajv = onFirstUse(() => makeAjv());

  constructor(options: { table?: SchemaCodeTable; record?: boolean } = {}) {
    this.#table = options.table ?? SCHEMA_CODE;
    this.#recorded = options.record === true ? new Map() : null;
  }

  /** What makes the validator of `schema`, to be called when it is first needed. */
  validator(schema: unknown): () => ValidateFunction {
    this.#recorded?.set(keyOf('validator', schema), { kind: 'validator', schema, externalSchemas: null });
    return () => {
      const made = this.#table[keyOf('validator', schema)];
      return made === undefined ? this.#ajv().compile(schema as object) : (made(AJV_FORMATS) as ValidateFunction);
    };
  }

  /** Fastify's serializer factory: each response schema's serializer, made when first used. */
  readonly buildSerializer: SerializerFactory = (externalSchemas) => {
    const externals = JSON.stringify(externalSchemas ?? {});
    const compile = onFirstUse(() => fastJsonStringify(externalSchemas));
    return (route) => {
      this.#recorded?.set(keyOf('serializer', route.schema, externals), {
        kind: 'serializer',
        schema: route.schema,
        externalSchemas,
        route,
      });
      return compileOnFirstUse(() => {
        const made = this.#table[keyOf('serializer', route.schema, externals)];
        return made === undefined ? compile()(route) : (made(AJV_FORMATS) as Serialize);
      });
    };
  };

  /**
   * For the build: a CommonJS module that exports, as `SCHEMA_CODE`, a table of every schema asked
   * for so far that this one's table lacks, each compiled as standalone code (which requires only
   * the compilers' small run-time parts).
   */
  compileTable(): string {
    if (this.#recorded === null) throw new Error('the schemas were not recorded');
    const { _ } = load('ajv') as typeof import('ajv');
    const standaloneCode = (load('ajv/dist/standalone/index.js') as typeof import('ajv/dist/standalone/index.js'))
      .default;
    const ajv = makeAjv({ source: true, formats: _`formats` });
    // Schemas that differ only in what compiles to nothing (descriptions, examples) share their code.
    const codes = new Map<string, number>();
    let entries = '';
    for (const [key, { kind, schema, externalSchemas, route }] of this.#recorded) {
      if (key in this.#table) continue;
      // In standalone mode fast-json-stringify's "serializer" is its module's text.
      const code =
        kind === 'validator'
          ? standaloneCode(ajv, ajv.compile(schema as object))
          : (fastJsonStringify(externalSchemas, 'standalone')(route as RouteDefinition) as unknown as string);
      if (!codes.has(code)) codes.set(code, codes.size);
      entries += `  ${JSON.stringify(key)}: code[${codes.get(code)}],\n`;
    }
    const functions = [...codes.keys()].map((code) => `  ${moduleFunction(code)},\n`).join('');
    return `'use strict';\nconst code = [\n${functions}];\nexports.SCHEMA_CODE = {\n${entries}};\n`;
  }
}
