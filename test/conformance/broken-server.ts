import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { Decimal } from 'decimal.js';

/**
 * A small stand-in for the service, written for the conformance tests: it keeps the clauses of
 * the groups hello, search, echo, errors, request-id and exchange, except those it is told to
 * break. The conformance kit must then fail exactly the checks of the clauses broken.
 */

export type Fault =
  /** Exchange in binary floating point instead of decimals. */
  | 'float-exchange'
  /** No X-Request-Id on successful answers. */
  | 'no-request-id-on-success'
  /** An HTML page for an unknown route. */
  | 'html-404'
  /** The echo goes through JSON.parse and JSON.stringify. */
  | 'lossy-echo'
  /** A request with a traceparent of a version it does not know fails. */
  | 'strict-traceparent'
  /** The greeting of שלום answered by an injected fault (X-Fault-Injected: abort) that is an HTML page. */
  | 'html-injected-fault';

const TABLE = [
  { code: 'BHD', name: 'Bahraini Dinar', minor_units: 3, rate: '0.376' },
  { code: 'EUR', name: 'Euro', minor_units: 2, rate: '0.92' },
  { code: 'GBP', name: 'Pound Sterling', minor_units: 2, rate: '0.79' },
  { code: 'JPY', name: 'Yen', minor_units: 0, rate: '150.85' },
  { code: 'KWD', name: 'Kuwaiti Dinar', minor_units: 3, rate: '0.3077' },
  { code: 'USD', name: 'US Dollar', minor_units: 2, rate: '1' },
  { code: 'VND', name: 'Dong', minor_units: 0, rate: '24765' },
];

const BODY_LIMIT = 1024 * 1024;
const ID = /^[A-Za-z0-9._:-]{1,128}$/;
const AMOUNT = /^0*(?:\d{1,12}(?:\.\d{1,10})?|1000000000000(?:\.0{1,10})?)$/;

interface Detail {
  field: string;
  message: string;
  value: unknown;
}

class Failure {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly details: Detail[] = [],
    readonly headers: Record<string, string> = {},
  ) {}
}

const invalid = (...details: Detail[]) => new Failure(400, 'VALIDATION_ERROR', details);

function envelope(failure: Failure, id: string): string {
  const { code, details } = failure;
  return JSON.stringify({
    error: { code, message: code, details, timestamp: new Date().toISOString(), request_id: id },
  });
}

function localNow(): string {
  const now = new Date();
  return new Date(now.getTime() - now.getTimezoneOffset() * 60_000).toISOString().slice(0, -1);
}

function decode(text: string, field: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    throw invalid({ field, message: 'is not percent-encoded UTF-8', value: text });
  }
}

/** The query's parameters, each decoded; repeated ones are invalid. */
function query(search: string): Map<string, string> {
  const params = new Map<string, string>();
  const repeated: Detail[] = [];
  for (const part of search.split('&').filter((p) => p !== '')) {
    const [rawName = '', ...rest] = part.split('=');
    const name = decode(rawName, rawName);
    const value = decode(rest.join('='), name);
    if (params.has(name)) repeated.push({ field: name, message: 'is repeated', value });
    params.set(name, value);
  }
  if (repeated.length > 0) throw invalid(...repeated);
  return params;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  const chunks: Buffer[] = [];
  let size = 0;
  // Read to its end even when over the limit, so that the answer never races the upload.
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= BODY_LIMIT) chunks.push(chunk);
  }
  if (size > BODY_LIMIT) throw new Failure(413, 'PAYLOAD_TOO_LARGE');
  if (type !== 'application/json' && !/^application\/[^/]+\+json$/.test(type))
    throw new Failure(415, 'UNSUPPORTED_MEDIA_TYPE');
  return Buffer.concat(chunks).toString('utf8');
}

function echo(text: string, faults: ReadonlySet<Fault>): string {
  if (text.trim() === '') throw invalid({ field: 'body', message: 'is required', value: null });
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Failure(400, 'MALFORMED_JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalid({ field: 'body', message: 'must be an object', value });
  }
  let received = text;
  if (faults.has('lossy-echo')) {
    try {
      received = JSON.stringify(value);
    } catch {
      throw invalid({ field: 'body', message: 'is nested too deeply', value: null });
    }
  }
  return `{"received":${received},"echo":true,"timestamp":"${localNow()}"}`;
}

function searchResult(params: Map<string, string>): unknown {
  const keyword = params.get('keyword');
  const page = params.get('page');
  const details: Detail[] = [];
  if (keyword === undefined || keyword.trim() === '')
    details.push({ field: 'keyword', message: 'is required', value: keyword ?? null });
  if (page !== undefined && (!/^[1-9]\d*$/.test(page) || Number(page) > 2147483647)) {
    details.push({ field: 'page', message: 'must be an integer from 1 to 2147483647', value: page });
  }
  if (details.length > 0) throw invalid(...details);
  const n = page === undefined ? 1 : Number(page);
  return { keyword, page: n, results: `Search results for '${keyword}' (page ${n})` };
}

