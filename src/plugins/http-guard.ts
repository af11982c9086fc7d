import { type IncomingMessage, type ServerOptions, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest, RequestPayload } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError, apiError, type ErrorDetail, unsupportedVersion, validationError } from '../errors.js';
import { continueOnFirstRead, continueWhenRead } from '../lib/expect-continue.js';
import { lingerThenClose } from '../lib/linger.js';

/**
 * What HTTP/1.1 requires a server to refuse, refused with the envelope: Node's HTTP layer would
 * answer some of it by itself, with a bare status and no request id, and let the rest through.
 * Checked once the request hooks are done, so the answer carries every header a reply has, and
 * before the body is read.
 */

/** Node's server options the checks rely on. */
export const HTTP_GUARD_SERVER_OPTIONS = {
  // A request without Host comes to the checks below rather than getting Node's empty 400.
  requireHostHeader: false,
  // A field sent twice is joined with ", " rather than kept only once, so a repeated Host or
  // Content-Type shows in the parsed headers.
  joinDuplicateHeaders: true,
} satisfies ServerOptions;

/** Fields the service reads that may be given only once (RFC 9112, 3.2; RFC 9110, 8.3), with their names as reported. */
const SINGLE_FIELDS = [
  ['host', 'Host'],
  ['content-type', 'Content-Type'],
] as const;

/** The one transfer coding the service reads: chunked alone, empty list elements ignored (RFC 9110, 5.6.1). */
const CHUNKED = /^[ \t,]*chunked[ \t,]*$/i;

/** A Transfer-Encoding whose last coding is chunked, as Node's parser reads it: it then reads the chunks. */
const CHUNKED_LAST = /(?:^|,)[ \t]*chunked[ \t]*$/i;

/** Every value given for a field, in order. */
function fieldValues(request: IncomingMessage, name: string): string[] {
  const values: string[] = [];
  const lines = request.rawHeaders;
  for (let i = 0; i < lines.length; i += 2) {
    if (lines[i]?.toLowerCase() === name) values.push(lines[i + 1] ?? '');
  }
  return values;
}

/**
 * A missing Host in HTTP/1.1, and every field of SINGLE_FIELDS given more than once, as validation
 * details. A field's lines are read only when its value holds a comma, as a joined one does.
 */
function fieldDetails(request: FastifyRequest): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  if (request.headers.host === undefined && request.raw.httpVersionMinor === 1) {
    details.push({ field: 'Host', message: 'is required in HTTP/1.1', value: null });
  }
  for (const [name, field] of SINGLE_FIELDS) {
    if (request.headers[name]?.includes(',') !== true) continue;
    const values = fieldValues(request.raw, name);
    if (values.length > 1) details.push({ field, message: 'must be given once', value: values });
  }
  return details;
}

/** Every field of SINGLE_FIELDS given more than once, as validation details. */
function repeatedFields(raw: IncomingMessage): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  for (const [name, field] of SINGLE_FIELDS) {
    const values = fieldValues(raw, name);
    if (values.length > 1) details.push({ field, message: 'must be given once', value: values });
  }
  return details;
}

/** Why a request must be refused, or null. `unmet`: the requests whose Expect Node found it could not meet. */
function refusal(request: FastifyRequest, unmet: WeakSet<IncomingMessage>): ApiError | null {
  const { raw, headers } = request;
  if (raw.httpVersionMajor !== 1) {
    // HTTP/2 comes over its own streams (Node's Http2ServerRequest); "HTTP/2.0" in an HTTP/1 request line is refused.
    if (!('stream' in raw)) return unsupportedVersion();
    // Node keeps the first of a Content-Type sent twice over HTTP/2, where HTTP/1.1's parser joins
    // them: its lines tell. (nghttp2 resets a stream with Host twice as malformed.)
    const details = repeatedFields(raw);
    if (details.length > 0) return validationError(details);
  } else {
    // The fields are looked at only for what a well-formed request never shows: no Host, a comma in Host or Content-Type.
    const { host } = headers;
    if (host === undefined || host.includes(',') || headers['content-type']?.includes(',') === true) {
      const details = fieldDetails(request);
      if (details.length > 0) return validationError(details);
    }
  }
  // RFC 9112 (6.1): Node's parser reads the chunks of `gzip, chunked` and leaves the gzip to the
  // service, which decodes no transfer coding; read as is, the body would be taken for plain.
  const coding = headers['transfer-encoding'];
  if (coding !== undefined && raw.httpVersionMajor === 1 && !CHUNKED.test(coding)) {
    // Without chunked last, nothing tells where the body ends (RFC 9112, 6.3): Node's parser fails
    // on its first byte, so the connection cannot go on.
    if (!CHUNKED_LAST.test(coding)) {
      return apiError(
        400,
        `Transfer-Encoding: ${coding} does not end in chunked, so the body's length cannot be told.`,
        [],
        {
          connection: 'close',
        },
      );
    }
    return apiError(
      501,
      `Transfer-Encoding: ${coding} is not implemented; the one transfer coding this service reads is chunked.`,
    );
  }
  if (headers.expect !== undefined && unmet.has(raw)) {
    return apiError(
      417,
      `Expect: ${headers.expect} cannot be met; the one expectation this service meets is 100-continue.`,
    );
  }
  return null;
}

const UPGRADE = /upgrade/i;

/** The one Expect the service meets (`continueWhenRead`), as Node's server tells it. */
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i;

