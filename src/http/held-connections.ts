import type { Server, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Holding, MemoryBudget } from '../lib/memory-budget.js';
import { sendQueues, sendQueuesReadable, tableAddress } from '../lib/tcp-send-queues.js';

/**
 * Every connection of the server as a holder of the memory budget: the bytes of requests read from
 * it and not yet answered (a body as it comes), and those written to it and not yet sent, in the
 * process (its socket's buffer, and its TLS socket's) and in the kernel's send queue. One the
 * budget sheds is reset (RST), which frees its kernel queue at once, unless what speaks on it (a
 * WebSocket) has its own way to end.
 *
 * Reading the kernel's tables takes milliseconds however few the connections (the kernel walks
 * its whole table of them), so they are read, off the event loop, only when what the connections
 * may hold could come to half the budget: each holds at most what its queue held when last read
 * and what was written to it since.
 */

/** One connection, and what it holds. */
class Connection implements Holding {
  bytes = 0;
  action = 'connection_reset';
  readonly socket: Socket;
  /** The socket answers are written to: the TLS socket over TLS. */
  top: Socket;
  /** How the connection is shed once it speaks another protocol (a WebSocket): it resets it once it has said why. */
  ending: ((reset: () => void) => void) | null = null;
  /** Whether it was shed and is still ending: what it holds is let go of once its end is done. */
  leaving = false;
  /** Its kernel send queue when the tables were last read, and the bytes written to it by then. */
  queued = 0;
  writtenWhenRead = 0;
  /** The bytes read from it when it was last seen with no request under way. */
  readWhenIdle = 0;
  /** The connection's remote end as the kernel's tables write it, once asked for. */
  #remote: string | undefined;

  constructor(socket: Socket) {
    this.socket = socket;
    this.top = socket;
  }

  /** Bytes written to it that the process still holds: its socket's, and over TLS the TLS socket's. */
  get unsent(): number {
    return this.socket.writableLength + (this.top === this.socket ? 0 : this.top.writableLength);
  }

  /**
   * The bytes of requests read from it and still held: all read since it last had no request under
   * way (a body being read, pipelined requests waiting their turn). Node's server keeps the answer
   * under way on its socket (`_httpMessage`) until it is written. None once it has switched
   * protocols: what comes then is not held for long (a WebSocket's message is echoed as it comes).
   */
  get received(): number {
    const read = this.top.bytesRead;
    if (this.ending !== null || (this.top as { _httpMessage?: unknown })._httpMessage == null) {
      this.readWhenIdle = read;
    }
    return read - this.readWhenIdle;
  }

  get remote(): string {
    this.#remote ??= tableAddress(this.socket.remoteAddress ?? '', this.socket.remotePort ?? 0);
    return this.#remote;
  }

  shed(): void {
    this.leaving = true;
    if (this.ending !== null) this.ending(this.#reset);
    else this.#reset();
  }

  /**
   * Ends the connection with RST, which frees its kernel send queue at once: closed in the ordinary
   * way, the kernel would go on holding what its client does not read, and trying to send it.
   */
  readonly #reset = (): void => {
    if (!this.socket.destroyed) this.socket.resetAndDestroy();
  };
}

/** A connection's remote end, as both its TCP socket and the TLS socket made of it give it. */
export const connectionKey = (socket: Socket): string => `${socket.remoteAddress}:${socket.remotePort}`;

export class HeldConnections {
  readonly #open = new Map<string, Connection>();
  readonly #budget: MemoryBudget;
  /** The port listened on, whose connections the kernel's tables are read for. */
  #port = 0;
  /** Whether the kernel's tables are being read. */
  #reading = false;

  constructor(server: Server, budget: MemoryBudget) {
    this.#budget = budget;
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

  /**
   * The connection of `socket` now speaks another protocol (a WebSocket): no request is read on it,
   * and it is shed by `end` (naming the budget's `action`), which resets it once it has said why.
   */
  switched(socket: Socket, action: string, end: (reset: () => void) => void): void {
    const connection = this.#open.get(connectionKey(socket));
    if (connection === undefined) return;
    connection.action = action;
    connection.ending = end;
  }

  /**
   * What each connection holds as last known: its kernel queue as last read. The tables are read
   * again once what they may hold, the bytes written since the last reading included, could come
   * to half the budget; until that reading comes, nothing is shed on a guess.
   */
  #holdings(): Iterable<Connection> {
    let most = 0;
    for (const connection of this.#open.values()) {
      connection.bytes = connection.received + connection.unsent + connection.queued;
      most += connection.bytes + connection.top.bytesWritten - connection.writtenWhenRead;
    }
    if (most > this.#budget.limit / 2 && sendQueuesReadable && this.#port !== 0 && !this.#reading) this.#readQueues();
    return this.#open.values();
  }

  /** Reads each connection's kernel send queue; what was written to it until the reading began may be in it. */
  #readQueues(): void {
    this.#reading = true;
    const written = new Map<Connection, number>();
    for (const connection of this.#open.values()) written.set(connection, connection.top.bytesWritten);
    sendQueues(this.#port).then((queues) => {
      this.#reading = false;
      for (const [connection, bytes] of written) {
        connection.queued = queues.get(connection.remote) ?? 0;
        connection.writtenWhenRead = bytes;
      }
    });
  }
}
