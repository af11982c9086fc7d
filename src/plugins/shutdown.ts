import fp from 'fastify-plugin';
import type { RequestLog } from './request-log.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** True from the moment `close()` begins: readiness fails and connections are let go. */
    readonly draining: boolean;
  }
}

/**
 * Graceful draining. Fastify's close stops the listener and closes the connections idle at
 * that moment; a keep-alive connection whose request was still in flight would then stay
 * open until its keep-alive timeout, holding the process up. So while draining, every
 * finished response is followed by closing whatever connections have gone idle.
 */
export const shutdownPlugin = fp(
  async (app, { requestLog }: { requestLog: RequestLog }) => {
    let draining = false;
    app.decorate('draining', {
      getter: () => draining,
    });
    app.addHook('preClose', (done) => {
      draining = true;
      done();
    });
    requestLog.onCompleted(() => {
      if (draining) setImmediate(() => app.server.closeIdleConnections());
    });
  },
  { name: 'shutdown' },
);
