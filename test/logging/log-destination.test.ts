import assert from 'node:assert/strict';
import { closeSync, constants, openSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type LogDestination, logDestination, MAX_PENDING_BYTES } from '../../src/logging/log-destination.js';
import { pseudoTerminal } from '../pseudo-terminal.js';
import { run } from '../run-command.js';

/** A log line of 200 bytes. */
const LINE = `{"msg":"${'x'.repeat(189)}"}\n`;
/** Eight times what may wait to be written. */
const LINES = Math.ceil((8 * MAX_PENDING_BYTES) / LINE.length);

/** An output to log into whose reader reads nothing until `read()`. */
interface StalledOutput {
  writerFd: number;
  read(): void;
  received(): string;
  close(): Promise<void>;
}

describe('log destination: standard output as a pipe or a terminal', () => {
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

  async function stalledPipe(): Promise<StalledOutput> {
    const { readerFd, writerFd } = await fifo('stalled');
    const received: Buffer[] = [];
    let reader: Socket | undefined;
    return {
      writerFd,
      read: () => {
        reader = new Socket({ fd: readerFd, readable: true, writable: false });
        reader.on('data', (bytes: Buffer) => received.push(bytes));
      },
      received: () => Buffer.concat(received).toString(),
      close: async () => {
        if (reader === undefined) closeSync(readerFd);
        else reader.destroy();
      },
    };
  }

  /** A terminal, opened as a shell opens one: blocking. */
  async function stalledTerminal(): Promise<StalledOutput> {
    const terminal = await pseudoTerminal();
    const writerFd = openSync(terminal.path, constants.O_WRONLY | constants.O_NOCTTY);
    return {
      writerFd,
      read: terminal.read,
      received: terminal.received,
      close: async () => {
        closeSync(writerFd);
        await terminal.close();
      },
    };
  }

  for (const [name, stalledOutput] of [
    ['a pipe', stalledPipe],
    ['a terminal', stalledTerminal],
  ] as const) {
    it(`${name} whose reader stalls: what waits is bounded, the rest dropped and counted, and one report once it reads`, {
      timeout: 30_000,
    }, async () => {
      const output = await stalledOutput();
      try {
        const logs = logDestination(output.writerFd);
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

        output.read();
        const deadline = Date.now() + 20_000;
        while (reports.length === 0 && Date.now() < deadline) await sleep(20);
        assert.deepEqual(reports, [dropped], 'one report, once all that waited was written');
        const written = kept * LINE.length;
        while (output.received().length < written && Date.now() < deadline) await sleep(20);
        const text = output.received();
        assert.equal(text.length, written, 'every line kept is written');
        assert.ok(text === LINE.repeat(kept), 'the lines kept, whole');
        await new Promise<void>((resolve) => logs.end(resolve));
      } finally {
        await output.close();
      }
    });
  }

  it("a pseudo-terminal's master side: the lines reach its other side, not a terminal of their own", async () => {
    const module = new URL('../../src/logging/log-destination.ts', import.meta.url).href;
    const writes = `import(${JSON.stringify(module)}).then(({ logDestination }) => { const logs = logDestination(); logs.stream.write(${JSON.stringify(LINE)}); logs.end(() => {}); })`;
    // python3 hands the master side to a process logging one line, then reads the other side.
    const script = [
      'import os, pty, subprocess, sys, tty',
      'm, s = pty.openpty()',
      'tty.setraw(s)',
      'subprocess.run(sys.argv[1:], stdout=m, check=True)',
      'os.set_blocking(s, False)',
      'sys.stdout.buffer.write(os.read(s, 65536))',
    ].join('\n');
    const { code, stdout, stderr } = await run('python3', [
      '-c',
      script,
      process.execPath,
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      writes,
    ]);
    assert.equal(code, 0, stderr);
    assert.equal(stdout, LINE);
  });

  it('a reader that is gone (EPIPE): every line after is dropped and counted, nothing thrown', async () => {
    const { readerFd, writerFd } = await fifo('gone');
    const logs = logDestination(writerFd);
    closeSync(readerFd);
    await assertAllDropped(logs);
  });

  it('a terminal that is gone (EIO): every line after is dropped and counted, nothing thrown', async () => {
    const output = await stalledTerminal();
    const logs = logDestination(output.writerFd);
    await output.close();
    await assertAllDropped(logs);
  });
});

describe('log destination: standard output as a file', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'log-destination-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('every line, whole and in order, by the time end calls back', async () => {
    const path = join(dir, 'log');
    const fd = openSync(path, 'w');
    try {
      const logs = logDestination(fd);
      const lines = Array.from({ length: 20_000 }, (_, i) => `{"n":${i}}\n`);
      for (const [i, line] of lines.entries()) {
        logs.stream.write(line);
        if (i % 5_000 === 0) await sleep(20);
      }
      await new Promise<void>((resolve) => logs.end(resolve));
      assert.equal(logs.droppedLines(), 0);
      assert.ok(readFileSync(path, 'utf8') === lines.join(''), 'the lines as written');
    } finally {
      closeSync(fd);
    }
  });

  it('a full disk (ENOSPC): every line dropped and counted, nothing thrown, and flushSync and end return', async () => {
    const fd = openSync('/dev/full', 'w');
    try {
      await assertAllDropped(logDestination(fd));
    } finally {
      closeSync(fd);
    }
  });
});

/** Logs 2,000 lines in two batches into an output whose reader is gone. */
async function assertAllDropped(logs: LogDestination): Promise<void> {
  for (let i = 0; i < 1000; i++) logs.stream.write(LINE);
  logs.flushSync();
  await sleep(100);
  for (let i = 0; i < 1000; i++) logs.stream.write(LINE);
  logs.flushSync();
  assert.ok(logs.droppedLines() >= 1000, `${logs.droppedLines()} lines dropped`);
  await new Promise<void>((resolve) => logs.end(resolve));
}
