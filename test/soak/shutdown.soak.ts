import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, describe, it } from 'node:test';
import { Client } from 'undici';
import { holdEchoRequest, SLOW_BODY } from '../raw-http.js';
import { exitOf, killAllServers, readLog, startServer, withTimeout } from '../server-process.js';
import { MIX } from './mix.js';

/**
 * SIGTERM in the middle of a load run: every request the server accepted (and so logged) gets its
 * whole response, with the status it must get; a request the server never read fails on the
 * client and is not in the log; the process exits 0 within SHUTDOWN_TIMEOUT_MS. Besides the load,
 * a few requests are held half-sent across the signal: accepted for certain, they must finish,
 * which tells a drain from a server that drops what it has in hand.
 */

const CONNECTIONS = 50;
const LOAD_BEFORE_SIGNAL_MS = 3_000;
const SHUTDOWN_TIMEOUT_MS = 10_000;
const HELD_REQUESTS = 5;

interface Sent {
  id: string;
  /** Its place in MIX. */
  index: number;
  startedAt: number;
  endedAt: number;
  /** The status of the whole response, read to its end; undefined when the request failed. */
  status?: number;
  error?: string;
}

/**
 * One kept-alive connection sending the mix, one request at a time, from its own starting point,
 * until a request fails (the server has closed the connection and stopped listening).
 */
async function drive(origin: string, connection: number, sent: Sent[]): Promise<void> {
  const client = new Client(origin, { pipelining: 1 });
  try {
    for (let seq = 0; ; seq++) {
      const index = (connection + seq) % MIX.length;
      const { method, path, headers, body } = MIX[index] as (typeof MIX)[number];
      const entry: Sent = { id: `load-${connection}-${seq}`, index, startedAt: performance.now(), endedAt: 0 };
      sent.push(entry);
      try {
        const res = await client.request({ method, path, body, headers: { ...headers, 'x-request-id': entry.id } });
        await res.body.text();
        entry.status = res.statusCode;
      } catch (error) {
        entry.error = (error as NodeJS.ErrnoException).code ?? String(error);
        return;
      } finally {
        entry.endedAt = performance.now();
      }
    }
  } finally {
    await client.destroy();
  }
}

describe('shutdown under load', () => {
  after(() => killAllServers());

  it('SIGTERM during a load run: every accepted request gets its whole response, the process exits 0 in time', {
    timeout: 60_000,
  }, async () => {
    const logFile = join(await mkdtemp(join(tmpdir(), 'shutdown-')), 'server.log');
    const server = await startServer(
      { RATE_LIMIT_MAX: String(2 ** 31 - 1), SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS) },
      [],
      { logFile },
    );
    const origin = `http://127.0.0.1:${server.port}`;
    const sent: Sent[] = [];
    const load = Promise.all(Array.from({ length: CONNECTIONS }, (_, connection) => drive(origin, connection, sent)));

    await new Promise((resolve) => setTimeout(resolve, LOAD_BEFORE_SIGNAL_MS));
    const held = await Promise.all(Array.from({ length: HELD_REQUESTS }, () => holdEchoRequest(server.port)));
    const signalledAt = performance.now();
    server.child.kill('SIGTERM');
    // The rest of each held body comes while the server drains, under the load's last requests.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const heldAnswers = Promise.all(
      held.map(({ socket, reader, rest }) => {
        socket.write(rest);
        return reader.next();
      }),
    );
    const exit = await withTimeout(server.exited, SHUTDOWN_TIMEOUT_MS + 5_000, 'exit after SIGTERM');
    const exitedAfterMs = exit.at - signalledAt;
    await withTimeout(load, 5_000, 'the clients to stop');
    const heldResponses = await withTimeout(heldAnswers, 5_000, 'the held requests');
    for (const { socket } of held) socket.destroy();

    const logged = new Map<string, number>();
    for (const line of await readLog(logFile)) {
      if (typeof line.request_id === 'string' && line.request_id.startsWith('load-')) {
        logged.set(line.request_id, line.status as number);
      }
    }

    const answered = sent.filter((s) => s.status !== undefined);
    const failed = sent.filter((s) => s.status === undefined);
    const inFlightAtSignal = sent.filter((s) => s.startedAt < signalledAt && s.endedAt > signalledAt);
    const figures = {
      requests: sent.length,
      answered: answered.length,
      answered_after_signal: answered.filter((s) => s.endedAt > signalledAt).length,
      in_flight_at_signal: inFlightAtSignal.length,
      held_across_signal: heldResponses.map((res) => res.status),
      failed_unaccepted: failed.length,
      failure_kinds: [...new Set(failed.map((s) => s.error))],
      exit: exitOf(exit),
      exited_after_ms: Math.round(exitedAfterMs),
    };
    console.log(`shutdown under load: ${JSON.stringify(figures)}`);

    assert.deepEqual(exitOf(exit), { code: 0, signal: null });
    for (const res of heldResponses) {
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json().received, JSON.parse(SLOW_BODY));
    }
    assert.ok(exitedAfterMs < SHUTDOWN_TIMEOUT_MS, `exited ${exitedAfterMs} ms after SIGTERM`);
    assert.ok(inFlightAtSignal.length >= CONNECTIONS / 2, 'the signal came in the middle of the load');
    for (const s of answered) {
      // Readiness is 503 from the moment draining begins: so may a /readyz be that is answered after the signal.
      const draining = MIX[s.index]?.path === '/readyz' && s.endedAt > signalledAt && s.status === 503;
      const expected = draining ? 503 : MIX[s.index]?.status;
      assert.equal(s.status, expected, `${s.id} got ${s.status}, not ${expected}`);
      assert.equal(logged.get(s.id), s.status, `${s.id} was answered ${s.status} and logged as ${logged.get(s.id)}`);
    }
    // What the server logged, it answered: nothing it accepted was lost.
    assert.equal(logged.size, answered.length, 'every logged request was answered');
    for (const s of failed) assert.ok(!logged.has(s.id), `${s.id} failed with ${s.error}, yet the server logged it`);
    // Each connection ends with one failed request: the one sent after the server let it go.
    assert.ok(failed.length <= CONNECTIONS);
  });
});
