import assert from 'node:assert/strict';
import { Ajv, type ValidateFunction } from 'ajv';
import type { FastifyInstance } from 'fastify';
import { API_VERSION } from '../src/version.js';

/**
 * Checks real responses against the OpenAPI document of the app that gave them: the status is
 * one the operation lists, every header it documents as required is there, every documented
 * header and the body match their schemas. The document is compiled once per distinct document
 * (a configuration), each schema once, when first used.
 */

// biome-ignore lint/suspicious/noExplicitAny: the OpenAPI document, walked by its own structure
type Json = any;

export interface SentRequest {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  /** Sent by app.inject, which resolves the path's dot segments (`/x/../api`) before routing. */
  injected?: boolean;
}

export interface ReceivedResponse {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  text: string;
}

/** A documented operation, with the JSON pointer of its responses. */
interface Route {
  method: string;
  pattern: RegExp;
  operation: Json;
  pointer: string;
  api: boolean;
}

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

function escapePointer(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export class DocumentConformance {
  readonly #document: Json;
  readonly #ajv: Ajv;
  readonly #validators = new Map<string, ValidateFunction>();
  readonly #routes: Route[] = [];
  /** Where the documentation page lives: its routes are not operations of the API. */
  readonly #docs: string;
  readonly #proto: string;

  constructor(document: Json) {
    this.#document = document;
    this.#ajv = new Ajv({ strict: false, validateSchema: false, allErrors: true });
    this.#ajv.addSchema(document, 'openapi.json');
    // Every path is from the host's root; the context path is what comes before `/openapi.json`.
    const documentPath = Object.keys(document.paths).find((path) => path.endsWith('/openapi.json')) ?? '/openapi.json';
    const context = documentPath.slice(0, -'/openapi.json'.length);
    this.apiBase = `${context}/api`;
    const versioned = `${this.apiBase}/v${API_VERSION}/`;
    for (const [path, item] of Object.entries<Json>(document.paths)) {
      const api = path.startsWith(versioned);
      // Every operation under `/api/v1` is served under `/api` too, as the document's description says.
      for (const template of api ? [path, `${this.apiBase}/${path.slice(versioned.length)}`] : [path]) {
        // A parameter may be empty (`/api/hello//` greets no one), as the router reads it.
        const source = escapeRegExp(template).replace(/\\\{[^}]+\\\}/g, '[^/]*');
        for (const method of METHODS) {
          if (item[method] === undefined) continue;
          this.#routes.push({
            method,
            pattern: new RegExp(`^${source}/?$`),
            operation: item[method],
            pointer: `#/paths/${escapePointer(path)}/${method}/responses`,
            api,
          });
        }
      }
    }
    this.#docs = `${context}/docs`;
    this.#proto = `${context}/proto`;
  }

  /** The unversioned path of the operations under `/api`. */
  readonly apiBase: string;

  get document(): Json {
    return this.#document;
  }

  /** Every documented (operation, status): `getHello 200`. */
  pairs(): { operationId: string; status: string }[] {
    const seen = new Set<string>();
    const pairs: { operationId: string; status: string }[] = [];
    for (const { operation } of this.#routes) {
      for (const status of Object.keys(operation.responses)) {
        const key = `${operation.operationId} ${status}`;
        if (seen.has(key)) continue;
        seen.add(key);
        pairs.push({ operationId: operation.operationId, status });
      }
    }
    return pairs;
  }

  #resolve(pointer: string): { value: Json; pointer: string } {
    let value = this.#document;
    let at = pointer;
    for (const segment of pointer.slice(2).split('/')) {
      value = value[segment.replaceAll('~1', '/').replaceAll('~0', '~')];
      if (value === undefined) return { value, pointer: at };
    }
    if (typeof value?.$ref === 'string') {
      at = value.$ref;
      return this.#resolve(at);
    }
    return { value, pointer: at };
  }

  #validator(pointer: string): ValidateFunction {
    let validate = this.#validators.get(pointer);
    if (validate === undefined) {
      validate = this.#ajv.compile({ $ref: `openapi.json${pointer}` });
      this.#validators.set(pointer, validate);
    }
    return validate;
  }

  #schemaProblems(pointer: string, value: unknown, what: string): string[] {
    const validate = this.#validator(pointer);
    if (validate(value)) return [];
    return [`${what} does not match its schema: ${this.#ajv.errorsText(validate.errors)}`];
  }

  /**
   * Which part of the document describes the answer to this request: its operation's responses, or,
   * for a path that is no operation's, the responses every operation of its kind shares.
   */
  #responsesFor(
    method: string,
    path: string,
    injected: boolean,
  ): { pointer: string; operationId: string; operation: boolean } | 'undocumented' {
    // As the router reads it: dot segments resolved when injected, then percent-decoded.
    let read = path;
    if (injected) {
      try {
        read = new URL(`http://localhost${path}`).pathname;
      } catch {
        // Not a URL: read as sent.
      }
    }
    let candidates = [read];
    try {
      candidates = [read, decodeURI(read)];
    } catch {
      // A badly encoded path matches as sent only.
    }
    const documentedMethod = method === 'head' ? 'get' : method;
    for (const candidate of candidates) {
      const matching = this.#routes.filter((route) => route.pattern.test(candidate));
      const exact = matching.find((route) => route.method === documentedMethod);
      if (exact !== undefined) {
        return { pointer: exact.pointer, operationId: exact.operation.operationId, operation: true };
      }
      const other = matching[0];
      if (other !== undefined) {
        return { pointer: other.pointer, operationId: `${other.operation.operationId} (path)`, operation: false };
      }
    }
    // The documentation page's files, and the .proto files, are no operations.
    const files = (candidate: string) =>
      candidate === this.#docs ||
      candidate.startsWith(`${this.#docs}/`) ||
      candidate === this.#proto ||
      candidate.startsWith(`${this.#proto}/`);
    if (candidates.some(files)) {
      return 'undocumented';
    }
    const api = candidates.some((candidate) => candidate === this.apiBase || candidate.startsWith(`${this.apiBase}/`));
    const kin = this.#routes.find((route) => route.api === api);
    assert.ok(kin !== undefined);
    return { pointer: kin.pointer, operationId: `${kin.operation.operationId} (no route)`, operation: false };
  }

  /** What the document does not say of this answer to this request; nothing when it describes it. */
  problems(request: SentRequest, response: ReceivedResponse): string[] {
    const method = (request.method ?? 'GET').toLowerCase();
    // A CORS preflight is the protocol of browsers, not an operation of the API.
    if (method === 'options' && request.headers?.['access-control-request-method'] !== undefined) return [];
    // An absolute-form target is read by its path, as the router reads it; a fragment is no part of it.
    const target = request.path.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, '').replace(/^(?!\/)/, '/');
    const path = target.split(/[?#]/, 1)[0] || '/';
    const found = this.#responsesFor(method, path, request.injected === true);
    if (found === 'undocumented') return [];
    // A request for no operation (another method, an unknown path) gets the errors every operation
    // of its kind shares; a body sent with it may first be refused as a body (413, 415), and that
    // answer belongs to no operation.
    if (!found.operation && this.#resolve(`${found.pointer}/${response.status}`).value === undefined) return [];
    return this.#problemsAt(found.pointer, found.operationId, method, response);
  }

  /** What the document does not say of this answer as one of the operation `operationId`'s. */
  operationProblems(operationId: string, request: SentRequest, response: ReceivedResponse): string[] {
    const route = this.#routes.find(({ operation }) => operation.operationId === operationId);
    if (route === undefined) return [`no operation ${operationId}`];
    return this.#problemsAt(route.pointer, operationId, (request.method ?? 'GET').toLowerCase(), response);
  }

  #problemsAt(responsesPointer: string, operationId: string, method: string, response: ReceivedResponse): string[] {
    // A status the operation does not list is its `default` response's, when it has one.
    const listed = this.#resolve(`${responsesPointer}/${response.status}`);
    const { value: documented, pointer } =
      listed.value === undefined ? this.#resolve(`${responsesPointer}/default`) : listed;
    if (documented === undefined) return [`${operationId}: status ${response.status} is not documented`];
    const problems: string[] = [];
    for (const [name, entry] of Object.entries<Json>(documented.headers ?? {})) {
      const { value: header, pointer: headerPointer } = this.#resolve(
        entry.$ref ?? `${pointer}/headers/${escapePointer(name)}`,
      );
      const raw = response.headers[name.toLowerCase()];
      if (raw === undefined) {
        if (header.required === true) problems.push(`header ${name} is missing`);
        continue;
      }
      const text = String(raw);
      const type = header.schema?.type;
      const value = (type === 'integer' || type === 'number') && /^-?\d+(\.\d+)?$/.test(text) ? Number(text) : text;
      problems.push(...this.#schemaProblems(`${headerPointer}/schema`, value, `header ${name}: ${text}`));
    }
    const content = documented.content as Record<string, Json> | undefined;
    // HEAD is GET without a body, except what is answered before the request is read.
    if (method === 'head') {
      // Nothing to check.
    } else if (content === undefined) {
      if (response.text !== '') problems.push('a body where none is documented');
    } else {
      const type = String(response.headers['content-type'] ?? '');
      const media = Object.keys(content).find(
        (key) => key === type || key.split(';', 1)[0] === type.split(';', 1)[0]?.trim(),
      );
      if (media === undefined) problems.push(`Content-Type ${type} is not documented`);
      else {
        let body: unknown = response.text;
        if (/json/.test(media)) {
          try {
            body = JSON.parse(response.text);
          } catch {
            problems.push('the body is not JSON');
          }
        }
        problems.push(...this.#schemaProblems(`${pointer}/content/${escapePointer(media)}/schema`, body, 'the body'));
      }
    }
    return problems.map((problem) => `${operationId} ${response.status}: ${problem}`);
  }

  /** Fails unless the document describes this answer to this request (as one of `operationId`'s). */
  check(request: SentRequest, response: ReceivedResponse, operationId?: string): void {
    const problems = [
      ...this.problems(request, response),
      ...(operationId === undefined ? [] : this.operationProblems(operationId, request, response)),
    ];
    if (problems.length > 0) {
      assert.fail(
        `${request.method ?? 'GET'} ${request.path}: the OpenAPI document does not describe the answer:\n` +
          `${problems.join('\n')}\n${response.text.slice(0, 500)}`,
      );
    }
  }
}

export interface Operation {
  id: string;
  method: string;
  /** The path as the document has it (the canonical `/api/v1/...`), examples filled in. */
  path: string;
  api: boolean;
  query: string;
  body: string | undefined;
  media: string | undefined;
}

/** Every operation of the document, with a valid request made of its examples. */
export function documentedOperations(document: Json, apiBase: string): Operation[] {
  const found: Operation[] = [];
  for (const [template, item] of Object.entries<Json>(document.paths)) {
    for (const method of ['get', 'post', 'put', 'patch']) {
      const operation = item[method];
      if (operation === undefined) continue;
      let path = template;
      const query: string[] = [];
      for (const entry of operation.parameters ?? []) {
        const parameter = entry.$ref === undefined ? entry : document.components.parameters.Version;
        const example = parameter.example ?? parameter.schema?.examples?.[0];
        if (parameter.in === 'path') path = path.replace(`{${parameter.name}}`, encodeURIComponent(example));
        if (parameter.in === 'query' && parameter.required) query.push(`${parameter.name}=${example}`);
      }
      const content = operation.requestBody?.content?.['application/json'];
      const body =
        content === undefined ? undefined : JSON.stringify(content.example ?? content.examples.example1.value);
      found.push({
        id: operation.operationId,
        method: method.toUpperCase(),
        path,
        api: template.startsWith(`${apiBase}/`),
        query: query.join('&'),
        body,
        media: content === undefined ? undefined : 'application/json',
      });
    }
  }
  return found;
}

const byDocument = new Map<string, DocumentConformance>();
const byApp = new WeakMap<FastifyInstance, DocumentConformance>();

/** The conformance check of an app's document, compiled once per distinct document. */
export async function conformanceOf(app: FastifyInstance): Promise<DocumentConformance> {
  const known = byApp.get(app);
  if (known !== undefined) return known;
  const { object: document } = await app.openapi();
  const key = JSON.stringify(document);
  let conformance = byDocument.get(key);
  if (conformance === undefined) {
    conformance = new DocumentConformance(document);
    byDocument.set(key, conformance);
  }
  byApp.set(app, conformance);
  return conformance;
}
