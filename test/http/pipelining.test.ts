import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { PIPELINED_MAX } from '../../src/http/pipelining.js';
import { type ListeningApp, listening } from '../helpers.js';
import { connectTo, ResponseReader } from '../raw-http.js';
import { killAllServers, rssMiB, startServer } from '../server-process.js';

/**
 * Pipelined HTTP/1.1 requests: served one at a time per connection, in order, and a connection
 * that has more read than it may wait with is closed; against the built server with the heap
 * of the Kubernetes recipe, clients that pipeline and never read leave it alive and its memory flat.
 */

const get = (path: string, id: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${id}\r\n\r\n`;

for (const http2 of [false, true]) {
  describe(`pipelined requests${http2 ? ' (HTTP2=true)' : ''}`, () => {
    let server: ListeningApp;
    const events: string[] = [];
    before(async () => {
      server = await listening({ http2 }, (app) => {
        app.get('/slow', async () => {
          events.push('slow started');
          await sleep(200);
          events.push('slow answered');
          return { slow: true };
        });
        app.get('/quick', async () => {
          events.push('quick started');
          return { quick: true };
        });
      });
    });
    after(() => server.app.close());

    it('starts a request only once the one before it on the connection is answered', async () => {
      events.length = 0;
      const reader = new ResponseReader(await connectTo(server.port));
      reader.socket.write(get('/slow', 's') + get('/quick', 'q'));
      assert.equal((await reader.next()).text, '{"slow":true}');
      assert.equal((await reader.next()).text, '{"quick":true}');
      assert.deepEqual(events, ['slow started', 'slow answered', 'quick started']);
      reader.socket.destroy();
    });

    it(`answers ${PIPELINED_MAX + 1} requests sent in one write, in order`, async () => {
      const reader = new ResponseReader(await connectTo(server.port));
      const ids = Array.from({ length: PIPELINED_MAX + 1 }, (_, i) => `p-${i}`);
      reader.socket.write(ids.map((id) => get('/api/hello', id)).join(''));
      for (const id of ids) {
        const res = await reader.next();
        assert.equal(res.status, 200);
        assert.equal(res.headers['x-request-id'], id);
      }
      reader.socket.destroy();
    });

    it(`closes a connection with more than ${PIPELINED_MAX} requests waiting behind the one served, once`, async () => {
      const from = server.logs.lines.length;
      const reader = new ResponseReader(await connectTo(server.port));
      const ids = Array.from({ length: PIPELINED_MAX + 100 }, (_, i) => `c-${i}`);
      reader.socket.write(ids.map((id) => get('/slow', id)).join(''));
      await reader.closed(5_000).catch(() => {}); // a first answer may come before the close
      assert.ok(reader.ended, 'the connection is closed');
      const closes = server.logs.lines
        .slice(from)
        .filter((line) => line.msg === 'connection closed: too many pipelined requests');
      assert.equal(closes.length, 1, JSON.stringify(closes));
      assert.equal(closes[0]?.waiting, PIPELINED_MAX);
      // The next connection is served as usual.
      const res = await request(`${server.origin}/api/hello`, { reset: true });
      assert.equal(res.statusCode, 200);
      await res.body.dump();
    });
  });
}

describe('clients that pipeline and never read, against the built server with a 128 MiB heap', () => {
  after(() => killAllServers());

  it('stays up, its memory flat, and closes their connections', { timeout: 60_000 }, async () => {
    const server = await startServer({}, [], { nodeArgs: ['--max-old-space-size=128'] });
    const pid = server.child.pid as number;
    const startMiB = await rssMiB(pid);
    const batch = Buffer.from(get('/metrics', 'm').repeat(50));
    let connections = 0;
    let stop = false;
    // Each client writes 50 requests at a time and never reads; closed, it connects again.
    const attack = async () => {
      while (!stop) {
        const socket: Socket = await connectTo(server.port);
        connections++;
        socket.pause();
        socket.on('error', () => {});
        await new Promise<void>((resolve) => {
          const write = () => {
            while (!stop && !socket.destroyed && socket.write(batch));
            if (stop || socket.destroyed) resolve();
          };
          socket.on('drain', write);
          socket.on('close', () => resolve());
          write();
        });
        socket.destroy();
      }
    };
    let peakMiB = startMiB;
    const sampler = setInterval(() => {
      rssMiB(pid).then(
        (mib) => {
          peakMiB = Math.max(peakMiB, mib);
        },
        () => {},
      );
    }, 100);
    const attackers = [attack(), attack()];
    await sleep(8_000);
    stop = true;
    clearInterval(sampler);
    await Promise.all(attackers);
    const state = `RSS ${startMiB.toFixed(1)} MiB at start, peak ${peakMiB.toFixed(1)} MiB; ${connections} connections\nstderr:\n${server.stderr().slice(-2000)}`;
    assert.equal(server.child.exitCode, null, `the process is up: ${state}`);
    assert.ok(peakMiB - startMiB < 100, state);
    assert.ok(connections > 2, `the server closed the attackers' connections: ${state}`);
    const res = await request(`http://127.0.0.1:${server.port}/healthz`, { reset: true });
    assert.equal(res.statusCode, 200);
    await res.body.dump();
    console.log(`# pipelining attack: ${state.split('\n')[0]}`);
    server.kill();
  });
});
