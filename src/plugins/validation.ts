import { Ajv, type ErrorObject, type Options } from 'ajv';
import ajvErrors from 'ajv-errors';
import type { FastifySchemaCompiler } from 'fastify';
import fp from 'fastify-plugin';
import { GIVEN_ONCE } from '../errors.js';
import { compileOnFirstUse } from '../lib/compile-on-first-use.js';
import { pointerSegments } from '../lib/json-pointer.js';
import { FORMATS } from '../schemas.js';

/**
 * Request validation, by one Ajv instance that reports every error at once, with `errorMessage`
 * (ajv-errors) for readable messages:
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

const AJV_OPTIONS: Options = {
  allErrors: true,
  useDefaults: true,
  removeAdditional: false,
  coerceTypes: false,
  strict: true,
};

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

function createCompiler(): FastifySchemaCompiler<ParameterSchema> {
  const ajv = new Ajv(AJV_OPTIONS);
  ajvErrors.default(ajv);
  for (const [name, validate] of Object.entries(FORMATS)) ajv.addFormat(name, { type: 'string', validate });
  return ({ schema, httpPart }) =>
    compileOnFirstUse(() => {
      const validate = ajv.compile(schema);
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
}

export const validationPlugin = fp(
  async (app) => {
    app.setValidatorCompiler(createCompiler());
  },
  { name: 'validation' },
);
