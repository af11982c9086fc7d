import type { IncomingMessage } from 'node:http';
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
 * An answer sent before its request's body was read (a 413, a 415, a 404 to a POST) on a
 * connection that then closes lingers as `lingerThenClose` says, `limitMs` at most.
 */
export function lingerIfUnread(request: IncomingMessage, limitMs: number): void {
  // An HTTP/2 stream is reset with NO_ERROR once answered, which tells the client to stop sending.
  if (request.complete || request.httpVersionMajor === 2) return;
  const socket = request.socket as Socket & { destroySoon?: () => void };
  // Node closes a connection that is not kept alive with destroySoon once the answer is written.
  socket.destroySoon = () => lingerThenClose(socket, limitMs);
}
