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
  const text = (what: string) => ({ kind: 'tls' as const, text: `${what}: ${error.message}` });
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

/** A reply Redis gave as an error, by its code. */
function replyReason(message: string, command: string | undefined): Reason {
  const code = message.split(' ', 1)[0];
  switch (code) {
    case 'WRONGPASS':
    case 'NOAUTH':
      return { kind: 'credentials', text: `Redis refused the credentials: ${message}` };
    case 'NOPERM': {
      // Redis names the command it refused, except for a key: then it is the one the service sent.
      const named = /'[^']+' command/.test(message) || command === undefined ? '' : ` (running ${command})`;
      return { kind: 'permission', text: `Redis denied a permission the service needs: ${message}${named}` };
    }
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

/**
 * The reason for an error ioredis reported, whether a command's, a connection's or the
 * sentinels': `timeoutMs` is the command timeout, `primaryName` the name asked of the sentinels.
 */
export function reasonOf(error: Error, timeoutMs: number, primaryName: string | null = null): Reason {
  // ioredis gives its timeout no class of its own, only this message.
  if (error.message === 'Command timed out') {
    return { kind: 'timeout', text: `Redis did not answer within ${timeoutMs} ms.` };
  }
  if (error instanceof ReplyError || /^[A-Z]{4,} /.test(error.message)) {
    const { command } = error as Error & { command?: { name?: string } };
    // Errors from a script say so first: the code of the error is after "... script: ".
    const inner = /^ERR .*?: (?:@user_script:\d+: )?((?:NOPERM|READONLY|WRONGPASS|NOAUTH) .*)$/s.exec(error.message);
    return replyReason(inner?.[1] ?? error.message, command?.name?.toUpperCase());
  }
  const tls = tlsReason(error as NodeJS.ErrnoException);
  if (tls !== null) return tls;
  const sentinels = ALL_SENTINELS_FAILED.exec(error.message);
  if (sentinels !== null) {
    const last = sentinels[1];
    if (last === undefined || last === '') {
      return {
        kind: 'no-primary',
        text: `No primary named ${JSON.stringify(primaryName)} is known to the sentinels.`,
      };
    }
    const inner = reasonOf(Object.assign(new Error(last), { code: lastErrorCode(last) }), timeoutMs, primaryName);
    return { kind: inner.kind, text: inner.text.replace(/^Redis\b/, 'Redis Sentinel') };
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
