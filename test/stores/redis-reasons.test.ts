import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { ReplyError } from 'ioredis';
import { isSentinelRound, type RedisUse, reasonOf, resetAfterHandshake } from '../../src/stores/redis-reasons.js';

/**
 * What each failure ioredis reports means, word for word as ioredis and Redis 7 word them: those
 * the tests against real servers cannot bring about cheaply (sentinels, a Cluster), and the
 * script lines a refusal is traced to.
 */

const SCRIPT = "\nlocal a = redis.call('HMGET', KEYS[1], 'x')\nredis.call('HSET', KEYS[1], 'x', 1)\n";
const SHA = createHash('sha1').update(SCRIPT).digest('hex');

const SENTINELS: RedisUse = {
  keyPrefix: 'greeting-service:',
  primaryName: 'mymaster',
  addresses: '10.0.0.1:26379,10.0.0.2:26379',
  scripts: new Map([[SHA, SCRIPT]]),
};
const CLUSTER: RedisUse = { ...SENTINELS, primaryName: null, addresses: '10.0.0.1:6379' };

const reason = (error: Error, use = SENTINELS) => reasonOf(error, 500, use);

describe('reasonOf', () => {
  it('names the command of a script the user may not run, from its line', () => {
    const error = new ReplyError(
      `ERR The user executing the script can't run this command or subcommand script: ${SHA}, on @user_script:3.`,
    );
    assert.deepEqual(reason(error), {
      kind: 'permission',
      text: `Redis denied a permission the service needs: the user may not run HSET (${error.message})`,
    });
  });

  it("names the service's keys when Redis refuses a key, and Redis's own words for a command", () => {
    assert.deepEqual(
      reason(new ReplyError('NOPERM this user has no permissions to access one of the keys used as arguments')),
      {
        kind: 'permission',
        text: 'Redis denied a permission the service needs: NOPERM this user has no permissions to access one of the keys used as arguments (the keys starting greeting-service:)',
      },
    );
    assert.deepEqual(reason(new ReplyError("NOPERM this user has no permissions to run the 'info' command")), {
      kind: 'permission',
      text: "Redis denied a permission the service needs: NOPERM this user has no permissions to run the 'info' command",
    });
  });

  it('tells refused credentials, read-only, a cluster down and a timeout apart', () => {
    assert.deepEqual(reason(new ReplyError('NOAUTH Authentication required.')), {
      kind: 'credentials',
      text: 'Redis refused the credentials: NOAUTH Authentication required.',
    });
    assert.deepEqual(reason(new ReplyError("READONLY You can't write against a read only replica.")), {
      kind: 'read-only',
      text: "Redis is read-only, a replica rather than the primary: READONLY You can't write against a read only replica.",
    });
    assert.deepEqual(reason(new ReplyError('CLUSTERDOWN The cluster is down')), {
      kind: 'cluster-down',
      text: 'The Redis Cluster is down: CLUSTERDOWN The cluster is down',
    });
    assert.deepEqual(reason(new Error('Command timed out')), {
      kind: 'timeout',
      text: 'Redis did not answer within 500 ms.',
    });
  });

  it("says what the sentinels said: the primary's name unknown, their credentials refused, none answering", () => {
    assert.deepEqual(
      reason(
        new Error(
          'All sentinels are unreachable. Retrying from scratch after 10ms. Last error: ERR No such master with that name',
        ),
      ),
      {
        kind: 'no-primary',
        text: 'No primary named "mymaster" is known to the sentinels (10.0.0.1:26379,10.0.0.2:26379): ERR No such master with that name',
      },
    );
    assert.deepEqual(
      reason(
        new Error(
          'All sentinels are unreachable. Retrying from scratch after 10ms. Last error: WRONGPASS invalid username-password pair or user is disabled.',
        ),
      ),
      {
        kind: 'credentials',
        text: 'Redis Sentinel refused the credentials: WRONGPASS invalid username-password pair or user is disabled.',
      },
    );
    assert.deepEqual(
      reason(
        new Error('All sentinels are unreachable. Retrying from scratch after 10ms. Last error: Connection is closed.'),
      ),
      {
        kind: 'unreachable',
        text: 'Redis Sentinel is unreachable: no sentinel of 10.0.0.1:26379,10.0.0.2:26379 answered (Connection is closed.)',
      },
    );
  });

  it('takes the note ioredis writes after each round of the sentinels for no state', () => {
    assert.equal(isSentinelRound(new Error('All sentinels are unreachable. Retrying from scratch after 10ms.')), true);
    assert.equal(
      isSentinelRound(new Error('All sentinels are unreachable. Retrying from scratch after 10ms. Last error: x')),
      false,
    );
    assert.equal(isSentinelRound(new Error('connect ECONNREFUSED 127.0.0.1:6379')), false);
  });

  it('says why a Cluster reached none of its nodes', () => {
    const unreachable = Object.assign(new Error('Failed to refresh slots cache.'), {
      lastNodeError: new Error('Connection is closed.'),
    });
    assert.deepEqual(reason(unreachable, CLUSTER), {
      kind: 'unreachable',
      text: 'Redis Cluster is unreachable: no node of 10.0.0.1:6379 answered (Connection is closed.)',
    });
    const refused = Object.assign(new Error('Failed to refresh slots cache.'), {
      lastNodeError: new ReplyError('WRONGPASS invalid username-password pair or user is disabled.'),
    });
    assert.deepEqual(reason(refused, CLUSTER), {
      kind: 'credentials',
      text: 'Redis refused the credentials: WRONGPASS invalid username-password pair or user is disabled.',
    });
  });

  it('says which side of TLS refused, in words rather than OpenSSL codes', () => {
    const tls = (code: string, message: string) => Object.assign(new Error(message), { code });
    assert.deepEqual(reason(tls('CERT_HAS_EXPIRED', 'certificate has expired')), {
      kind: 'tls',
      text: "Redis's TLS certificate is out of its validity period: certificate has expired",
    });
    assert.deepEqual(
      reason(
        tls(
          'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA',
          '803C057D787F0000:error:0A000418:SSL routines:ssl3_read_bytes:tlsv1 alert unknown ca:../deps/openssl/openssl/ssl/record/rec_layer_s3.c:1601:SSL alert number 48\n',
        ),
      ),
      { kind: 'tls', text: 'Redis refused the client certificate of REDIS_TLS_CERT_FILE: tlsv1 alert unknown ca' },
    );
    assert.deepEqual(
      reason(tls('ECONNRESET', 'Client network socket disconnected before secure TLS connection was established')),
      {
        kind: 'tls',
        text: 'TLS with Redis failed (is it a TLS port?): Client network socket disconnected before secure TLS connection was established',
      },
    );
    assert.equal(resetAfterHandshake(tls('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:6380')), null);
    assert.equal(resetAfterHandshake(tls('EPIPE', 'write EPIPE'))?.kind, 'tls');
  });
});