function exchange(params: Map<string, string>, faults: ReadonlySet<Fault>): string {
  const details: Detail[] = [];
  for (const field of ['from', 'to']) {
    const value = params.get(field);
    if (value === undefined || !/^[A-Za-z]{3}$/.test(value))
      details.push({ field, message: 'must be three letters', value: value ?? null });
  }
  const amount = params.get('amount');
  if (amount === undefined || !AMOUNT.test(amount))
    details.push({ field: 'amount', message: 'must be a plain decimal', value: amount ?? null });
  if (details.length > 0) throw invalid(...details);
  const [from, to] = ['from', 'to'].map((field) => TABLE.find((c) => c.code === params.get(field)?.toUpperCase()));
  const unsupported = (['from', 'to'] as const)
    .filter((_, i) => [from, to][i] === undefined)
    .map((field) => ({ field, message: 'is not a supported currency', value: params.get(field) }));
  if (from === undefined || to === undefined) throw new Failure(422, 'UNSUPPORTED_CURRENCY', unsupported);
  const value = new Decimal(amount as string);
  let rate: string;
  let result: string;
  if (from === to) [rate, result] = ['1', value.toString()];
  else if (faults.has('float-exchange')) {
    const cross = Number(to.rate) / Number(from.rate);
    rate = String(Number(cross.toFixed(6)));
    result = String(Number((Number(amount) * cross).toFixed(to.minor_units)));
  } else {
    const D = Decimal.clone({ precision: 60 });
    rate = new D(to.rate).div(from.rate).toDecimalPlaces(6, Decimal.ROUND_HALF_EVEN).toString();
    result = value.times(to.rate).div(from.rate).toDecimalPlaces(to.minor_units, Decimal.ROUND_HALF_EVEN).toFixed();
  }
  return `{"from":"${from.code}","to":"${to.code}","amount":${value.toFixed()},"rate":${rate},"result":${result}}`;
}

function currencies(params: Map<string, string>): unknown {
  const page = Number(params.get('page') ?? 1);
  const perPage = Number(params.get('per_page') ?? 20);
  const data = TABLE.slice((page - 1) * perPage, page * perPage).map((c) => ({ ...c, rate: Number(c.rate) }));
  return {
    data,
    pagination: { page, per_page: perPage, total: TABLE.length, total_pages: Math.ceil(TABLE.length / perPage) },
  };
}

const ROUTES: Record<string, string[]> = {
  '/healthz': ['GET'],
  '/api/hello': ['GET'],
  '/api/search': ['GET'],
  '/api/echo': ['POST'],
  '/api/exchange': ['GET'],
  '/api/currencies': ['GET'],
  '/api/profile': ['GET', 'POST', 'PATCH', 'PUT'],
};

async function answer(req: IncomingMessage, faults: ReadonlySet<Fault>): Promise<string> {
  if (req.headers.host === undefined) throw invalid({ field: 'Host', message: 'is required', value: null });
  const traceparent = req.headers.traceparent;
  if (faults.has('strict-traceparent') && typeof traceparent === 'string' && !traceparent.startsWith('00-')) {
    throw new Failure(500, 'INTERNAL_ERROR');
  }
  const [rawPath = '', search = ''] = (req.url ?? '/').split('?');
  const path = decode(rawPath, 'path').replace(/(.)\/$/, '$1');
  const method = req.method === 'HEAD' ? 'GET' : (req.method ?? 'GET');
  const params = query(search);
  const name = /^\/api\/hello\/([^/]+)$/.exec(path);
  const item = /^\/api\/currencies\/([^/]+)$/.exec(path);
  if ((name !== null || item !== null) && method !== 'GET') {
    throw new Failure(405, 'METHOD_NOT_ALLOWED', [], { Allow: 'GET, HEAD' });
  }
  if (name !== null) return JSON.stringify({ greeting: `Hello, ${name[1]}!` });
  if (item !== null) {
    const currency = TABLE.find((c) => c.code === item[1]?.toUpperCase());
    if (currency === undefined) throw new Failure(404, 'NOT_FOUND');
    return JSON.stringify({ ...currency, rate: Number(currency.rate) });
  }
  const methods = ROUTES[path];
  if (methods === undefined) throw new Failure(404, 'NOT_FOUND');
  if (!methods.includes(method)) {
    const allow = [...methods, ...(methods.includes('GET') ? ['HEAD'] : [])].join(', ');
    throw new Failure(405, 'METHOD_NOT_ALLOWED', [], { Allow: allow });
  }
  if (path === '/healthz') return '{"status":"ok"}';
  if (path === '/api/hello') return JSON.stringify({ message: 'Hello, World!', timestamp: localNow() });
  if (path === '/api/search') return JSON.stringify(searchResult(params));
  if (path === '/api/echo') return echo(await readBody(req), faults);
  if (path === '/api/exchange') return exchange(params, faults);
  if (path === '/api/currencies') return JSON.stringify(currencies(params));
  return '{"name":null,"email":null,"bio":null}';
}

