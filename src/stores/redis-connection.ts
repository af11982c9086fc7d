import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { type ChainableCommander, Command, Redis, ReplyError } from 'ioredis';
import { redisTlsOn } from '../config/redis.js';
import { type StoreHealth, StoreUnavailableError } from './availability.js';
import { createRedisClient, dropConnections, type RedisClient, type RedisSettings } from './redis-client.js';
import {
  CONNECTION_CLOSED,
  isOutOfMemory,
  isSentinelRound,
  noPrimary,
  type Reason,
  type RedisUse,
  reasonOf,
  resetAfterHandshake,
} from './redis-reasons.js';

/** The longest pause between two attempts to reconnect: how long recovery may lag behind Redis. */
const MAX_RECONNECT_DELAY_MS = 1000;
/**
 * The same with Sentinel, where each attempt asks a sentinel for the primary first, which answers
 * at once, and between two checks of a Cluster, which stays connected through a failover, so that
 * only a check finds that a replica took the slots over: a new primary serves soon after it is one.
 */
const MAX_FAILOVER_DELAY_MS = 200;
/** The first pause between two checks of a Redis that is connected but failing, doubled up to the longest. */
const PROBE_INTERVAL_MS = 100;

export interface RedisConnectionOptions {
  settings: RedisSettings;
  /** How many replicas must have a write run by `runReplicated` before it is answered (REDIS_MIN_REPLICAS_ACK). */
  minReplicasAck?: number;
  log: FastifyBaseLogger;
}

/**
 * A store's check that Redis lets it do its work, as it does it, run on each new connection and
 * by /readyz. `thorough`: every command the store uses, which may write what is already there
 * or a key that expires at once; otherwise only reads.
 */
export type StoreCheck = (client: RedisClient, thorough: boolean) => Promise<unknown>;

/** Redis answered, but in a state in which the service cannot work: not a primary. */
class RedisStateError extends Error {
  constructor(readonly reason: Reason) {
    super(reason.text);
  }
}

const NOT_CONNECTED: Reason = { kind: 'unreachable', text: 'Redis is not connected yet.' };

const OUTAGE_WARNING = 'Redis is unavailable: rate limiting is off and profile requests answer 503 until it is back';
const REPLICAS_WARNING = 'Redis has too few replicas in step: profile writes answer 503 until it has them again';
const FULL_WARNING = 'Redis is full (maxmemory): profile writes answer 503 and rate limiting is off until it has room';

/**
 * A write refused by a primary with too few replicas (its `min-replicas-to-write`): Redis itself
 * is there and serves reads, so this fails the one request, not the connection.
 */
function isTooFewReplicas(error: unknown): boolean {
  return error instanceof ReplyError && /(^|: )NOREPLICAS /.test((error as Error).message);
}

/**
 * Sends one command and answers its reply even when the client gave up on it while that reply was
 * already there: an event loop held up (a long collection, a paused VM or container) runs the
 * timeout's timer before it reads the socket again, and ioredis drops a reply to a command it has
 * failed. One more turn of the loop reads what came meanwhile; only then is the timeout the answer.
 */
async function sendHeard<T>(client: RedisClient, name: string, args: (string | number)[]): Promise<T> {
  const command = new Command(name, args, { keyPrefix: client.options.keyPrefix });
  let heard: { reply: T } | null = null;
  const resolve = command.resolve;
  command.resolve = (reply: T) => {
    heard = { reply };
    resolve(reply);
  };
  try {
    return (await client.sendCommand(command)) as T;
  } catch (error) {
    if ((error as Error).message !== 'Command timed out') throw error;
    await new Promise((turned) => setImmediate(turned));
    if (heard === null) throw error;
    return (heard as { reply: T }).reply;
  }
}

/**
 * The one connection to Redis that the Redis stores share, and its health, whichever Redis it
 * is: one node, the primary Sentinel names, or a Cluster. It fails fast rather than queue: a
 * command Redis does not answer rejects after the timeout, and from then on, as while
 * disconnected, every command rejects at once, so that no request waits more than one timeout,
 * until Redis can serve again: reconnected by ioredis, in the background for ever, and checked
 * as the stores use it (a primary, their commands and keys allowed) before it is used. So the
 * service starts without Redis and recovers without a restart. A warning is logged when an
 * outage begins, or turns into another kind (unreachable, refused credentials, ...), and one
 * line when it ends, whatever the number of requests in between. With REDIS_MIN_REPLICAS_ACK, the
 * profile writes go over a second client, followed by WAIT (`runReplicated`).
 */
