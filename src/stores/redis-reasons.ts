import { ReplyError } from 'ioredis';

/**
 * Why Redis cannot serve, in one sentence for an operator, and its kind: an outage is logged
 * when it starts and again only when its kind changes, so a reason that varies in its details
 * (the address of the moment, the attempt) is one state.
 */
export interface Reason {
  kind:
    | 'unreachable'
    | 'timeout'
    | 'credentials'
    | 'permission'
    | 'read-only'
    | 'tls'
    | 'database'
    | 'no-primary'
    | 'cluster-down'
    | 'failed';
  text: string;
}

/**
 * A write refused because Redis is full (`maxmemory` reached with the `noeviction` policy): it
 * still serves reads, so this fails the one write, not the connection.
 */
export function isOutOfMemory(error: unknown): boolean {
  return error instanceof ReplyError && /(^|: )OOM /.test((error as Error).message);
}

export const CONNECTION_CLOSED: Reason = { kind: 'unreachable', text: 'Redis is unreachable: the connection closed.' };

/** Node's codes for a server certificate that no trusted CA signed. */
const UNTRUSTED = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
]);

/** What a TLS failure means, by Node's or OpenSSL's code; null if it is no TLS failure. */
function tlsReason(error: NodeJS.ErrnoException): Reason | null {
  const code = error.code ?? '';
  // OpenSSL's messages are a line of codes and source files around the words.
  const message = /SSL routines:[^:]*:([^:]+)/.exec(error.message)?.[1] ?? error.message.trim();
  const text = (what: string) => ({ kind: 'tls' as const, text: `${what}: ${message}` });
  if (UNTRUSTED.has(code)) {
    return text("Redis's TLS certificate is not trusted (REDIS_TLS_CA_FILE names the CA to trust)");
  }
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return text("Redis's TLS certificate is for another name (REDIS_TLS_SERVERNAME sets the name to check)");
  }
  if (code === 'CERT_HAS_EXPIRED' || code === 'CERT_NOT_YET_VALID') {
    return text("Redis's TLS certificate is out of its validity period");
  }
  if (code.includes('CERTIFICATE_REQUIRED') || code.includes('HANDSHAKE_FAILURE')) {
    return text('Redis refused the TLS connection: it requires a client certificate (REDIS_TLS_CERT_FILE)');
  }
  if (code.includes('UNKNOWN_CA') || code.includes('BAD_CERTIFICATE') || code.includes('DECRYPT_ERROR')) {
    return text('Redis refused the client certificate of REDIS_TLS_CERT_FILE');
  }
  if (code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_')) return text('TLS with Redis failed');
  if (error.message.includes('before secure TLS connection was established')) {
    return text('TLS with Redis failed (is it a TLS port?)');
  }
  return null;
}

/** What the service knows of its own use of Redis, to say what a refusal was about. */
export interface RedisUse {
  /** The prefix of every key of the service. */
  keyPrefix: string;
  /** The name of the primary asked of the sentinels, with Sentinel. */
  primaryName: string | null;
  /** The sentinels, or the Cluster's seed nodes, as configured (`10.0.0.1:26379,…`); null for one node. */
  addresses: string | null;
  /** The Lua source of each script the service runs, by its SHA-1. */
  scripts: ReadonlyMap<string, string>;
}

/**
 * The command of a script that Redis refused to run for the user, from the script's SHA-1 and
 * line in Redis's message (Redis 7.0 names neither the command nor the user).
 */
