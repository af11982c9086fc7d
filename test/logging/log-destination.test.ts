import assert from 'node:assert/strict';
import { closeSync, constants, openSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { logDestination, MAX_PENDING_BYTES } from '../../src/logging/log-destination.js';
import { run } from '../run-command.js';

/** A log line of 200 bytes. */
const LINE = `{"msg":"${'x'.repeat(189)}"}\n`;
/** Eight times what may wait to be written. */
const LINES = Math.ceil((8 * MAX_PENDING_BYTES) / LINE.length);

describe('log destination: standard output as a pipe', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'log-destination-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** A FIFO with a reader that reads nothing yet, and a blocking writer, as a shell opens one. */
  async function fifo(name: string): Promise<{ readerFd: number; writerFd: number }> {
    const path = join(dir, name);
    assert.equal((await run('mkfifo', [path])).code, 0);
    const readerFd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    return { readerFd, writerFd: openSync(path, constants.O_WRONLY) };
  }

  it('a reader that stalls: what waits is bounded, the rest dropped and counted, and one report once it reads', {
    timeout: 30_000,
  }, async () => {
    const { readerFd, writerFd } = await fifo('stalled');
    const logs = logDestination(writerFd);
    const reports: number[] = [];
    logs.reportDropsWith((dropped) => reports.push(dropped));
    for (let i = 0; i < LINES; i++) logs.stream.write(LINE);
    logs.flushSync();
    await sleep(100);
    const dropped = logs.droppedLines();
    const kept = LINES - dropped;
    assert.ok(kept * LINE.length <= MAX_PENDING_BYTES, `${kept} lines of ${LINES} kept: more than the bound`);
    assert.ok(kept * LINE.length > MAX_PENDING_BYTES / 2, `${kept} lines of ${LINES} kept: the bound is not used`);
    assert.deepEqual(reports, [], 'no report while the reader stalls');

    const reader = new Socket({ fd: readerFd, readable: true, writable: false });
    const received: Buffer[] = [];
    reader.on('data', (bytes: Buffer) => received.push(bytes));
    const deadline = Date.now() + 20_000;
    while (reports.length === 0 && Date.now() < deadline) await sleep(20);
    assert.deepEqual(reports, [dropped], 'one report, once all that waited was written');
    await sleep(50);
    const text = Buffer.concat(received).toString();
    assert.equal(text.length, kept * LINE.length, 'every line kept is written');
    assert.ok(text === LINE.repeat(kept), 'the lines kept, whole');
    reader.destroy();
    await new Promise<void>((resolve) => logs.end(resolve));
  });

  it('a reader that is gone (EPIPE): every line after is dropped and counted, nothing thrown', async () => {
    const { readerFd, writerFd } = await fifo('gone');
    const logs = logDestination(writerFd);
    closeSync(readerFd);
    for (let i = 0; i < 1000; i++) logs.stream.write(LINE);
    logs.flushSync();
    await sleep(100);
    for (let i = 0; i < 1000; i++) logs.stream.write(LINE);
    logs.flushSync();
    assert.ok(logs.droppedLines() >= 1000, `${logs.droppedLines()} lines dropped`);
    await new Promise<void>((resolve) => logs.end(resolve));
  });
});
