import type { IncomingMessage, ServerOptions } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { type ApiError, apiError, methodNotAllowed, validationError } from '../errors.js';
import { answerOnSocket, unsupportedVersion } from './errors.js';
import { METHODS, requestId } from './response-headers.js';

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
} satisfies ServerOptions;

/** Why a request must be refused, or null. `unmet`: the requests whose Expect Node found it could not meet. */
function refusal(request: FastifyRequest, unmet: WeakSet<IncomingMessage>): ApiError | null {
  const { raw, headers } = request;
  if (raw.httpVersionMajor !== 1) return unsupportedVersion();
  if (headers.host === undefined && raw.httpVersionMinor === 1) {
    return validationError([{ field: 'Host', message: 'is required in HTTP/1.1', value: null }]);
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

/**
 * A request that asks to switch protocols (Upgrade, with Connection: upgrade) is answered in
 * HTTP/1.1 and the connection closed after it: Node's parser stops reading at the end of such a
 * request, and whatever was sent after it in the same packet would be lost.
 */
function closeAfterUpgradeRequest(request: FastifyRequest, reply: FastifyReply): void {
  if (request.headers.upgrade !== undefined && UPGRADE.test(request.headers.connection ?? '')) {
    reply.header('connection', 'close');
  }
}

export const httpGuardPlugin = fp(
  async (app: FastifyInstance) => {
    const unmet = new WeakSet<IncomingMessage>();
    // Given this listener, Node leaves a request whose Expect it cannot meet to the service, which
    // routes it as usual; the check below refuses it with a 417.
    app.server.on('checkExpectation', (request, response) => {
      unmet.add(request);
      app.routing(request, response);
    });
    // A CONNECT asks for a tunnel, which this service, no proxy, does not offer: 405, naming the
    // methods it takes. Node hands the connection over with its own listeners removed, so it is
    // read to its end here, and closed once idle for the server's timeout.
    app.server.on('connect', (request: IncomingMessage, socket: Socket) => {
      socket.on('error', () => {}); // a client gone meanwhile (ECONNRESET) is no error of the service's
      socket.once('timeout', () => socket.destroy());
      socket.resume();
      answerOnSocket(app, socket, methodNotAllowed('CONNECT', METHODS), requestId(request), 'CONNECT');
    });
    app.addHook('preParsing', (request, reply, payload, done) => {
      closeAfterUpgradeRequest(request, reply);
      done(refusal(request, unmet), payload);
    });
  },
  { name: 'http-guard', dependencies: ['errors'] },
);
