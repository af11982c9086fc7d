import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';

/**
 * Pipelined HTTP/1.1 requests, served one at a time per connection. Node starts every request it
 * has read from a packet at once (some 2,000 in 64 KiB), before its backpressure stops reading,
 * and keeps every answer until the client reads it: a client that pipelines and never reads
 * would fill the heap. Here a request is handed to the service only once the answer before it
 * on its connection has been written to the socket, so a connection holds at most one answer
 * unsent; Node stops reading it while that answer waits. A connection with more than
 * PIPELINED_MAX requests read and waiting behind it is closed, those requests unanswered.
 */

/** Requests a connection may have read and waiting for their turn. */
export const PIPELINED_MAX = 64;

/** Where a connection is: whether a request of it is being served, and those read after it. */
interface Turns {
  serving: boolean;
  readonly waiting: [IncomingMessage, ServerResponse][];
  /** The next request's turn, once an answer is written or abandoned. */
  readonly next: () => void;
}

const TURNS = Symbol('pipelined turns');

type PipelinedSocket = Socket & { [TURNS]?: Turns };

type RequestListener = (request: IncomingMessage, response: ServerResponse) => void;

/**
 * Puts the service's request listener of `server` (the one node:http or node:https was made with)
 * behind the turns. HTTP/2 streams are not held: their sessions have limits of their own.
 */
export function serveInTurn(server: Server, log: FastifyBaseLogger): void {
  const [serve] = server.listeners('request') as RequestListener[];
  if (serve === undefined) throw new Error('node:http has no request listener to serve in turn');
  server.removeListener('request', serve);

  const turnsOf = (socket: PipelinedSocket): Turns => {
    const turns: Turns = {
      serving: false,
      waiting: [],
      next: () => {
        const following = turns.waiting.shift();
        if (following === undefined || socket.destroyed) {
          turns.serving = false;
          return;
        }
        following[1].once('close', turns.next);
        serve.call(server, following[0], following[1]);
      },
    };
    socket[TURNS] = turns;
    // The requests still waiting are aborted by Node with the connection.
    socket.once('close', () => {
      turns.waiting.length = 0;
    });
    return turns;
  };

  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    // Over HTTP/2 only an Expect the service cannot meet comes here (plugins/http-guard.ts).
    if (request.httpVersionMajor === 2) {
      serve.call(server, request, response);
      return;
    }
    const socket = request.socket as PipelinedSocket;
    const turns = socket[TURNS] ?? turnsOf(socket);
    if (!turns.serving) {
      turns.serving = true;
      // 'close' follows 'finish' (the answer written to the socket), or the connection's end.
      response.once('close', turns.next);
      serve.call(server, request, response);
    } else if (turns.waiting.length < PIPELINED_MAX) {
      turns.waiting.push([request, response]);
    } else if (!socket.destroyed) {
      // Node goes on with the rest of what it read: those requests are aborted with the connection.
      log.info(
        { remote_address: socket.remoteAddress, waiting: turns.waiting.length },
        'connection closed: too many pipelined requests',
      );
      socket.destroy();
    }
  });
}