export class RedisConnection implements StoreHealth {
  readonly client: RedisClient;
  /** REDIS_TIMEOUT_MS: how long a command may take before the client gives up on it. */
  readonly timeoutMs: number;
  readonly #log: FastifyBaseLogger;
  readonly #tls: boolean;
  /** Every password the client was given: never repeated in a reason. */
  readonly #secrets = new Set<string>();
  readonly #checks: StoreCheck[] = [];
  readonly #use: RedisUse & { scripts: Map<string, string> };
  /** Each script's source and SHA-1, by the name `defineScript` gave it. */
  readonly #scriptsByName = new Map<string, { lua: string; sha: string }>();
  /** Why Redis cannot serve now; null while it can. */
  #unavailable: Reason | null = NOT_CONNECTED;
  /**
   * The kinds of the outage going on that have been warned of: each once, so that an outage
   * whose cause alternates (an address refused, a sentinel not yet knowing the new primary)
   * is not a warning per attempt.
   */
  readonly #loggedKinds = new Set<Reason['kind']>();
  /**
   * Whether Redis refused, on the connection of the moment, to select the database of the URL:
   * that connection is then on database 0, and nothing may run on it.
   */
  #databaseRefused = false;
  #closing = false;
  #probing = false;
  #probeDelayMs = PROBE_INTERVAL_MS;
  readonly #maxProbeDelayMs: number;
  #probeTimer: NodeJS.Timeout | undefined;
  readonly #minReplicasAck: number;
  /**
   * With REDIS_MIN_REPLICAS_ACK, a client of its own for the writes that wait for replicas: WAIT
   * holds up the connection it runs on, which must not be the one every read and count shares.
   */
  readonly #writer: RedisClient | null;
  /** Whether writes are being refused for too few replicas: logged once when it starts and once when it ends. */
  #replicasShort = false;
  /** Whether writes are being refused because Redis is full: logged once when it starts and once when it ends. */
  #full = false;

