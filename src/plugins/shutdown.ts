import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import fp from 'fastify-plugin';
import type { RequestLog } from '../logging/request-log.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** True from the moment `close()` begins: readiness fails and connections are let go. */
    readonly draining: boolean;
  }
}

/** Runs `then` after `turns` turns of the event loop, each with a poll for I/O. */
function afterTurns(turns: number, then: () => void): void {
  setImmediate(() => (turns > 1 ? afterTurns(turns - 1, then) : then()));
}

/**
 * Closes `socket` as soon as the service has ended its side and everything written to it is
 * sent: an answer written straight to the socket, or one sent before its request's body was read,
 * leaves the connection open to read what the client still sends (lib/linger.ts), and a client
 * that keeps its side open would hold the process up until the shutdown timeout.
 */
function closeOnceEnded(socket: Socket): void {
  if (socket.writableFinished) socket.destroy();
  else socket.once('finish', () => socket.destroy());
}

/**
 * Graceful draining. Fastify's close stops the listener and closes the connections idle between
 * two requests at that moment; a keep-alive connection whose request was still in flight would
 * then stay open until its keep-alive timeout, holding the process up. So while draining, every
 * finished response is followed by closing whatever connections have gone idle. Node counts a
 * connection that has not sent a byte yet (one a load balancer opened ahead of need) as a
 * request on its way, which would hold the process up until the shutdown timeout: those are
 * closed when draining begins, as no request has been accepted on them. Both closes wait for the
 * bytes already received to be read, so that a request sent before the shutdown is served. A
 * connection whose last answer is sent, still open only for its client, is closed then too.
 */
export const shutdownPlugin = fp(
  async (app, { requestLog }: { requestLog: RequestLog }) => {
    let draining = false;
    const connections = new Set<Socket>();
    const follow = (socket: Socket) => {
      connections.add(socket);
      socket.once('close', () => connections.delete(socket));
      if (draining) closeOnceEnded(socket);
    };
    app.server.on('connection', follow);
    // Over TLS, requests come on the TLS socket made of the connection, once its handshake is done.
    app.server.on('secureConnection', follow);
    app.decorate('draining', {
      getter: () => draining,
    });
    app.addHook('preClose', (done) => {
      draining = true;
      // The answer to a request read whole says `Connection: close`, so that the client sends no
      // other request on a connection about to close (Fastify says it only to requests that arrive
      // from now on). Not to one still arriving: a client may have pipelined more behind it, which
      // is answered. `_httpMessage` is the response a socket is serving, as Node keeps it.
      for (const socket of connections) {
        const response = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
        if (response != null && !response.headersSent && response.req.complete) {
          response.setHeader('connection', 'close');
        }
      }
      // What has already arrived is taken in first: closed unread, a request a load balancer sent
      // on a kept-alive connection would be reset, which it cannot tell from a failure (and a POST
      // is not passed on). Three turns of the event loop: one to accept a waiting connection, one to
      // read it, one to spare.
      afterTurns(3, () => {
        for (const socket of connections) {
          if (socket.bytesRead === 0) socket.destroy();
          else closeOnceEnded(socket);
        }
        done();
      });
    });
    requestLog.onCompleted(() => {
      // After the turns that read a request already sent on the connection, answered then with
      // `Connection: close`, rather than reset.
      if (draining) afterTurns(3, () => app.server.closeIdleConnections());
    });
  },
  { name: 'shutdown' },
);
