import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildApp } from '../../src/app.js';
import { MemoryProfileStore } from '../../src/stores/memory-profile.js';
import type { ProfileStore } from '../../src/stores/profile.js';
import { testConfig } from '../helpers.js';
import { connectTo, holdEchoRequest, ResponseReader, SLOW_BODY } from '../raw-http.js';

const REQUEST = 'GET /api/hello HTTP/1.1\r\nHost: service\r\n\r\n';

/**
 * A connection, and everything it receives: kept alive after one answer (`used`), or as a load
 * balancer opens one ahead of need, nothing sent yet.
 */
async function openConnection(
  port: number,
  used: boolean,
): Promise<{ socket: Socket; received: () => string; error: () => string }> {
  const socket = connect(port, '127.0.0.1');
  let received = '';
  let error = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    received += chunk;
  });
  socket.on('error', (e: NodeJS.ErrnoException) => {
    error = e.code ?? e.message;
  });
  await once(socket, 'connect');
  if (used) {
    socket.write(REQUEST);
    while (!received.includes('"Hello, World!"')) await once(socket, 'data');
  }
  return { socket, received: () => received, error: () => error };
}

describe('draining (shutdown plugin)', () => {
  it('answers the requests already on their way on idle connections when the shutdown begins, rather than reset them', async () => {
    const app = await buildApp(testConfig({ logLevel: 'silent' }));
    await app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.server.address() as { port: number };
    const connections = await Promise.all(Array.from({ length: 10 }, (_, i) => openConnection(port, i < 7)));

    // In one step, so the service cannot read them first: a request on each connection (in the
    // kernel's buffers as soon as written, over loopback), then the shutdown, as a load balancer
    // reusing its connections meets a SIGTERM.
    for (const { socket } of connections) socket.write(REQUEST);
    const closed = app.close();

    await Promise.all(connections.map(({ socket }) => new Promise((resolve) => socket.once('close', resolve))));
    await closed;
    for (const [i, { received, error }] of connections.entries()) {
      assert.equal(error(), '', `connection ${i} was not reset`);
      const answers = received().split('HTTP/1.1 200 OK\r\n').slice(1);
      assert.equal(answers.length, i < 7 ? 2 : 1, received());
      if (i < 7) assert.match(answers[0] ?? '', /\r\nConnection: keep-alive\r\n/, received());
      assert.match(answers.at(-1) ?? '', /^Connection: close\r\n[\s\S]*"Hello, World!"/, received());
    }
  });

  it('answers a request read whole and in flight when the shutdown begins with Connection: close, so that no other is sent on its connection', async () => {
    // A store that answers when told: the request waits in its handler across the start of the shutdown.
    const memory = new MemoryProfileStore();
    let answer: (() => void) | undefined;
    const store: ProfileStore = {
      get: () => new Promise((resolve) => (answer = () => resolve(memory.get()))),
      compareAndSet: (version, next) => memory.compareAndSet(version, next),
    };
    const app = await buildApp(testConfig({ logLevel: 'silent' }), { profileStore: store });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.server.address() as { port: number };
    const reader = new ResponseReader(await connectTo(port));
    reader.socket.write(`GET /api/profile HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
    while (answer === undefined) await sleep(5);
    const closed = app.close();
    await sleep(20);
    answer?.();
    const res = await reader.next();
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers.connection, 'close');
    await closed;
    reader.socket.destroy();
  });

  it('answers a request still arriving when the shutdown begins, and one pipelined behind it', async () => {
    const app = await buildApp(testConfig({ logLevel: 'silent' }));
    await app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.server.address() as { port: number };
    const held = await holdEchoRequest(port);
    const closed = app.close();
    await sleep(20);
    held.socket.write(`${held.rest}GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
    const echo = await held.reader.next();
    assert.equal(echo.status, 200, echo.text);
    assert.deepEqual(echo.json().received, JSON.parse(SLOW_BODY));
    assert.equal((await held.reader.next()).status, 200);
    await closed;
    held.socket.destroy();
  });
});