function refusedInScript(message: string, use: RedisUse): string | null {
  const at = /script: ([0-9a-f]{40}), on @user_script:(\d+)/.exec(message);
  const line = at === null ? undefined : use.scripts.get(at[1] ?? '')?.split('\n')[Number(at[2]) - 1];
  return /redis\.call\('(\w+)'/.exec(line ?? '')?.[1] ?? null;
}

/**
 * A TLS connection that Redis reset once the handshake seemed done, before the service could use
 * it: with TLS 1.3, how a server refuses the client's certificate (or its absence), when the
 * service writes before it reads the alert that says so.
 */
export function resetAfterHandshake(error: NodeJS.ErrnoException): Reason | null {
  if (error.code !== 'ECONNRESET' && error.code !== 'EPIPE') return null;
  return {
    kind: 'tls',
    text: `Redis closed the TLS connection before it was ready, as when it requires a client certificate (REDIS_TLS_CERT_FILE) or refuses the one shown: ${error.message}`,
  };
}

/** A reply Redis gave as an error, by its code. */
function replyReason(message: string, use: RedisUse): Reason {
  const code = message.split(' ', 1)[0];
  const denied = (what: string) => ({
    kind: 'permission' as const,
    text: `Redis denied a permission the service needs: ${what}`,
  });
  if (code === 'ERR' && message.includes("can't run this command")) {
    const command = refusedInScript(message, use);
    return denied(command === null ? message : `the user may not run ${command} (${message})`);
  }
  switch (code) {
    case 'WRONGPASS':
    case 'NOAUTH':
      return { kind: 'credentials', text: `Redis refused the credentials: ${message}` };
    case 'NOPERM':
      // Redis names the command it refused, but not a key.
      return denied(message.includes('keys') ? `${message} (the keys starting ${use.keyPrefix})` : message);
    case 'READONLY':
      return { kind: 'read-only', text: `Redis is read-only, a replica rather than the primary: ${message}` };
    case 'CLUSTERDOWN':
      return { kind: 'cluster-down', text: `The Redis Cluster is down: ${message}` };
    case 'MASTERDOWN':
      return { kind: 'no-primary', text: `Redis has lost its primary: ${message}` };
    default:
      return { kind: 'failed', text: `Redis failed: ${message}` };
  }
}

/** Sentinel's own reports, as ioredis words them. */
const ALL_SENTINELS_FAILED = /^All sentinels are unreachable\b.*?(?: Last error: (.*))?$/s;

/** The sentinels answered, but named no primary. */
export function noPrimary(use: RedisUse, said: string): Reason {
  return {
    kind: 'no-primary',
    text: `No primary named ${JSON.stringify(use.primaryName)} is known to the sentinels (${use.addresses}): ${said}`,
  };
}

/**
 * Whether ioredis only says it went round the sentinels: it does after each round, even after
 * one that found the primary, whose address then refused. A sentinel that names no primary is
 * reported on its own (a "sentinelError").
 */
export function isSentinelRound(error: Error): boolean {
  return ALL_SENTINELS_FAILED.exec(error.message)?.[1] === undefined && ALL_SENTINELS_FAILED.test(error.message);
}

/** What the sentinels, asked for the primary, said last. */
function sentinelReason(last: string, timeoutMs: number, use: RedisUse): Reason {
  // A sentinel that knows no such name says so.
  if (last.includes('No such master')) return noPrimary(use, last);
  const inner = reasonOf(Object.assign(new Error(last), { code: lastErrorCode(last) }), timeoutMs, use);
  if (inner.kind !== 'unreachable') return { kind: inner.kind, text: inner.text.replace(/^Redis\b/, 'Redis Sentinel') };
  return {
    kind: 'unreachable',
    text: `Redis Sentinel is unreachable: no sentinel of ${use.addresses} answered (${last})`,
  };
}

/** A reply larger than the service takes from Redis: the connection that brought it is dropped. */
export class ReplyTooLargeError extends Error {
  override name = 'ReplyTooLargeError';
  constructor(maxBytes: number) {
    super(`Redis sent a reply of more than ${maxBytes} bytes; the connection was dropped.`);
  }
}

/**
 * The reason for an error ioredis reported, whether a command's, a connection's, the
 * sentinels' or a Cluster's: `timeoutMs` is the command timeout.
 */
export function reasonOf(error: Error & { lastNodeError?: Error }, timeoutMs: number, use: RedisUse): Reason {
  // ioredis gives its timeout no class of its own, only this message.
  if (error.message === 'Command timed out') {
    return { kind: 'timeout', text: `Redis did not answer within ${timeoutMs} ms.` };
  }
  if (error instanceof ReplyError || /^[A-Z]{4,} /.test(error.message)) return replyReason(error.message, use);
  if (error instanceof ReplyTooLargeError) return { kind: 'failed', text: error.message };
  const tls = tlsReason(error as NodeJS.ErrnoException);
  if (tls !== null) return tls;
  const sentinels = ALL_SENTINELS_FAILED.exec(error.message);
  if (sentinels !== null) return sentinelReason(sentinels[1] ?? 'none answered', timeoutMs, use);
  // A Cluster that reached none of its nodes: why the last one failed.
  if (error.lastNodeError !== undefined) {
    const inner = reasonOf(error.lastNodeError, timeoutMs, use);
    if (inner.kind !== 'unreachable') return inner;
    return {
      kind: 'unreachable',
      text: `Redis Cluster is unreachable: no node of ${use.addresses} answered (${error.lastNodeError.message})`,
    };
  }
  if (error.message === 'connect ETIMEDOUT') {
    return { kind: 'unreachable', text: 'Redis is unreachable: connecting timed out.' };
  }
  return { kind: 'unreachable', text: `Redis is unreachable: ${error.message}` };
}

/** The errno in a message such as "connect ECONNREFUSED 127.0.0.1:26379", where only the text is left. */
function lastErrorCode(message: string): string | undefined {
  return /\b(E[A-Z]+|ERR_[A-Z_]+)\b/.exec(message)?.[1];
}
