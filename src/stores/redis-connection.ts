import type { FastifyBaseLogger } from 'fastify';
import { Redis, ReplyError } from 'ioredis';
import { type StoreHealth, StoreUnavailableError } from './availability.js';

/** The longest pause between two attempts to reconnect: how long recovery may lag behind Redis. */
const MAX_RECONNECT_DELAY_MS = 1000;
/**
 * The shortest time connecting may take. Requests do not wait for it (they fail at once while
 * disconnected), and a short one would make a busy start, its event loop blocked for a moment,
 * look like an outage.
 */
const MIN_CONNECT_TIMEOUT_MS = 2000;
/** The pause between two PINGs to a Redis that is connected but failing, until one succeeds. */
const PROBE_INTERVAL_MS = 100;
/** Every key the service writes starts with this, so it can share a Redis with others. */
const KEY_PREFIX = 'greeting-service:';
const CONNECTION_CLOSED = 'Redis is unreachable: the connection closed.';

export interface RedisConnectionOptions {
  /** `redis://` or `rediss://` URL, password included if any. */
  url: string;
  /** Longest wait for any one command. */
  timeoutMs: number;
  log: FastifyBaseLogger;
}

/**
 * The one connection to Redis that the Redis stores share, and its health. It fails fast rather
 * than queue: a command Redis does not answer rejects after `timeoutMs`, and from then on, as
 * while disconnected, every command rejects at once, so that no request waits more than one
 * timeout, until Redis is back: reconnected by ioredis, in the background for ever, or, if the
 * connection stayed up, answering a PING again. So the service starts without Redis and recovers
 * without a restart. One warning is logged when an outage begins and one line when it ends,
 * whatever the number of requests in between.
 */
export class RedisConnection implements StoreHealth {
  readonly client: Redis;
  readonly #timeoutMs: number;
  readonly #log: FastifyBaseLogger;
  readonly #password: string;
  /** Why Redis cannot serve now; null while it can. */
  #unavailable: string | null = 'Redis is not connected yet.';
  /** Whether the current outage has been logged: at most once each. */
  #outageLogged = false;
  /**
   * Whether Redis refused, on the connection of the moment, to select the database of the URL:
   * that connection is then on database 0, and nothing may run on it.
   */
  #databaseRefused = false;
  #closing = false;
  #probing = false;
  #probeTimer: NodeJS.Timeout | undefined;