  constructor({ settings, minReplicasAck = 0, log }: RedisConnectionOptions) {
    this.timeoutMs = settings.redisTimeoutMs;
    this.#log = log;
    this.#tls = redisTlsOn(settings);
    const addresses = settings.redisSentinels ?? settings.redisClusterNodes;
    this.#use = {
      keyPrefix: settings.redisKeyPrefix,
      primaryName: settings.redisSentinelName,
      addresses:
        addresses?.map(({ host, port }) => `${host.includes(':') ? `[${host}]` : host}:${port}`).join(',') ?? null,
      scripts: new Map(),
    };
    this.#minReplicasAck = minReplicasAck;
    const maxDelay = settings.redisSentinels === null ? MAX_RECONNECT_DELAY_MS : MAX_FAILOVER_DELAY_MS;
    this.#maxProbeDelayMs = settings.redisClusterNodes === null ? MAX_RECONNECT_DELAY_MS : MAX_FAILOVER_DELAY_MS;
    const hooks = {
      // Asking for a database Redis refuses again and again would be one connection after another.
      retryDelay: (attempt: number) =>
        this.#databaseRefused ? MAX_RECONNECT_DELAY_MS : Math.min(attempt * 100, maxDelay),
      onPassword: (password: string) => this.#secrets.add(password),
    };
    this.client = createRedisClient(settings, hooks);
    this.#writer = minReplicasAck > 0 ? createRedisClient(settings, hooks) : null;
    // Its failures are the requests' own; the shared client's events tell the state of Redis.
    this.#writer?.on('error', () => {});
    for (const client of [this.client, this.#writer]) {
      if (client instanceof Redis) this.#keepConnecting(client, maxDelay);
      // ioredis connects to a node of a Cluster at its first command, and, with no queue, fails
      // every other command sent to it meanwhile: each connects as soon as the slots name it.
      else client?.on('+node', (node: Redis) => node.connect().catch(() => {}));
    }
    // Each connection selects the database of the URL before it is ready, and is checked before
    // it is used.
    this.client.on('connect', () => {
      this.#databaseRefused = false;
    });
    this.client.on('ready', () => this.#connected());
    this.client.on('error', (error: Error) => {
      if (isRefusedSelect(error)) this.#refuseDatabase(error);
      // The rest of a connection dropped for its database fails too, for no other reason.
      else if (!this.#databaseRefused && !isSentinelRound(error)) this.#lost(this.#connectionReason(error));
    });
    this.client.on('sentinelError', (error: Error) => {
      // Asked for the primary, a sentinel that knows the name but has none answers nil.
      if (error.message.endsWith('invalid reply: null')) this.#lost(noPrimary(this.#use, 'none named'));
    });
    // After an error, the close that follows adds nothing to the error's reason.
    this.client.on('close', () => this.#unavailable === null && this.#lost(CONNECTION_CLOSED));
  }

  /** Defines a store's Lua script of one key as a command of the clients, `name`, also in a pipeline. */
  defineScript(name: string, lua: string): void {
    this.client.defineCommand(name, { numberOfKeys: 1, lua });
    this.#writer?.defineCommand(name, { numberOfKeys: 1, lua });
    const sha = createHash('sha1').update(lua).digest('hex');
    this.#use.scripts.set(sha, lua);
    this.#scriptsByName.set(name, { lua, sha });
  }

  /**
   * Runs the script `name` (of `defineScript`) that writes `key`, as `run` runs a write, and
   * answers its reply if it came before the timeout, even when the timeout's timer ran first (see
   * `sendHeard`): a write Redis made in time is not answered as failed for the instance's own delay.
   */
  async runScript<T>(name: string, key: string, args: string[]): Promise<T> {
    const script = this.#scriptsByName.get(name);
    if (script === undefined) throw new Error(`no script named ${name} was defined`);
    return this.run(async (client) => {
      try {
        return await sendHeard<T>(client, 'evalsha', [script.sha, 1, key, ...args]);
      } catch (error) {
        // Not in this Redis's cache yet (a new connection, a restart): sent with its source.
        if (!(error instanceof ReplyError && (error as Error).message.startsWith('NOSCRIPT'))) throw error;
        return await sendHeard<T>(client, 'eval', [script.lua, 1, key, ...args]);
      }
    }, true);
  }

  /** Adds a store's check to those run before Redis is used and by /readyz. */
  addCheck(check: StoreCheck): void {
    this.#checks.push(check);
  }

  /**
   * Runs one command, at once failing while Redis is unavailable. Any failure, an outage, a
   * timeout or an error answered by Redis, becomes a StoreUnavailableError. `write`: the command
   * writes, so its success, with no replicas to wait for, ends a refusal for want of replicas.
   */
  async run<T>(command: (client: RedisClient) => Promise<T>, write = false): Promise<T> {
    if (this.#unavailable !== null) {
      this.#probe();
      throw new StoreUnavailableError(this.#unavailable.text);
    }
    try {
      const answer = await command(this.client);
      if (write && this.#writer === null) this.#enoughReplicas();
      if (write) this.#roomAgain();
      return answer;
    } catch (error) {
      if (isTooFewReplicas(error)) throw this.#tooFewReplicas((error as Error).message, error);
      if (isOutOfMemory(error)) throw this.#outOfMemory((error as Error).message, error);
      // The connection's own reason, e.g. ECONNREFUSED, says more than "Stream isn't writeable".
      if (this.#unavailable === null) this.#lost(this.#commandReason(error as Error));
      throw new StoreUnavailableError(this.#reason(), { cause: error });
    }
  }

  /** Whether writes wait for replicas: then the stores write through `runReplicated`. */
  get replicatedWrites(): boolean {
    return this.#writer !== null;
  }

  /**
   * Runs a write, queued on `pipeline`, followed by `WAIT`, and answers what the write answered
   * only once REDIS_MIN_REPLICAS_ACK replicas have it. Fewer within the timeout, or a primary
   * that refuses writes for want of replicas: a StoreUnavailableError, and the write, if made
   * at all, is on the primary alone, and may be lost with it. `applied` says from the write's
   * answer whether it wrote anything: one that changed nothing is answered whatever WAIT says. One pipeline,
   * so that the WAIT runs on the connection, and in a Cluster the node, of the write.
   */
  async runReplicated<T>(write: (pipeline: ChainableCommander) => void, applied: (answer: T) => boolean): Promise<T> {
    const writer = this.#writer;
    if (writer === null) throw new Error('runReplicated needs REDIS_MIN_REPLICAS_ACK');
    if (this.#unavailable !== null) {
      this.#probe();
      throw new StoreUnavailableError(this.#unavailable.text);
    }
    if (writer.status !== 'ready') throw new StoreUnavailableError(CONNECTION_CLOSED.text);
    const pipeline = writer.pipeline();
    write(pipeline);
    let results: [Error | null, unknown][] | null;
    try {
      results = await pipeline.wait(this.#minReplicasAck, this.timeoutMs).exec();
    } catch (error) {
      throw new StoreUnavailableError(this.#commandReason(error as Error).text, { cause: error });
    }
    const [[writeError, answer] = [null, null], [waitError, acknowledged] = [null, 0]] = results ?? [];
    if (writeError !== null) {
      if (isTooFewReplicas(writeError)) throw this.#tooFewReplicas(writeError.message, writeError);
      // A Cluster's slots moved meanwhile: the next write goes where they are now.
      if (!(writer instanceof Redis) && /^(MOVED|ASK|CLUSTERDOWN) /.test(writeError.message)) {
        writer.refreshSlotsCache();
      }
      throw new StoreUnavailableError(this.#reasonOf(writeError).text, { cause: writeError });
    }
    if (!applied(answer as T)) return answer as T;
    // WAIT answers the count at the timeout; the client's own timeout may fire first.
    const count = waitError === null ? Number(acknowledged) : 0;
    if (count < this.#minReplicasAck) {
      throw this.#tooFewReplicas(
        `${count} of ${this.#minReplicasAck} replicas acknowledged the write within ${this.timeoutMs} ms.`,
        waitError,
      );
    }
    this.#enoughReplicas();
    return answer as T;
  }

  #enoughReplicas(): void {
    if (!this.#replicasShort) return;
    this.#replicasShort = false;
    this.#log.info('Redis has the replicas it needs again: profile writes are answered again');
  }

  #roomAgain(): void {
    if (!this.#full) return;
    this.#full = false;
    this.#log.info('Redis has room again: profile writes are answered again');
  }

  /** A write refused because Redis is full: one warning while it goes on, and reads go on. */
  #outOfMemory(text: string, cause: unknown): StoreUnavailableError {
    if (!this.#full) {
      this.#full = true;
      this.#log.warn({ reason: text }, FULL_WARNING);
    }
    return new StoreUnavailableError(`Redis is full (maxmemory): ${text}`, { cause });
  }

  /** A write refused or not acknowledged for want of replicas: one warning while it goes on. */
  #tooFewReplicas(text: string, cause: unknown): StoreUnavailableError {
    if (!this.#replicasShort) {
      this.#replicasShort = true;
      this.#log.warn({ reason: text }, REPLICAS_WARNING);
    }
    return new StoreUnavailableError(`Redis has too few replicas in step: ${text}`, { cause });
  }

  /**
   * Known to be unavailable: the reason at once. Otherwise the stores' reads as they run them,
   * on a node that must be the primary, so that a Redis that stopped answering, or lets the
   * service read none of its keys, or is a replica, is seen too.
   */
  async unavailableReason(): Promise<string | null> {
    try {
      await this.run(() => this.#verify(false));
      return null;
    } catch {
      return this.#reason();
    }
  }

  /** Closes the connection for good: after the last request, when the app closes. */
  async close(): Promise<void> {
    this.#closing = true;
    clearTimeout(this.#probeTimer);
    await Promise.all(
      [this.client, this.#writer].map(async (client) => {
        try {
          await client?.quit();
        } catch {
          // Not connected, or Redis did not answer: nothing left to say goodbye to.
        } finally {
          client?.disconnect();
        }
      }),
    );
  }

  /**
   * Whether the service can work with Redis: the node is a primary (a Cluster's client sends
   * each command to the primary of its key's slot itself), and each store's check passes.
   */
  async #verify(thorough: boolean): Promise<void> {
    const { client } = this;
    if (client instanceof Redis) {
      const role = /^role:(\w+)/m.exec(await client.info('replication'))?.[1];
      if (role !== 'master') {
        // A primary demoted under the service: the sentinels know the new one.
        if (this.#use.primaryName !== null) client.disconnect(true);
        throw new RedisStateError({
          kind: 'read-only',
          text: `Redis is read-only: the node connected to is a replica (role:${role}), not the primary.`,
        });
      }
    }
    for (const check of this.#checks) {
      try {
        await check(client, thorough);
      } catch (error) {
        // A primary without its replicas, or full, refuses the checks' writes, and still serves.
        if (!isTooFewReplicas(error) && !isOutOfMemory(error)) throw error;
      }
    }
  }

  /**
   * ioredis ends a Sentinel client for good when the sentinels announce a new primary while it
   * is asking them for the primary (its failover detector closes the connector under that
   * attempt, which then gives up): unless the service is closing it, it connects again.
   */
  #keepConnecting(client: Redis, delayMs: number): void {
    client.on('end', () => {
      if (this.#closing) return;
      setTimeout(() => {
        if (!this.#closing && client.status === 'end') client.connect().catch(() => {});
      }, delayMs).unref();
    });
  }

  /** Why Redis cannot serve, as the last failure said. */
  #reason(): string {
    return this.#unavailable?.text ?? 'Redis failed.';
  }

  #reasonOf(error: Error): Reason {
    return error instanceof RedisStateError ? error.reason : reasonOf(error, this.timeoutMs, this.#use);
  }

  /** A connection's failure, as ioredis reports it. */
  #connectionReason(error: Error): Reason {
    // Its handshake done, the connection is "connect" until its first commands are answered.
    const early = this.#tls && this.client.status === 'connect' ? resetAfterHandshake(error) : null;
    return early ?? this.#reasonOf(error);
  }

  /** A command's failure: Redis's answer or the timeout; anything else is a connection lost. */
  #commandReason(error: Error): Reason {
    const answered =
      error instanceof RedisStateError || error instanceof ReplyError || error.message === 'Command timed out';
    if (answered) return this.#reasonOf(error);
    if (error.message.includes('CLUSTERDOWN')) return this.#reasonOf(new ReplyError('CLUSTERDOWN'));
    return CONNECTION_CLOSED;
  }

  /**
   * ioredis reports a failed SELECT and then goes on with the connection as it is, on database 0.
   * The connection is dropped instead, and the next one asks again, so that the data never goes
   * to another database, and the service is ready once Redis accepts the database.
   */
  #refuseDatabase(error: RefusedSelect): void {
    this.#databaseRefused = true;
    this.#lost({ kind: 'database', text: `Redis refused database ${error.command.args[0]}: ${error.message}` });
    this.client.disconnect(true);
  }

  /** Redis cannot serve, for `reason`: a warning if that is news (an outage begins, or turns into another kind). */
  #lost(reason: Reason): void {
    if (this.#closing) return;
    // A command timed out: its reply may still be coming, and would be read in full to be dropped.
    if (reason.kind === 'timeout') dropConnections(this.client);
    let text = reason.text;
    // Error messages name hosts and ports, not passwords; this makes sure of it.
    for (const secret of this.#secrets) text = text.replaceAll(secret, '***');
    this.#unavailable = { kind: reason.kind, text };
    this.#probe();
    if (this.#loggedKinds.has(reason.kind)) return;
    this.#loggedKinds.add(reason.kind);
    this.#log.warn({ reason: text }, OUTAGE_WARNING);
  }

  /**
   * While Redis is connected but cannot serve (it stopped answering, answers errors, is a
   * replica), checks it thoroughly, one check at a time, after 0.1 s, 0.2 s, … at most 1 s as it
   * keeps failing, until one passes; a new connection is checked at once. While it is
   * disconnected, reconnecting is ioredis's job.
   */
  #probe(): void {
    const waiting = this.#probing || this.#probeTimer !== undefined;
    if (waiting || this.#closing || this.#unavailable === null || this.client.status !== 'ready') return;
    this.#probing = true;
    this.#verify(true).then(
      () => {
        this.#probing = false;
        this.#probeDelayMs = PROBE_INTERVAL_MS;
        this.#available();
      },
      (error: Error) => {
        this.#probing = false;
        this.#probeTimer = setTimeout(() => {
          this.#probeTimer = undefined;
          this.#probe();
        }, this.#probeDelayMs).unref();
        this.#probeDelayMs = Math.min(this.#probeDelayMs * 2, this.#maxProbeDelayMs);
        const reason = this.#commandReason(error);
        // A connection lost meanwhile is reported by its own events, with its cause.
        if (reason !== CONNECTION_CLOSED) this.#lost(reason);
      },
    );
  }

  /** A new connection: checked at once. */
  #connected(): void {
    clearTimeout(this.#probeTimer);
    this.#probeTimer = undefined;
    this.#probeDelayMs = PROBE_INTERVAL_MS;
    this.#probe();
  }

  #available(): void {
    if (this.#databaseRefused || this.#closing) return;
    this.#unavailable = null;
    if (this.#loggedKinds.size === 0) return;
    this.#loggedKinds.clear();
    this.#log.info('Redis is available again');
  }
}

/** The error of a SELECT that Redis answered with an error, as ioredis reports it. */
type RefusedSelect = Error & { command: { name: 'select'; args: unknown[] } };

function isRefusedSelect(error: Error): error is RefusedSelect {
  return error instanceof ReplyError && (error as Partial<RefusedSelect>).command?.name === 'select';
}
