import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * What a Kubernetes API server checks of an object's shape, offline: the OpenAPI schema of
 * Kubernetes v1.36.0 as the `kubernetes-models` package (5.1.0) compiles it (types, formats such
 * as quantities, required fields, enumerations), and the Prometheus Operator's CRDs as
 * `@kubernetes-models/prometheus-operator` (6.0.0) and Gateway API's as `@kubernetes-models/gateway-api`
 * (2.0.0) do. Those validators let unknown fields
 * through, which an API server refuses (kubectl's strict field validation, the default), so the
 * field names are also checked against the models' declarations.
 */

/** A Kubernetes object as rendered. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

/** The module of the model of an object's kind, by its apiVersion. */
function modelModule({ apiVersion, kind }: KubeObject): string {
  if (apiVersion.startsWith('monitoring.coreos.com/')) {
    return `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`;
  }
  if (apiVersion.startsWith('gateway.networking.k8s.io/'))
    return `@kubernetes-models/gateway-api/${apiVersion}/${kind}`;
  return `kubernetes-models/${apiVersion}/${kind}`;
}

/** A field's type as the declarations give it. */
type Type =
  | { of: 'object'; file: string; name: string }
  | { of: 'array' | 'map'; item: Type }
  | { of: 'leaf' }
  | { of: 'unread'; text: string };

interface Declaration {
  /** Null: an object whose fields are free (RawExtension and the like). */
  fields: Map<string, Type> | null;
}

const declarations = new Map<string, Declaration>();

/** The `.d.ts` beside a module's `.js`. */
function declarationFile(specifier: string, from?: string): string {
  if (from !== undefined && specifier.startsWith('.'))
    return resolve(dirname(from), specifier).replace(/\.js$/, '.d.ts');
  return fileURLToPath(import.meta.resolve(specifier)).replace(/\.js$/, '.d.ts');
}

function parseType(text: string, file: string, imports: Map<string, string>): Type {
  const array = /^Array<([\s\S]+)>$/.exec(text);
  if (array) return { of: 'array', item: parseType(array[1] as string, file, imports) };
  const map = /^\{\s*\[key: string\]: ([\s\S]+?);\s*\}$/.exec(text);
  if (map) return { of: 'map', item: parseType(map[1] as string, file, imports) };
  const specifier = imports.get(text);
  if (specifier !== undefined) return { of: 'object', file: declarationFile(specifier, file), name: text };
  // Scalars, unions of literals, apiVersion and kind (`IDeployment["kind"]`).
  if (/^(?:string|number|boolean|any|"[^"]*"(?: \| "[^"]*")*|\w+\["\w+"\])$/.test(text)) return { of: 'leaf' };
  return { of: 'unread', text };
}

/** The fields of the first interface a declaration file exports, or null for a type alias (IntOrString, Quantity). */
function declaration(file: string): Declaration {
  const known = declarations.get(file);
  if (known !== undefined) return known;
  const source = readFileSync(file, 'utf8').replace(/[ \t]*\/\*\*[\s\S]*?\*\/\n/g, '');
  const imports = new Map<string, string>();
  for (const [, names, specifier] of source.matchAll(/^import \{ ([^}]+) \} from "([^"]+)";$/gm)) {
    for (const name of (names as string).split(',')) imports.set(name.trim(), specifier as string);
  }
  const [, bases, body] = /^export interface \w+(?: extends ([\w, ]+))? \{\n([\s\S]*?)^\}$/m.exec(source) ?? [];
  let result: Declaration = { fields: null };
  if (body !== undefined) {
    const fields = new Map<string, Type>();
    // Fields an interface inherits from another of the same models (Gateway API's specs do).
    for (const base of bases?.split(',') ?? []) {
      const specifier = imports.get(base.trim());
      if (!specifier?.startsWith('.')) continue;
      for (const [name, type] of declaration(declarationFile(specifier, file)).fields ?? []) fields.set(name, type);
    }
    for (const [, name, type] of body.matchAll(/^ {4}"([^"]+)"\??: ([\s\S]*?);\n(?= {4}"|$)/gm)) {
      fields.set(name as string, parseType((type as string).trim(), file, imports));
    }
    result = { fields: fields.size > 0 ? fields : null };
  }
  declarations.set(file, result);
  return result;
}

/** Every field of `value` that its type does not declare, as a path. */
function unknownFields(value: unknown, type: Type, path: string): string[] {
  if (value === null || value === undefined) return [];
  switch (type.of) {
    case 'leaf':
      return [];
    case 'unread':
      return [`${path}: a field of a type this check cannot read (${type.text})`];
    case 'array':
      return Array.isArray(value) ? value.flatMap((item, i) => unknownFields(item, type.item, `${path}[${i}]`)) : [];
    case 'map':
      return Object.entries(value as object).flatMap(([key, item]) => unknownFields(item, type.item, `${path}.${key}`));
    case 'object': {
      const { fields } = declaration(type.file);
      if (fields === null || typeof value !== 'object') return [];
      return Object.entries(value as object).flatMap(([key, item]) => {
        const field = fields.get(key);
        return field === undefined ? [`${path}.${key}: unknown field`] : unknownFields(item, field, `${path}.${key}`);
      });
    }
  }
}

interface Model {
  validate(): void;
}

/**
 * The object as the API server decodes it: kubectl kustomize writes long base64 values of a
 * Secret's data (and a ConfigMap's binaryData) over several lines, and Go's base64 decoder skips
 * line breaks, where the schema's format of bytes allows none.
 */
function asDecoded(object: KubeObject): KubeObject {
  const field = object.kind === 'Secret' ? 'data' : object.kind === 'ConfigMap' ? 'binaryData' : null;
  const values = field === null ? undefined : (object[field] as Record<string, string> | undefined);
  if (field === null || values === undefined) return object;
  const joined = Object.fromEntries(Object.entries(values).map(([key, value]) => [key, value.replace(/[\r\n]/g, '')]));
  return { ...object, [field]: joined };
}

/**
 * Why an API server of that release would refuse the object's shape: each a line naming the
 * object and the field; none when it is valid.
 */
export async function schemaErrors(object: KubeObject): Promise<string[]> {
  const name = `${object.kind} ${object.metadata?.name}`;
  const specifier = modelModule(object);
  let Model: new (data: unknown) => Model;
  try {
    Model = ((await import(specifier)) as Record<string, new (data: unknown) => Model>)[object.kind] as never;
  } catch {
    return [`${name}: no model of ${object.apiVersion} ${object.kind}`];
  }
  const errors: string[] = [];
  try {
    new Model(asDecoded(object)).validate();
  } catch (error) {
    errors.push(`${name}: ${(error as Error).message}`);
  }
  const root: Type = { of: 'object', file: declarationFile(specifier), name: object.kind };
  errors.push(...unknownFields(object, root, '').map((field) => `${name}: ${field.slice(1)}`));
  return errors;
}