  constructor({ url, timeoutMs, log }: RedisConnectionOptions) {
    this.#timeoutMs = timeoutMs;
    this.#log = log;
    this.#password = decodeURIComponent(new URL(url).password);
    this.client = new Redis(url, {
      keyPrefix: KEY_PREFIX,
      connectTimeout: Math.max(timeoutMs, MIN_CONNECT_TIMEOUT_MS),
      commandTimeout: timeoutMs,
      // No queueing while disconnected and no retrying of a command: a request fails at once.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      // Asking for a database Redis refuses again and again would be one connection after another.
      retryStrategy: (attempt) =>
        this.#databaseRefused ? MAX_RECONNECT_DELAY_MS : Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS),
    });
    // ioredis connects in the background from here on, and reconnects per the retry strategy.
    // Each connection selects the database of the URL before it is ready.
    this.client.on('connect', () => {
      this.#databaseRefused = false;
    });
    this.client.on('ready', () => this.#available());
    this.client.on('error', (error: Error) => {
      if (isRefusedSelect(error)) this.#refuseDatabase(error);
      // The rest of a connection dropped for its database fails too, for no other reason.
      else if (!this.#databaseRefused) this.#lost(`Redis is unreachable: ${error.message}`);
    });
    // After an error, the close that follows adds nothing to the error's reason.
    this.client.on('close', () => this.#unavailable === null && this.#lost(CONNECTION_CLOSED));
  }

  /**
   * Runs one command, at once failing while Redis is unavailable. Any failure, an outage, a
   * timeout or an error answered by Redis, becomes a StoreUnavailableError.
   */
  async run<T>(command: (client: Redis) => Promise<T>): Promise<T> {
    if (this.#unavailable !== null) {
      this.#probe();
      throw new StoreUnavailableError(this.#unavailable);
    }
    try {
      return await command(this.client);
    } catch (error) {
      // The connection's own reason, e.g. ECONNREFUSED, says more than "Stream isn't writeable".
      if (this.#unavailable === null) this.#lost(this.#describe(error as Error));
      throw new StoreUnavailableError(this.#unavailable ?? 'Redis failed.', { cause: error });
    }
  }

  /** Known to be unavailable: the reason at once. Otherwise a PING, so a Redis that stopped answering is seen too. */
  async unavailableReason(): Promise<string | null> {
    try {
      await this.run((client) => client.ping());
      return null;
    } catch {
      return this.#unavailable;
    }
  }

  /** Closes the connection for good: after the last request, when the app closes. */
  async close(): Promise<void> {
    this.#closing = true;
    clearTimeout(this.#probeTimer);
    try {
      await this.client.quit();
    } catch {
      // Not connected, or Redis did not answer: nothing left to say goodbye to.
    } finally {
      this.client.disconnect();
    }
  }

  #describe(error: Error): string {
    // ioredis gives its timeout no class of its own, only this message.
    if (error.message === 'Command timed out') return `Redis did not answer within ${this.#timeoutMs} ms.`;
    if (error instanceof ReplyError) return `Redis failed: ${error.message}`;
    // Anything else means no connection, possibly before its close event has been emitted.
    return CONNECTION_CLOSED;
  }

  /**
   * ioredis reports a failed SELECT and then goes on with the connection as it is, on database 0.
   * The connection is dropped instead, and the next one asks again, so that the data never goes
   * to another database, and the service is ready once Redis accepts the database.
   */
  #refuseDatabase(error: RefusedSelect): void {
    this.#databaseRefused = true;
    const reason = `Redis refused database ${error.command.args[0]}: ${error.message}`;
    // Only a change of configuration ends this: worth a warning of its own, even in an outage
    // already logged for another reason (Redis was down, and came back refusing).
    if (this.#unavailable !== reason) this.#outageLogged = false;
    this.#lost(reason);
    this.client.disconnect(true);
  }

  #lost(reason: string): void {
    if (this.#closing) return;
    // Error messages name hosts and ports, not passwords; this makes sure of it.
    this.#unavailable = this.#password === '' ? reason : reason.replaceAll(this.#password, '***');
    this.#probe();
    if (this.#outageLogged) return;
    this.#outageLogged = true;
    this.#log.warn(
      { reason: this.#unavailable },
      'Redis is unavailable: rate limiting is off and profile requests answer 503 until it is back',
    );
  }

  /**
   * While Redis is connected but failing (it stopped answering, or answers errors), PINGs it,
   * one at a time, until it answers. While it is disconnected, reconnecting is ioredis's job.
   */
  #probe(): void {
    if (this.#probing || this.#closing || this.#unavailable === null || this.client.status !== 'ready') return;
    this.#probing = true;
    this.client.ping().then(
      () => {
        this.#probing = false;
        this.#available();
      },
      () => {
        this.#probing = false;
        this.#probeTimer = setTimeout(() => this.#probe(), PROBE_INTERVAL_MS).unref();
      },
    );
  }

  #available(): void {
    if (this.#databaseRefused) return;
    this.#unavailable = null;
    if (!this.#outageLogged) return;
    this.#outageLogged = false;
    this.#log.info('Redis is available again');
  }
}

/** The error of a SELECT that Redis answered with an error, as ioredis reports it. */
type RefusedSelect = Error & { command: { name: 'select'; args: unknown[] } };

function isRefusedSelect(error: Error): error is RefusedSelect {
  return error instanceof ReplyError && (error as Partial<RefusedSelect>).command?.name === 'select';
}
