import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/** How long a closing connection waits for more of a body nobody will read, idle, before it is dropped. */
const LINGER_IDLE_MS = 2000;

/**
 * An answer sent before its request's body was read (a 413, a 415, a 404 to a POST) on a
 * connection that then closes: if the socket closed while the body still arrived, the system
 * would reset the connection, and the reset can destroy the answer before the client has read
 * it. So the connection closes as RFC 9112 (9.6) advises: the answer and the end of the stream
 * are sent, then the rest of the body is read and dropped until the client closes its side, or
 * sends nothing for LINGER_IDLE_MS.
 */
export function lingerIfUnread(request: IncomingMessage): void {
  // An HTTP/2 stream is reset with NO_ERROR once answered, which tells the client to stop sending.
  if (request.complete || request.httpVersionMajor === 2) return;
  const socket = request.socket as Socket & { destroySoon?: () => void };
  // Node closes a connection that is not kept alive with destroySoon once the answer is written.
  socket.destroySoon = () => {
    if (socket.writable) socket.end();
    socket.setTimeout(LINGER_IDLE_MS);
    socket.once('timeout', () => socket.destroy());
    socket.once('end', () => socket.destroy());
    socket.resume();
  };
}
