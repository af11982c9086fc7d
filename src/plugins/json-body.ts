import type { Http2ServerRequest } from 'node:http2';
import { Readable } from 'node:stream';
import { errorCodes, type FastifyInstance, type FastifyRequest, type preParsingHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import {
  ApiError,
  apiError,
  corruptContentCoding,
  malformedJson,
  payloadTooLarge,
  unsupportedContentCoding,
} from '../errors.js';
import { CODINGS, type Decoder, decoderOf, zstdFrames } from '../lib/content-coding.js';
import { listElements } from '../lib/header-list.js';
import { Turns } from '../lib/turns.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The body's JSON text, kept only for routes whose config sets `rawJson: true` until their answer is sent; absent if refused before routing. */
    rawJson?: string | null;
  }
  interface FastifyContextConfig {
    rawJson?: boolean;
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The only request bodies accepted are JSON: `application/json` or any `application/*+json`
 * (such as `application/merge-patch+json`), in UTF-8 as RFC 8259 requires, uncompressed. Every other
 * media type, and a body with no Content-Type, is a 415 (Fastify raises it when no parser
 * matches). An empty body is no body: schema validation then reports it as missing. A body in
 * content codings reaches the parser decoded (`decodedBody`).
 */
function parseJsonBody(request: FastifyRequest, body: Buffer): unknown {
  const charset = request.headers['content-type']?.match(/;\s*charset\s*=\s*"?([^";\s]+)/i)?.[1];
  if (charset !== undefined && !/^utf-?8$/i.test(charset)) {
    throw apiError(415, `The charset ${charset} is not supported; JSON bodies must be UTF-8.`);
  }
  if (body.length === 0) return undefined;
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw malformedJson('The request body is not valid UTF-8.');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw malformedJson(`The request body is not valid JSON: ${(error as Error).message}`);
  }
  if (request.routeOptions.config.rawJson === true) request.rawJson = text;
  return value;
}

/** The methods whose bodies Fastify reads. */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'QUERY']);

/**
 * A body over HTTP/2 needs no Content-Length (its DATA frames end it), and Fastify takes a request
 * with neither Content-Length nor Transfer-Encoding for one without a body: without a Content-Type
 * too, such a body would pass for none instead of getting the 415 it gets over HTTP/1.1.
 */
const untypedHttp2Body: preParsingHookHandler = (request, _reply, payload, done) => {
  const { raw, headers } = request;
  if (
    raw.httpVersionMajor === 2 &&
    headers['content-type'] === undefined &&
    headers['content-length'] === undefined &&
    !(raw as unknown as Http2ServerRequest).stream.endAfterHeaders
  ) {
    done(new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE());
    return;
  }
  done(null, payload);
};

/**
 * More codings than any client applies to one body: each is one more decoding of up to the body
 * limit, so a long list (`gzip, gzip, ...`) would cost time for nothing.
 */
const MAX_CODINGS = 3;

/**
 * More zstd frames than a body holds in practice: each is decoded in a step of its own, which costs
 * some 20 µs however little the frame holds, and an empty frame takes 9 bytes.
 */
const MAX_ZSTD_FRAMES = 64;

/**
 * The most a decoder is given at once: it decodes each write in one job of libuv's threadpool, which
 * nothing stops once begun, so a write is as much work as a client that goes away still costs.
 */
const DECODER_WRITE = 64 * 1024;

/** The codings this service decodes, as a 415 lists them. */
const DECODED = [...CODINGS];

/**
 * Bodies decoded at once; the rest wait, each holding only its coded bytes. A coded body is read
 * whole before its turn, so that a client that sends slowly holds no turn: a body of a kilobyte
 * can decode to the body limit, and four hundred at once would hold four hundred of those. The
 * turns go a client (`request.ip`) at a time in rotation: one that sends a thousand bodies costly
 * to decode waits behind another's one, not the other way round.
 */
const decodings = new Turns(4);

