import type { ErrorObject } from 'ajv';
import type { FastifySchemaCompiler } from 'fastify';
import fp from 'fastify-plugin';
import { type ErrorDetail, GIVEN_ONCE, validationError } from '../errors.js';
import { compileOnFirstUse } from '../lib/compile-on-first-use.js';
import { pointerSegments } from '../lib/json-pointer.js';
import type { SchemaCode } from '../lib/schema-code.js';

/**
 * Request validation, by Ajv validators that report every error at once, with `errorMessage`
 * (ajv-errors) for readable messages (src/lib/schema-code.ts compiles them):
 *
 * - bodies are never coerced: `{"name": 123}` is a wrong type, not the string "123";
 * - query strings and path parameters are strings on the wire, so a property declared as a
 *   number or integer is converted here, but only from a plain decimal string. Ajv's own
 *   coercion would also take "0x10", "1e3", " 1" and "" as numbers.
 *
 * The conversion works on a copy, so a request that fails keeps its parameters as sent:
 * the error details report exactly what the client wrote. A parameter that takes one value
 * and was sent several times (an array, as the query string parser reads it) is reported as
 * such, whatever else its rule says.
 */

const INTEGER = /^-?\d+$/;
const DECIMAL = /^-?\d+(?:\.\d+)?$/;

type ParameterSchema = { properties?: Record<string, { type?: unknown }> };
type Parameters = Record<string, unknown>;

/** The properties of a query or path schema that must be read as numbers, with their pattern. */
function numericProperties(schema: ParameterSchema): [string, RegExp][] {
  const numeric: [string, RegExp][] = [];
  for (const [name, property] of Object.entries(schema.properties ?? {})) {
    if (property.type === 'integer') numeric.push([name, INTEGER]);
    else if (property.type === 'number') numeric.push([name, DECIMAL]);
  }
  return numeric;
}

/** The properties of a query or path schema that take one value, not a list. */
function singleValued(schema: ParameterSchema): Set<string> {
  return new Set(
    Object.entries(schema.properties ?? {})
      .filter(([, property]) => property.type !== 'array')
      .map(([name]) => name),
  );
}

/** The error, reworded when it is about a single-valued parameter that was sent several times. */
function repeatedParameter(error: ErrorObject, data: Parameters, single: Set<string>): ErrorObject {
  const [name] = pointerSegments(error.instancePath);
  return name !== undefined && single.has(name) && Array.isArray(data[name])
    ? { ...error, message: GIVEN_ONCE }
    : error;
}

/** Fastify's validator compiler: the route's schema validated by `schemaCode`'s validator, as above. */
export function validatorCompiler(schemaCode: SchemaCode): FastifySchemaCompiler<ParameterSchema> {
  return ({ schema, httpPart }) => {
    const validator = schemaCode.validator(schema);
    return compileOnFirstUse(() => {
      const validate = validator();
      if (httpPart === 'body') {
        return (data: unknown) => (validate(data) ? { value: data } : { error: validate.errors ?? [] });
      }
      const numeric = numericProperties(schema);
      const single = singleValued(schema);
      return (data: Parameters) => {
        const value = { ...data };
        for (const [name, pattern] of numeric) {
          const raw = value[name];
          if (typeof raw === 'string' && pattern.test(raw)) value[name] = Number(raw);
        }
        if (validate(value)) return { value };
        return { error: (validate.errors ?? []).map((error) => repeatedParameter(error, data, single)) };
      };
    });
  };
}

/** A percent-encoded query component decoded as the query string parser decodes it, or null when it is not valid UTF-8. */
function decodeComponent(text: string): string | null {
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    return null;
  }
}

/**
 * The parameters of a query string whose name or value is not valid percent-encoded UTF-8
 * (`%ZZ`, `%ED%A0%80`, a lone `%`), named as decoded when the name can be, with the value as
 * sent. The query string parser would pass such text on undecoded.
 */
export function badlyEncodedParameters(query: string): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  for (const pair of query.split('&')) {
    if (!pair.includes('%')) continue;
    const equals = pair.indexOf('=');
    const name = equals === -1 ? pair : pair.slice(0, equals);
    const value = equals === -1 ? '' : pair.slice(equals + 1);
    const decodedName = decodeComponent(name);
    if (decodedName === null || decodeComponent(value) === null) {
      details.push({ field: decodedName ?? name, message: 'must be valid percent-encoded UTF-8', value });
    }
  }
  return details;
}

export const validationPlugin = fp(
  async (app) => {
    // Before the body is read, for every route: a query string that holds a percent sign is decoded
    // once more here, so that no parameter reaches a route undecoded.
    app.addHook('preParsing', (request, _reply, payload, done) => {
      const start = request.url.indexOf('?');
      if (start === -1 || request.is404 || !request.url.includes('%', start)) return done(null, payload);
      const details = badlyEncodedParameters(request.url.slice(start + 1));
      done(details.length > 0 ? validationError(details) : null, payload);
    });
  },
  { name: 'validation' },
);
