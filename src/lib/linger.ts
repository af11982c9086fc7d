import { type IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** How long a closing connection waits for more of a body nobody will read, idle, before it is dropped. */
const LINGER_IDLE_MS = 2000;

/**
 * Ends a connection whose last answer is written, without a reset: if the socket closed while
 * the client still sent, the system would reset the connection, and the reset can destroy the
 * answer before the client has read it. So the connection closes as RFC 9112 (9.6) advises: the
 * end of the stream is sent, then what still comes is read and dropped until the client closes
 * its side, sends nothing for LINGER_IDLE_MS, or `limitMs` has passed, however it drips.
 */
export function lingerThenClose(socket: Socket, limitMs: number): void {
  if (socket.writable) socket.end();
  const close = () => socket.destroy();
  const limit = setTimeout(close, limitMs).unref();
  socket.once('close', () => clearTimeout(limit));
  socket.setTimeout(LINGER_IDLE_MS);
  socket.once('timeout', close);
  socket.once('end', close);
  socket.resume();
}

/**
 * The responses of a server whose connections close once an answer is written before its request's
 * body has all come (a 413, a 415, a 404 to a POST, a GET that leaves its body unread), lingering
 * as `lingerThenClose` says, `limitMs` at most. Kept alive, such a connection would go on reading
 * a body nobody waits for: a client that never sends the rest would hold it open through a
 * shutdown, and the request timeout would then answer the same request a second time.
 */
export function closingUnreadResponses(limitMs: number): typeof ServerResponse {
  return class ClosingUnreadResponse<
    Request extends IncomingMessage = IncomingMessage,
  > extends ServerResponse<Request> {
    override detachSocket(socket: Socket & { destroySoon?: () => void }): void {
      super.detachSocket(socket);
      const request = this.req;
      if (request.complete) return;
      const linger = () => lingerThenClose(socket, limitMs);
      // An answer that closes its connection: Node calls this once the answer is written.
      socket.destroySoon = linger;
      // A kept-alive one: the rest of a body sent with its head is read within the turn (Node reads
      // it after the answer given at once); a body still to come then is waited for no longer.
      setImmediate(() => {
        if (!request.complete && !socket.writableEnded) linger();
      });
    }
  };
}
