import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { sendQueues, sendQueuesReadable, tableAddress } from '../../src/lib/tcp-send-queues.js';

describe('the kernel send queues', () => {
  it('writes an address and port as /proc/net/tcp and tcp6 do (little-endian words)', () => {
    assert.equal(tableAddress('127.0.0.1', 8080), '0100007F:1F90');
    assert.equal(tableAddress('::1', 443), '00000000000000000000000001000000:01BB');
    assert.equal(tableAddress('::ffff:127.0.0.1', 1), '0000000000000000FFFF00000100007F:0001');
    assert.equal(tableAddress('not an address', 1), '');
  });

  it('finds what a connection whose client does not read holds in the kernel', {
    skip: !sendQueuesReadable && 'Linux only',
  }, async () => {
    let accepted: Socket | undefined;
    const server = createServer((socket) => {
      accepted = socket;
      socket.write(Buffer.alloc(4 * 1024 * 1024));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as { port: number };
    const client = connect(port, '127.0.0.1');
    client.pause();
    await once(client, 'connect');
    await sleep(200);
    const queues = await sendQueues(port);
    const key = tableAddress(client.localAddress as string, client.localPort as number);
    const queued = queues.get(key) ?? 0;
    assert.ok(queued > 64 * 1024, `${queued} bytes in the send queue of ${key}: ${JSON.stringify([...queues])}`);
    client.destroy();
    accepted?.destroy();
    server.close();
  });
});