/**
 * A body in content codings, read whole once the parser reads, then decoded in its turn, one coding
 * after another, the last applied first (RFC 9110, 8.4). What each decoder makes is held to the body
 * limit, so that no coding in a list decodes more than the limit (413 as soon as one would): the
 * work a body costs is bounded by the limit and the number of its codings. Each coding must be its
 * stream whole and nothing else (gzip may be several members, zstd several frames): a stream cut
 * short, corrupt, or followed by bytes of no stream is a 400 naming `body`. A client that goes away
 * stops its decoding. The request itself is never destroyed, so the refusal can still be written to it.
 */
class DecodedBody extends Readable {
  /** What Fastify holds against Content-Length and the limit: the bytes that came in, still encoded. */
  receivedEncodedLength = 0;
  #started = false;
  /** The body as it comes: the request itself, or what an earlier hook made of it. */
  readonly #raw: NodeJS.ReadableStream;
  /** The Content-Encoding, as a 415 repeats it. */
  readonly #header: string;
  /** The codings in the order they are decoded. */
  readonly #codings: readonly string[];
  readonly #limit: number;
  /** The client whose body it is, whose turns to decode come in rotation with others'. */
  readonly #client: string;
  /** The decoder at work. */
  #decoder: Decoder | null = null;

  constructor(raw: NodeJS.ReadableStream, header: string, codings: readonly string[], limit: number, client: string) {
    super();
    this.#raw = raw;
    this.#header = header;
    this.#limit = limit;
    this.#client = client;
    // The last coding listed was applied last, so it is decoded first.
    this.#codings = codings.toReversed();
  }

  override _read(): void {
    if (this.#started) {
      this.#decoder?.resume();
      return;
    }
    this.#started = true;
    this.#raw.on('data', this.#receive);
    this.#raw.once('error', this.#fail);
    this.#raw.once('end', () =>
      decodings.take(() => {
        this.#turn = true;
        if (this.destroyed) this.#release();
        else this.#decode(0, Buffer.concat(this.#encoded.splice(0)));
      }, this.#client),
    );
  }

  /** The client went away: what is left of its body is not decoded. */
  readonly abandon = (): void => {
    this.#fail(new Error('The client went away.'));
  };

  /** Whether it holds a turn to decode. */
  #turn = false;

  #release(): void {
    if (!this.#turn) return;
    this.#turn = false;
    decodings.release();
  }

  /** Decodes `coded` from the coding at `index`, held to the limit, then what it makes from the next; the last one's bytes are the body. */
  #decode(index: number, coded: Buffer): void {
    const coding = this.#codings[index] as string;
    const streams = coding === 'zstd' ? zstdFrames(coded) : [coded];
    if (streams === null) {
      this.#fail(corruptContentCoding(coding));
    } else if (streams.length > MAX_ZSTD_FRAMES) {
      this.#fail(unsupportedContentCoding(this.#header, DECODED, `at most ${MAX_ZSTD_FRAMES} zstd frames are decoded`));
    } else {
      this.#decodeStreams(index, coding, streams);
    }
  }

  #decodeStreams(index: number, coding: string, streams: readonly Buffer[]): void {
    const last = index === this.#codings.length - 1;
    const decoder = decoderOf(coding) as Decoder;
    this.#decoder = decoder;
    const decoded: Buffer[] = [];
    let decodedLength = 0;
    decoder.on('data', (chunk: Buffer) => {
      decodedLength += chunk.length;
      if (decodedLength > this.#limit) this.#fail(payloadTooLarge(this.#limit));
      else if (!last) decoded.push(chunk);
      else if (!this.push(chunk)) decoder.pause();
    });
    decoder.on('error', () => this.#fail(corruptContentCoding(coding)));
    decoder.once('end', () => {
      if (this.destroyed) return;
      // A decoder ends with its stream: what it did not read follows the stream.
      if (decoder.bytesWritten !== streams.reduce((length, stream) => length + stream.length, 0)) {
        this.#fail(corruptContentCoding(coding));
      } else if (last) {
        this.#release();
        this.push(null);
      } else {
        this.#decode(index + 1, Buffer.concat(decoded));
      }
    });
    // Each zstd frame is written on its own: a decoder given more than one at once ends with the first.
    for (const stream of streams) {
      for (let at = 0; at < stream.length; at += DECODER_WRITE) decoder.write(stream.subarray(at, at + DECODER_WRITE));
    }
    decoder.end();
  }

  /** The coded bytes come so far. */
  readonly #encoded: Buffer[] = [];

  readonly #receive = (chunk: Buffer): void => {
    this.receivedEncodedLength += chunk.length;
    // Fastify holds the coded length to the limit only as decoded bytes come: none come before the turn.
    if (this.receivedEncodedLength > this.#limit) this.#fail(payloadTooLarge(this.#limit));
    else this.#encoded.push(chunk);
  };

  readonly #fail = (error: Error): void => {
    if (this.destroyed) return;
    this.destroy(error instanceof ApiError ? error : apiError(400, 'The request body was not received whole.'));
  };

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // Its error listener stays (#fail does nothing once destroyed): the request may still fail.
    this.#raw.off('data', this.#receive);
    // What still comes is read and dropped, as Fastify does with a body over the limit.
    this.#raw.unpipe();
    this.#raw.resume();
    this.#encoded.length = 0;
    this.#decoder?.destroy();
    this.#release();
    callback(error);
  }
}

