import type { FastifyInstance, FastifyReply, FastifyRequest, onSendHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { type Coding, codedTag, compress, preferredCoding } from '../lib/content-coding.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route answers with the same Buffer every time (a document made once): it is compressed once per coding. */
    keptAnswer?: boolean;
  }
}

/**
 * The types an answer may be compressed in: JSON and text (Prometheus's included), never an event
 * stream, whose events must each go out when written.
 */
const COMPRESSIBLE =
  /^(?:text\/(?!event-stream)|application\/(?:[^;\s]*\+)?json(?:;|$)|application\/openmetrics-text)/i;

/** Statuses whose answers have no body to code, or one that may not be (a range of the uncoded bytes). */
const UNCODED_STATUSES = new Set([101, 204, 206, 304]);

/**
 * A 304 says which tag the client's copy has: the coded one when the client names it in
 * If-None-Match and would be sent that coding now (RFC 9110, 15.4.5: the tag a 200 would carry).
 */
function notModifiedTag(request: FastifyRequest, reply: FastifyReply): void {
  const tag = reply.getHeader('etag');
  const ifNoneMatch = request.headers['if-none-match'];
  if (typeof tag !== 'string' || ifNoneMatch === undefined) return;
  const coding = preferredCoding(request.headers['accept-encoding']);
  if (coding === null) return;
  const coded = codedTag(tag, coding);
  if (ifNoneMatch.includes(coded)) reply.header('etag', coded);
}

/**
 * Answers as the client's Accept-Encoding prefers (`preferredCoding`): a whole body of at least
 * `minBytes`, of a compressible type, not already coded, is compressed off the event loop, and its
 * strong ETag becomes that coding's own; the bytes a route keeps (`keptAnswer`) are compressed once
 * per coding. HEAD runs the same hook on the same body, so it says what GET would.
 * `Vary: Accept-Encoding` is one of the fixed headers (`plugins/response-headers.ts`).
 */
export const contentCodingsPlugin = fp(
  async (app: FastifyInstance, { minBytes }: { minBytes: number }) => {
    const codedAnswers: onSendHookHandler = (request, reply, payload, done) => {
      if (reply.statusCode === 304) notModifiedTag(request, reply);
      if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return done(null, payload);
      // The size first: most answers are small, and their Accept-Encoding need not be read.
      if ((typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length) < minBytes) {
        return done(null, payload);
      }
      const coding = preferredCoding(request.headers['accept-encoding']);
      if (coding === null || UNCODED_STATUSES.has(reply.statusCode)) return done(null, payload);
      const type = reply.getHeader('content-type');
      if (typeof type !== 'string' || !COMPRESSIBLE.test(type) || reply.hasHeader('content-encoding')) {
        return done(null, payload);
      }
      coded(coding, payload, request.routeOptions.config.keptAnswer === true, (error, compressed) => {
        if (error !== null) return done(error);
        codedAnswer(reply, coding, compressed.length);
        done(null, compressed);
      });
    };
    app.addHook('onSend', codedAnswers);
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
