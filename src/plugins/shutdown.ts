import type { Socket } from 'node:net';
import fp from 'fastify-plugin';
import type { RequestLog } from '../logging/request-log.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** True from the moment `close()` begins: readiness fails and connections are let go. */
    readonly draining: boolean;
  }
}

/**
 * Graceful draining. Fastify's close stops the listener and closes the connections idle between
 * two requests at that moment; a keep-alive connection whose request was still in flight would
 * then stay open until its keep-alive timeout, holding the process up. So while draining, every
 * finished response is followed by closing whatever connections have gone idle. Node counts a
 * connection that has not sent a byte yet (one a load balancer opened ahead of need) as a
 * request on its way, which would hold the process up until the shutdown timeout: those are
 * closed when draining begins, as no request has been accepted on them.
 */
export const shutdownPlugin = fp(
  async (app, { requestLog }: { requestLog: RequestLog }) => {
    let draining = false;
    const connections = new Set<Socket>();
    app.server.on('connection', (socket: Socket) => {
      connections.add(socket);
      socket.once('close', () => connections.delete(socket));
    });
    app.decorate('draining', {
      getter: () => draining,
    });
    app.addHook('preClose', (done) => {
      draining = true;
      for (const socket of connections) if (socket.bytesRead === 0) socket.destroy();
      done();
    });
    requestLog.onCompleted(() => {
      if (draining) setImmediate(() => app.server.closeIdleConnections());
    });
  },
  { name: 'shutdown' },
);