const BODY_CUT_SHORT = 'The request body was not received whole.';

/**
 * The body of a request that asks to switch protocols, `length` bytes by its Content-Length: Node's
 * parser let go of the connection at the end of the headers, so the body is read from the socket,
 * within `limitMs` of the first read (else a 408). What follows it stays on the socket, unread.
 */
class UpgradeRequestBody extends Readable {
  #left: number;
  #timer: NodeJS.Timeout | undefined;
  readonly #socket: Socket;
  readonly #limitMs: number;

  constructor(socket: Socket, length: number, limitMs: number) {
    super();
    this.#socket = socket;
    this.#left = length;
    this.#limitMs = limitMs;
    // Its reader takes its errors; one that comes when nobody reads is no crash.
    this.on('error', () => {});
  }

  override _read(): void {
    if (this.#timer === undefined) {
      this.#timer = setTimeout(() => this.destroy(apiError(408)), this.#limitMs);
      this.#socket.on('data', this.#data);
      this.#socket.once('end', this.#cut);
      this.#socket.once('close', this.#cut);
    }
    this.#socket.resume();
  }

  readonly #data = (chunk: Buffer): void => {
    const body = chunk.subarray(0, this.#left);
    this.#left -= body.length;
    if (this.#left > 0) {
      if (!this.push(body)) this.#socket.pause();
      return;
    }
    this.#stop();
    this.#socket.pause();
    if (chunk.length > body.length) this.#socket.unshift(chunk.subarray(body.length));
    this.push(body);
    this.push(null);
  };

  readonly #cut = (): void => {
    this.destroy(apiError(400, BODY_CUT_SHORT));
  };

  #stop(): void {
    clearTimeout(this.#timer);
    this.#socket.off('data', this.#data);
    this.#socket.off('end', this.#cut);
    this.#socket.off('close', this.#cut);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#stop();
    callback(error);
  }
}

/** Whether a request asks to switch protocols (Upgrade, with Connection: upgrade). */
function asksToSwitch({ headers }: FastifyRequest): boolean {
  return headers.upgrade !== undefined && UPGRADE.test(headers.connection ?? '');
}

/**
 * The body of a request that asks to switch protocols, which `curl --http2 -d` sends: Node's parser
 * let go of the connection at the end of the headers, so it comes from the socket (`socket`, for a
 * request that came so); a chunked one, which would need a parser of its own, is refused.
 */
function switchingRequestBody(
  request: FastifyRequest,
  reply: FastifyReply,
  payload: RequestPayload,
  socket: Socket | undefined,
): ApiError | RequestPayload {
  const { headers } = request;
  if (socket === undefined) return payload;
  if (headers['transfer-encoding'] !== undefined) {
    return apiError(
      501,
      'A chunked body on a request that asks to switch protocols is not read; send it with Content-Length.',
    );
  }
  const length = Number(headers['content-length'] ?? 0);
  if (length === 0) return payload;
  const body = new UpgradeRequestBody(socket, length, request.server.server.requestTimeout);
  if (CONTINUE.test(headers.expect ?? '')) continueOnFirstRead(body, reply.raw);
  return body;
}

export const httpGuardPlugin = fp(
  async (app: FastifyInstance) => {
    const unmet = new WeakSet<IncomingMessage>();
    // Given this listener, Node leaves a request whose Expect it cannot meet to the service, which
    // takes it as any other request (in its turn on its connection); the check below refuses it with a 417.
    app.server.on('checkExpectation', (request, response) => {
      unmet.add(request);
      app.server.emit('request', request, response);
    });
    app.server.on('checkContinue', (request, response) => {
      continueWhenRead(request, response);
      app.server.emit('request', request, response);
    });
    // A request that asks to switch protocols comes here with its connection, which Node's parser
    // has let go of; it is served as any other request (in its turn, every hook run), on a response
    // of its own, and the connection closes once it is answered, unless a WebSocket route took it.
    const upgraded = new WeakMap<IncomingMessage, Socket>();
    app.server.on('upgrade', (request: IncomingMessage, socket: Socket, head: Buffer) => {
      // Node took its own error listener away with the connection: a client reset is no crash.
      socket.on('error', () => socket.destroy());
      // Bytes sent after the request, its body or the first frames of a WebSocket, are read by their reader.
      if (head.length > 0) socket.unshift(head);
      upgraded.set(request, socket);
      // Node checks no Expect of such a request: one it would not meet is refused as any other.
      const { expect } = request.headers;
      if (expect !== undefined && request.httpVersionMinor === 1 && !CONTINUE.test(expect)) unmet.add(request);
      const response = new ServerResponse(request);
      response.assignSocket(socket);
      response.once('finish', () => lingerThenClose(socket, app.server.requestTimeout));
      app.server.emit('request', request, response);
    });
    app.addHook('preParsing', (request, reply, payload, done) => {
      const switching = asksToSwitch(request);
      // Answered in HTTP/1.1, and the connection closed after it unless a WebSocket route switches
      // it: Node's parser has let go of it, and nothing after the request is read as HTTP.
      if (switching) reply.header('connection', 'close');
      const refused = refusal(request, unmet);
      if (refused !== null || !switching) return done(refused, payload);
      const body = switchingRequestBody(request, reply, payload, upgraded.get(request.raw));
      if (body instanceof ApiError) return done(body, payload);
      done(null, body);
    });
  },
  { name: 'http-guard', dependencies: ['errors'] },
);
