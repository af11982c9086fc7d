import { performance } from 'node:perf_hooks';
import { fail, header, isObject, type JsonObject, show } from './assert.js';
import type { Context } from './context.js';
import type { Response } from './http.js';
import { envelope, envelopes, Message } from './protobuf.js';

/**
 * The service's RPCs as a client with no library calls them: the Connect protocol's JSON POSTs
 * (unary, and the server stream's enveloped messages) over whatever the kit speaks, and gRPC
 * itself over HTTP/2 (`application/grpc`, protobuf messages written and read by `protobuf.ts`,
 * the status in the trailers). Errors are read in either protocol into one form, their
 * `google.rpc.Status` details decoded.
 */

/** gRPC's status codes by number, named as the Connect protocol names them. */
export const CODES = [
  'ok',
  'canceled',
  'unknown',
  'invalid_argument',
  'deadline_exceeded',
  'not_found',
  'already_exists',
  'permission_denied',
  'resource_exhausted',
  'failed_precondition',
  'aborted',
  'out_of_range',
  'unimplemented',
  'internal',
  'unavailable',
  'data_loss',
  'unauthenticated',
] as const;

export type CodeName = (typeof CODES)[number];

/** The HTTP status of each code in a Connect unary error (the Connect protocol's table). */
const CONNECT_STATUS: Readonly<Record<string, number>> = {
  canceled: 499,
  unknown: 500,
  invalid_argument: 400,
  deadline_exceeded: 504,
  not_found: 404,
  already_exists: 409,
  permission_denied: 403,
  resource_exhausted: 429,
  failed_precondition: 400,
  aborted: 409,
  out_of_range: 400,
  unimplemented: 501,
  internal: 500,
  unavailable: 503,
  data_loss: 500,
  unauthenticated: 401,
};

/** The `domain` of every ErrorInfo the contract asks for. */
export const ERROR_DOMAIN = 'greeting-service';

/** A call's error status, whichever protocol carried it. */
export interface RpcError {
  /** The answer that carried it. */
  res: Response;
  code: string;
  message: string;
  /** Each detail: its type's full name (`google.rpc.ErrorInfo`) and its message's bytes. */
  details: { type: string; value: Buffer }[];
}

/** What the details of an error say, decoded. */
export interface ErrorDetails {
  errorInfo: { reason: string; domain: string } | null;
  violations: { field: string; description: string }[];
  requestId: string | null;
  /** RetryInfo's delay in seconds; null without RetryInfo. */
  retrySeconds: number | null;
}

const where = (res: Response) => `${res.request.method} ${res.request.path}`;

