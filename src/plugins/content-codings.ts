import type { FastifyInstance, FastifyReply, FastifyRequest, onSendHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { type Coding, codedTag, compress, preferredCoding } from '../lib/content-coding.js';
import { namesWeakly } from '../lib/entity-tags.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route answers with the same Buffer every time (a document made once): it is compressed once per coding. */
    keptAnswer?: boolean;
  }
}

export interface ContentCodingsOptions {
  /** The smallest body compressed (COMPRESSION_MIN_BYTES); null when none is (COMPRESSION=false). */
  minBytes: number | null;
}

/**
 * The types an answer may be compressed in: JSON, YAML and text (Prometheus's included), never an
 * event stream, whose events must each go out when written.
 */
const COMPRESSIBLE =
  /^(?:text\/(?!event-stream)|application\/(?:(?:[^;\s]*\+)?json|(?:x-)?yaml)(?:;|$)|application\/openmetrics-text)/i;

/** Statuses whose answers have no body to code, or one that may not be (a range of the uncoded bytes). */
const UNCODED_STATUSES = new Set([101, 204, 206, 304]);

/**
 * The coding a whole body goes out in, or null for none. An answer of a status and type that may
 * be coded varies by Accept-Encoding whatever this request's is, so it says so, on whatever path
 * it is (a long 404 under the documentation's page, whose fixed `Vary` has no Accept-Encoding).
 */
function codingOf(request: FastifyRequest, reply: FastifyReply): Coding | null {
  if (UNCODED_STATUSES.has(reply.statusCode) || reply.hasHeader('content-encoding')) return null;
  const type = reply.getHeader('content-type');
  if (typeof type !== 'string' || !COMPRESSIBLE.test(type)) return null;
  const vary = reply.getHeader('vary');
  if (vary === undefined) reply.header('vary', 'Accept-Encoding');
  else if (!String(vary).includes('Accept-Encoding')) reply.header('vary', `Accept-Encoding, ${String(vary)}`);
  return preferredCoding(request.headers['accept-encoding']);
}

/**
 * The tag of a GET's or HEAD's 200 as it goes out when its If-None-Match names it, else null. The
 * tag is that of the coding the answer goes in (`"3-br"`), as RFC 9110 compares it (13.1.2): a
 * client holding the plain `"3"`, or a coding it no longer takes, is sent the answer.
 */
function notModifiedTag(request: FastifyRequest, reply: FastifyReply, coding: Coding | null): string | null {
  const ifNoneMatch = request.headers['if-none-match'];
  if (ifNoneMatch === undefined || reply.statusCode !== 200) return null;
  if (request.method !== 'GET' && request.method !== 'HEAD') return null;
  const tag = reply.getHeader('etag');
  if (typeof tag !== 'string') return null;
  const sent = coding === null ? tag : codedTag(tag, coding);
  return namesWeakly(ifNoneMatch, sent) ? sent : null;
}

/**
 * Fastify's own last hook of a HEAD route gives a body-less answer `Content-Length: 0`; a 204 or
 * 304 has none (RFC 9110, 8.6), nor would its GET.
 */
const bodilessHead: onSendHookHandler = (_request, reply, payload, done) => {
  if (reply.statusCode === 204 || reply.statusCode === 304) reply.removeHeader('content-length');
  done(null, payload);
};

/**
 * Every answer as it goes out. A whole body of at least `minBytes`, of a compressible type, not
 * already coded, goes in the coding the client's Accept-Encoding prefers (`preferredCoding`),
 * compressed off the event loop, and its strong ETag becomes that coding's own; the bytes a route
 * keeps (`keptAnswer`) are compressed once per coding. A GET or HEAD whose If-None-Match names the
 * tag its 200 goes out with is a 304 instead: that tag, no body. HEAD runs the same hook on the
 * same body, so it says what GET would.
 */
export const contentCodingsPlugin = fp(
  async (app: FastifyInstance, { minBytes }: ContentCodingsOptions) => {
    const answers: onSendHookHandler = (request, reply, payload, done) => {
      if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return done(null, payload);
      // The size first: most answers are small, and their Accept-Encoding need not be read.
      const length = typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length;
      const coding = minBytes !== null && length >= minBytes ? codingOf(request, reply) : null;
      const current = notModifiedTag(request, reply, coding);
      if (current !== null) {
        reply.code(304).header('etag', current).removeHeader('content-type');
        // No body: null, but Fastify's last hook of a HEAD route reads what it is given as a body.
        return done(null, request.method === 'HEAD' ? '' : null);
      }
      if (coding === null) return done(null, payload);
      coded(coding, payload, request.routeOptions.config.keptAnswer === true, (error, compressed) => {
        if (error !== null) return done(error);
        codedAnswer(reply, coding, compressed.length);
        done(null, compressed);
      });
    };
    app.addHook('onSend', answers);
    app.addHook('onRoute', (route) => {
      if (route.method === 'HEAD') route.onSend = [...[route.onSend ?? []].flat(), bodilessHead];
    });
  },
  { name: 'content-codings' },
);

/** The coded forms of the bytes routes keep (`keptAnswer`), each made once. */
const keptForms = new WeakMap<Buffer, Map<Coding, Buffer>>();

function coded(
  coding: Coding,
  payload: string | Buffer,
  kept: boolean,
  done: (error: Error | null, result: Buffer) => void,
): void {
  if (typeof payload === 'string' || !kept) {
    compress(coding, typeof payload === 'string' ? Buffer.from(payload) : payload, done);
    return;
  }
  const form = keptForms.get(payload)?.get(coding);
  if (form !== undefined) {
    done(null, form);
    return;
  }
  compress(coding, payload, (error, result) => {
    if (error === null) {
      const forms = keptForms.get(payload) ?? new Map<Coding, Buffer>();
      keptForms.set(payload, forms.set(coding, result));
    }
    done(error, result);
  });
}

function codedAnswer(reply: FastifyReply, coding: Coding, length: number): void {
  reply.header('content-encoding', coding).header('content-length', length);
  const tag = reply.getHeader('etag');
  if (typeof tag === 'string') reply.header('etag', codedTag(tag, coding));
}