async function handle(req: IncomingMessage, res: ServerResponse, faults: ReadonlySet<Fault>): Promise<void> {
  const sent = req.headers['x-request-id'];
  const id = typeof sent === 'string' && ID.test(sent) ? sent : randomUUID();
  let status = 200;
  let body: string;
  const headers: Record<string, string> = { 'Content-Type': 'application/json; charset=utf-8' };
  if (faults.has('html-injected-fault') && req.url === `/api/hello/${encodeURIComponent('שלום')}`) {
    req.resume();
    res
      .writeHead(503, { 'Content-Type': 'text/html', 'X-Request-Id': id, 'X-Fault-Injected': 'abort' })
      .end('<html><body>503 Service Unavailable</body></html>');
    return;
  }
  try {
    body = await answer(req, faults);
    if (!faults.has('no-request-id-on-success')) headers['X-Request-Id'] = id;
  } catch (error) {
    const failure = error instanceof Failure ? error : new Failure(500, 'INTERNAL_ERROR');
    status = failure.status;
    Object.assign(headers, failure.headers, { 'X-Request-Id': id });
    body = envelope(failure, id);
    if (status === 404 && faults.has('html-404')) {
      headers['Content-Type'] = 'text/html';
      body = '<html><body><h1>404 Not Found</h1></body></html>';
    }
    req.resume();
  }
  res.writeHead(status, headers).end(req.method === 'HEAD' ? undefined : body);
}

/** Starts the stand-in on a free loopback port; resolves with its base URL and a way to stop it. */
export async function startBrokenServer(faults: readonly Fault[] = []): Promise<{ url: string; server: Server }> {
  const set = new Set(faults);
  const server = createServer({ requireHostHeader: false }, (req, res) => void handle(req, res, set));
  server.on('clientError', (_error, socket) => {
    const id = randomUUID();
    const body = envelope(new Failure(400, 'BAD_REQUEST'), id);
    socket.end(
      `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\nX-Request-Id: ${id}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, server };
}

/** An answer as the proxy passes it on, to alter: status, headers (lower-case names) and body. */
export interface Answer {
  status: number;
  headers: Record<string, string | string[]>;
  body: string;
}

/** What a broken proxy does to one answer: the request as the client sent it, the service's answer. */
export type Alteration = (
  request: { method: string; url: string; headers: IncomingMessage['headers'] },
  answer: Answer,
) => Answer;

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length']);

/**
 * A proxy in front of a service, breaking one thing: each answer passes through `alter` whole
 * (read to its end, then written with its new length). A deployment broken in exactly one way.
 */
export async function startBrokenProxy(
  target: string,
  alter: Alteration,
  /** The request's headers as the proxy passes them on: as they came unless given. */
  passedOn: (headers: IncomingMessage['headers']) => IncomingMessage['headers'] = (headers) => headers,
): Promise<{ url: string; server: Server }> {
  const upstream = new URL(target);
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const forwarded = httpRequest(
      {
        hostname: upstream.hostname,
        port: upstream.port,
        method,
        path: url,
        headers: passedOn(req.headers),
        agent: false,
      },
      (answer) => {
        const body: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => body.push(chunk));
        answer.on('end', () => {
          const headers: Record<string, string | string[]> = {};
          for (const [name, value] of Object.entries(answer.headers)) {
            if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
          }
          const text = Buffer.concat(body).toString('utf8');
          const altered = alter(
            { method, url, headers: req.headers },
            { status: answer.statusCode ?? 502, headers, body: text },
          );
          const length = method === 'HEAD' ? answer.headers['content-length'] : String(Buffer.byteLength(altered.body));
          if (method === 'HEAD' && altered.body !== '') {
            // What Node's server will not send: an answer to HEAD with a body, written as bytes.
            const lines = Object.entries({ ...altered.headers, 'content-length': length ?? '0', connection: 'close' })
              .flatMap(([name, value]) => [value].flat().map((item) => `${name}: ${item}\r\n`))
              .join('');
            res.socket?.end(`HTTP/1.1 ${altered.status} OK\r\n${lines}\r\n${altered.body}`);
            return;
          }
          res.writeHead(altered.status, {
            ...altered.headers,
            ...(length !== undefined && { 'content-length': length }),
          });
          res.end(method === 'HEAD' && altered.body === '' ? undefined : altered.body);
        });
      },
    );
    forwarded.on('error', () => res.destroy());
    forwarded.end(Buffer.concat(chunks));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, server };
}