/**
 * A body route's last preParsing hook: a body in content codings becomes its decoded stream; a
 * coding the service does not decode, or too many, is a 415 that lists those it does.
 */
const decodedBody: preParsingHookHandler = (request, reply, payload, done) => {
  const sent = request.headers['content-encoding'];
  if (sent === undefined) return done(null, payload);
  // Repeated, the field is one list (RFC 9110, 5.3), however the protocol's parser hands it over.
  const header = String(sent);
  const codings = listElements(header.toLowerCase()).filter((coding) => coding !== 'identity');
  if (codings.length === 0) return done(null, payload);
  const unknown = codings.find((coding) => !isDecoded(coding));
  if (unknown !== undefined) {
    return done(unsupportedContentCoding(header, DECODED, `${unknown} is not one of ${DECODED.join(', ')}`));
  }
  if (codings.length > MAX_CODINGS) {
    return done(unsupportedContentCoding(header, DECODED, `at most ${MAX_CODINGS} codings are decoded`));
  }
  const body = new DecodedBody(payload, header, codings, request.routeOptions.bodyLimit, request.ip);
  // Fastify listens for errors only once it reads; until then one must not be thrown.
  body.on('error', () => {});
  // The answer closes before it is sent only when the connection or the stream does.
  reply.raw.once('close', body.abandon);
  done(null, body);
};

function isDecoded(coding: string): boolean {
  return coding === 'x-gzip' || (DECODED as string[]).includes(coding);
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route's handler reads the body itself, in its own framing (a gRPC call's messages): none of this applies. */
    bodyReadByHandler?: boolean;
  }
}

export const jsonBodyPlugin = fp(
  async (app: FastifyInstance, { http2 = false }: { http2?: boolean } = {}) => {
    // Last of each body route's preParsing hooks, where Fastify would refuse the media type.
    app.addHook('onRoute', (route) => {
      if (![route.method].flat().some((method) => BODY_METHODS.has(method))) return;
      if (route.config?.bodyReadByHandler === true) return;
      route.preParsing = [...[route.preParsing ?? []].flat(), ...(http2 ? [untypedHttp2Body] : []), decodedBody];
    });
    app.decorateRequest('rawJson', null);
    // Once answered, the body is let go: an answer that waits (for its compression, in turn) holds
    // only its own bytes, not a parsed copy of a large body for every scavenge to move.
    app.addHook('onSend', (request, _reply, payload, done) => {
      request.body = undefined;
      request.rawJson = null;
      done(null, payload);
    });
    app.removeAllContentTypeParsers();
    const options = { parseAs: 'buffer' } as const;
    const parser = (request: FastifyRequest, body: string | Buffer, done: (error: null, body: unknown) => void) =>
      done(null, parseJsonBody(request, body as Buffer));
    app.addContentTypeParser('application/json', options, parser);
    app.addContentTypeParser(/^application\/[^;\s]+\+json(?:;|$)/, options, parser);
  },
  { name: 'json-body' },
);
