import { Ajv, type ErrorObject, type Options } from 'ajv';
import ajvErrors from 'ajv-errors';
import type { FastifyRequest, FastifySchemaCompiler } from 'fastify';
import fp from 'fastify-plugin';
import { type ErrorDetail, GIVEN_ONCE } from '../errors.js';
import { compileOnFirstUse } from '../lib/compile-on-first-use.js';
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

type Part = 'body' | 'querystring' | 'params' | 'headers';

/** JSON Pointer (`/a/b~1c`) to its unescaped segments. */
function pointerSegments(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'));
}

function valueAt(root: unknown, segments: readonly string[]): unknown {
  let node = root;
  for (const segment of segments) {
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, segment)) return null;
    node = (node as Record<string, unknown>)[segment];
  }
  return node === undefined ? null : node;
}

/** Where an Ajv error points, and the message the client gets for it. */
function locate(error: ErrorObject): { segments: string[]; message: string } {
  const segments = pointerSegments(error.instancePath);
  switch (error.keyword) {
    case 'required':
      return { segments: [...segments, String(error.params.missingProperty)], message: 'is required' };
    case 'additionalProperties':
      return { segments: [...segments, String(error.params.additionalProperty)], message: 'is not allowed' };
    default:
      return { segments, message: error.message ?? 'is not valid' };
  }
}

/**
 * One detail per invalid field, in the order Ajv reports them (keys that are not allowed first,
 * then the properties in schema order): the field's name (dotted when nested,
 * `body` for the body as a whole), the message, and the value as the client sent it.
 */
export function validationDetails(errors: readonly ErrorObject[], part: Part, request: FastifyRequest): ErrorDetail[] {
  const source: unknown = part === 'querystring' ? request.query : request[part];
  const details: ErrorDetail[] = [];
  const seen = new Set<string>();
  for (const error of errors) {
    const { segments, message } = locate(error);
    const field = segments.length === 0 ? (part === 'body' ? 'body' : part) : segments.join('.');
    if (seen.has(field)) continue;
    seen.add(field);
    details.push({ field, message, value: segments.length === 0 ? (source ?? null) : valueAt(source, segments) });
  }
  return details;
}
