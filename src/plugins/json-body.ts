import type { Http2ServerRequest } from 'node:http2';
import { errorCodes, type FastifyInstance, type FastifyRequest, type preParsingHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { apiError, malformedJson } from '../errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The body's JSON text, kept only for routes whose config sets `rawJson: true`; absent if refused before routing. */
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
 * matches). An empty body is no body: schema validation then reports it as missing.
 */
function parseJsonBody(request: FastifyRequest, body: Buffer): unknown {
  const encoding = request.headers['content-encoding'];
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
    throw apiError(415, `The content encoding ${encoding || '(empty)'} is not supported; send the body uncompressed.`);
  }
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

export const jsonBodyPlugin = fp(
  async (app: FastifyInstance, { http2 = false }: { http2?: boolean } = {}) => {
    if (http2) {
      // Last of each body route's preParsing hooks, where Fastify would refuse the media type.
      app.addHook('onRoute', (route) => {
        if (![route.method].flat().some((method) => BODY_METHODS.has(method))) return;
        route.preParsing = [...[route.preParsing ?? []].flat(), untypedHttp2Body];
      });
    }
    app.decorateRequest('rawJson', null);
    app.removeAllContentTypeParsers();
    const options = { parseAs: 'buffer' } as const;
    const parser = (request: FastifyRequest, body: string | Buffer, done: (error: null, body: unknown) => void) =>
      done(null, parseJsonBody(request, body as Buffer));
    app.addContentTypeParser('application/json', options, parser);
    app.addContentTypeParser(/^application\/[^;\s]+\+json(?:;|$)/, options, parser);
  },
  { name: 'json-body' },
);
