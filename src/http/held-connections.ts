import type { Server, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Holding, MemoryBudget } from '../lib/memory-budget.js';
import { sendQueues, sendQueuesReadable, tableAddress } from '../lib/tcp-send-queues.js';

/**
 * Every connection of the server as a holder of the memory budget: the bytes written to it and not
 * yet sent, in the process (its socket's buffer, and its TLS socket's) and in the kernel's send
 * queue. One the budget sheds is reset (RST), which frees its kernel queue at once, unless what
 * speaks on it (a WebSocket) has its own way to end.
 */

/** One connection, and what it holds. */
class Connection implements Holding {
  bytes = 0;
  action = 'connection_reset';
  readonly socket: Socket;
  /** The socket answers are written to: the TLS socket over TLS. */
  top: Socket;
  /** The connection's remote end as the kernel's tables write it, once asked for. */
  #remote: string | undefined;
  /** How the connection is shed, if not reset. */
  ending: (() => void) | null = null;

  constructor(socket: Socket) {
    this.socket = socket;
    this.top = socket;
  }

  get remote(): string {
    this.#remote ??= tableAddress(this.socket.remoteAddress ?? '', this.socket.remotePort ?? 0);
    return this.#remote;
  }

  /** Whether it was shed and is still ending: what it holds is let go of once its end is done. */
  leaving = false;

  shed(): void {
    this.leaving = true;
    if (this.ending !== null) this.ending();
    else if (!this.socket.destroyed) this.socket.resetAndDestroy();
  }
}

/** A connection's remote end, as both its TCP socket and the TLS socket made of it give it. */
export const connectionKey = (socket: Socket): string => `${socket.remoteAddress}:${socket.remotePort}`;

export class HeldConnections {
  readonly #open = new Map<string, Connection>();
  /** The port listened on, whose connections the kernel's tables are read for. */
  #port = 0;

  constructor(server: Server, budget: MemoryBudget) {
    server.on('listening', () => {
      const address = server.address();
      this.#port = typeof address === 'object' && address !== null ? address.port : 0;
    });
    server.on('connection', (socket: Socket) => {
      const key = connectionKey(socket);
      const connection = new Connection(socket);
      this.#open.set(key, connection);
      socket.once('close', () => {
        if (this.#open.get(key) === connection) this.#open.delete(key);
      });
    });
    server.on('secureConnection', (socket: TLSSocket) => {
      const connection = this.#open.get(connectionKey(socket));
      if (connection !== undefined) connection.top = socket;
    });
    budget.add(() => this.#holdings());
  }

  /** Has the connection of `socket` shed by `end` (naming the budget's `action`) rather than reset. */
  shedWith(socket: Socket, action: string, end: () => void): void {
    const connection = this.#open.get(connectionKey(socket));
    if (connection === undefined) return;
    connection.action = action;
    connection.ending = end;
  }

  #holdings(): Iterable<Connection> {
    if (this.#open.size === 0) return [];
    const kernel = sendQueuesReadable && this.#port !== 0 ? sendQueues(this.#port) : null;
    for (const connection of this.#open.values()) {
      const { socket, top } = connection;
      connection.bytes =
        socket.writableLength + (top === socket ? 0 : top.writableLength) + (kernel?.get(connection.remote) ?? 0);
    }
    return this.#open.values();
  }
}