const CONNECT_HEADERS = { 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1' };

/** A unary call in the Connect protocol with JSON: its answer, and the message or the error it holds. */
export async function connectCall(
  ctx: Context,
  path: string,
  message: object,
  headers: Record<string, string> = {},
): Promise<{ res: Response; value: JsonObject | null; error: RpcError | null }> {
  const res = await ctx.send({
    method: 'POST',
    path,
    atRoot: true,
    headers: { ...CONNECT_HEADERS, ...headers },
    body: JSON.stringify(message),
  });
  if (!/^application\/json\b/i.test(header(res, 'content-type') ?? '')) {
    fail(
      `${where(res)}: a Connect answer in application/json`,
      `${res.status} ${header(res, 'content-type') ?? 'no Content-Type'} ${show(res.text.slice(0, 160))}`,
    );
  }
  let body: unknown;
  try {
    body = JSON.parse(res.text);
  } catch {
    fail(`${where(res)}: a JSON body`, show(res.text.slice(0, 160)));
  }
  if (!isObject(body)) fail(`${where(res)}: a JSON object`, show(body));
  if (res.status === 200) return { res, value: body, error: null };
  return { res, value: null, error: connectError(res, body) };
}

/** The message of a unary call that must succeed. */
export async function connectValue(
  ctx: Context,
  path: string,
  message: object,
  headers: Record<string, string> = {},
): Promise<{ res: Response; value: JsonObject }> {
  const { res, value } = await connectCall(ctx, path, message, headers);
  if (value === null) fail(`${where(res)} ${show(message)}: 200 and a message`, `${res.status} ${show(res.text)}`);
  return { res, value };
}

/** The error of a unary call that must fail. */
export async function connectFailure(
  ctx: Context,
  path: string,
  message: object,
  headers: Record<string, string> = {},
): Promise<RpcError> {
  const { res, error } = await connectCall(ctx, path, message, headers);
  if (error === null) fail(`${where(res)} ${show(message)}: an error`, `${res.status} ${show(res.text)}`);
  return error;
}

/** A Connect error's body (`{code, message, details: [{type, value}]}`) in the kit's form. */
function connectError(res: Response, body: JsonObject): RpcError {
  const { code, message, details = [] } = body;
  if (typeof code !== 'string') fail(`${where(res)}: a Connect error {code, message, details}`, show(body));
  if (!Array.isArray(details)) fail(`${where(res)}: the error's details an array`, show(details));
  return {
    res,
    code,
    message: typeof message === 'string' ? message : '',
    details: details.map((detail: unknown) => {
      if (!isObject(detail) || typeof detail.type !== 'string' || typeof detail.value !== 'string') {
        return fail(`${where(res)}: each detail {type, value} with value in base64`, show(detail));
      }
      return { type: detail.type, value: Buffer.from(detail.value, 'base64') };
    }),
  };
}

/** The messages of a server stream in the Connect protocol with JSON, each with when it came (ms from the call), and its end. */
export async function connectStream(
  ctx: Context,
  path: string,
  message: object,
): Promise<{ res: Response; messages: { value: JsonObject; at: number }[]; error: RpcError | null }> {
  const arrivals: number[] = [];
  let pending = Buffer.alloc(0);
  const started = performance.now();
  const res = await ctx.send({
    method: 'POST',
    path,
    atRoot: true,
    headers: { 'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1' },
    body: envelope(0, Buffer.from(JSON.stringify(message))),
    onData: (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      const { items, length } = envelopes(pending);
      pending = pending.subarray(length);
      for (const _ of items) arrivals.push(performance.now() - started);
    },
  });
  if (res.status !== 200 || !/^application\/connect\+json\b/i.test(header(res, 'content-type') ?? '')) {
    fail(
      `${where(res)}: 200 application/connect+json`,
      `${res.status} ${header(res, 'content-type') ?? 'no Content-Type'} ${show(res.text.slice(0, 160))}`,
    );
  }
  const { items, length } = envelopes(res.body);
  const last = items.at(-1);
  if (length !== res.body.length || last === undefined || (last.flags & 2) === 0) {
    fail(
      `${where(res)}: whole envelopes, the last one ending the stream (flag 2)`,
      show(res.body.toString('latin1').slice(0, 160)),
    );
  }
  const json = (data: Buffer): JsonObject => {
    try {
      const value: unknown = JSON.parse(data.toString('utf8'));
      if (isObject(value)) return value;
    } catch {}
    return fail(`${where(res)}: each message a JSON object`, show(data.toString('utf8')));
  };
  const end = json(last.data);
  const messages = items.slice(0, -1).map((item, i) => ({ value: json(item.data), at: arrivals[i] ?? 0 }));
  const error = end.error === undefined ? null : connectError(res, isObject(end.error) ? end.error : {});
  return { res, messages, error };
}

/** A call in gRPC itself over HTTP/2: the protobuf messages of its answer, and its status. */
export async function grpcCall(
  ctx: Context,
  path: string,
  message: Uint8Array,
  headers: Record<string, string> = {},
): Promise<{ res: Response; messages: Message[]; error: RpcError | null }> {
  const res = await ctx.send({
    method: 'POST',
    path,
    atRoot: true,
    headers: { 'Content-Type': 'application/grpc', TE: 'trailers', ...headers },
    body: envelope(0, message),
  });
  if (res.httpVersion !== '2.0') fail(`${where(res)} over HTTP/2`, `HTTP/${res.httpVersion}`);
  if (res.status !== 200 || !/^application\/grpc(?:\+proto)?(?:;|$)/i.test(header(res, 'content-type') ?? '')) {
    fail(`${where(res)}: 200 application/grpc`, `${res.status} ${header(res, 'content-type') ?? 'no Content-Type'}`);
  }
  // A trailers-only answer carries its status in its head.
  const fields = { ...res.headers, ...res.trailers };
  const status = fields['grpc-status'];
  if (typeof status !== 'string' || !/^\d+$/.test(status)) {
    fail(`${where(res)}: grpc-status in the trailers`, show(status));
  }
  const { items, length } = envelopes(res.body);
  if (length !== res.body.length) fail(`${where(res)}: whole length-prefixed messages`, `${res.body.length} bytes`);
  if (items.some((item) => item.flags !== 0))
    fail(`${where(res)}: uncompressed messages (none was asked)`, show(items.map((item) => item.flags)));
  const messages = items.map((item) => readMessage(item.data, `${where(res)}: a protobuf message`));
  if (status === '0') return { res, messages, error: null };
  return { res, messages, error: grpcError(res, Number(status), fields) };
}

function readMessage(bytes: Buffer, what: string): Message {
  try {
    return new Message(bytes);
  } catch (error) {
    return fail(what, `${(error as Error).message}: ${bytes.toString('hex').slice(0, 80)}`);
  }
}

/** A gRPC status: its code, `grpc-message` percent-decoded, and the `google.rpc.Status` of `grpc-status-details-bin`. */
function grpcError(res: Response, code: number, fields: Record<string, unknown>): RpcError {
  const text = typeof fields['grpc-message'] === 'string' ? fields['grpc-message'] : '';
  let message = text;
  try {
    message = decodeURIComponent(text);
  } catch {}
  const bin = fields['grpc-status-details-bin'];
  const details: RpcError['details'] = [];
  if (typeof bin === 'string') {
    const status = readMessage(
      Buffer.from(bin, 'base64'),
      `${where(res)}: grpc-status-details-bin a google.rpc.Status`,
    );
    if (status.number(1) !== code) {
      fail(`${where(res)}: grpc-status-details-bin's code that of grpc-status, ${code}`, String(status.number(1)));
    }
    for (const any of status.messages(3)) {
      const url = any.text(1);
      details.push({ type: url.slice(url.lastIndexOf('/') + 1), value: any.bytes(2) ?? Buffer.alloc(0) });
    }
  }
  return { res, code: CODES[code] ?? String(code), message, details };
}

/** The details of an error, decoded by type; types the kit does not read are left out. */
export function detailsOf(error: RpcError): ErrorDetails {
  const decoded: ErrorDetails = { errorInfo: null, violations: [], requestId: null, retrySeconds: null };
  for (const { type, value } of error.details) {
    const message = readMessage(value, `${where(error.res)}: the detail ${type}, a protobuf message`);
    if (type === 'google.rpc.ErrorInfo') decoded.errorInfo = { reason: message.text(1), domain: message.text(2) };
    else if (type === 'google.rpc.BadRequest') {
      for (const violation of message.messages(1)) {
        decoded.violations.push({ field: violation.text(1), description: violation.text(2) });
      }
    } else if (type === 'google.rpc.RequestInfo') decoded.requestId = message.text(1);
    else if (type === 'google.rpc.RetryInfo') decoded.retrySeconds = message.message(1)?.number(1) ?? 0;
  }
  return decoded;
}

/**
 * An error as the contract's gRPC section asks: `code` (over the Connect protocol, with the HTTP
 * status of its table), a message, ErrorInfo{reason, domain "greeting-service"}, and RequestInfo
 * with the call's request id, that of the answer's `x-request-id`.
 */
export function expectRpcError(error: RpcError, code: CodeName, reason: string): ErrorDetails {
  const { res } = error;
  if (error.code !== code) fail(`${where(res)}: ${code}`, `${error.code} ${show(error.message)}`);
  // A Connect unary error says its code by its HTTP status too; a stream's and gRPC's come in a 200.
  if (/^application\/json\b/i.test(header(res, 'content-type') ?? '')) {
    const status = CONNECT_STATUS[code];
    if (res.status !== status)
      fail(`${where(res)}: HTTP status ${status} for ${code} (the Connect protocol)`, String(res.status));
  }
  if (error.message === '') fail(`${where(res)}: the status's message`, 'none');
  const details = detailsOf(error);
  const info = details.errorInfo;
  if (info?.reason !== reason || info.domain !== ERROR_DOMAIN) {
    fail(
      `${where(res)}: ErrorInfo{reason: ${reason}, domain: ${ERROR_DOMAIN}} among the details`,
      show(info ?? error.details.map((d) => d.type)),
    );
  }
  const id = header(res, 'x-request-id');
  if (id === undefined || id === '') fail(`${where(res)}: x-request-id in the response metadata`, 'none');
  if (details.requestId !== id)
    fail(`${where(res)}: RequestInfo{request_id: ${show(id)}} among the details`, show(details.requestId));
  return details;
}

/** The error's BadRequest names `field`. */
export function expectViolation(error: RpcError, details: ErrorDetails, field: string): void {
  if (!details.violations.some((violation) => violation.field === field && violation.description !== '')) {
    fail(`${where(error.res)}: BadRequest with a field violation of ${field}`, show(details.violations));
  }
}
