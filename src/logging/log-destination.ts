import { closeSync, constants, fstatSync, openSync, readlinkSync, write, writeSync } from 'node:fs';
import { Socket } from 'node:net';
import { isatty } from 'node:tty';

/** Standard output for log lines, written asynchronously: see `logDestination`. */
export interface LogDestination {
  /** What pino writes each line to. */
  readonly stream: { write(line: string): void };
  /** The lines dropped since the start, for `/metrics`. */
  droppedLines(): number;
  /** Calls `report` with the lines dropped since it last did, each time standard output has taken all that waited. */
  reportDropsWith(report: (dropped: number) => void): void;
  /** Writes what is buffered now, as far as standard output takes it at once: for an exit that cannot wait. */
  flushSync(): void;
  /** Writes what is buffered, then calls `onClosed`. */
  end(onClosed: () => void): void;
}

/** How long a line may wait to be written with the next ones. */
const FLUSH_MS = 10;
/** The bytes of lines written at once, at most (a single longer line is written alone). */
const CHUNK_BYTES = 64 * 1024;
/** The most bytes a UTF-16 code unit takes in UTF-8. */
const MAX_BYTES_PER_UNIT = 3;
/** The most bytes of lines handed over and not yet written: a batch that would go beyond is dropped. */
export const MAX_PENDING_BYTES = 4 * 1024 * 1024;
const NEWLINE = 0x0a;
/** How soon a terminal that took bytes, then no more, is written again: it is being read. */
const TERMINAL_READ_RETRY_MS = 1;
/** How long a terminal that took nothing is left before it is written again. */
const TERMINAL_STALLED_RETRY_MS = 20;

/** Where the batches go, telling as they leave. */
interface Sink {
  write(bytes: Buffer): void;
  flushSync(): void;
  end(onClosed: () => void): void;
}

interface SinkEvents {
  written(bytes: number): void;
  failed(): void;
}

/**
 * A pipe or a socket, written by libuv without blocking as its reader takes the bytes: a reader
 * that never reads holds no thread of the pool, which an exit would wait for forever. (libuv makes
 * the descriptor non-blocking, as Node does for `process.stdout` on a pipe.) A terminal, which a
 * socket cannot take, has `terminalSink`.
 */
function streamSink(fd: number, { written, failed }: SinkEvents): Sink {
  const socket = new Socket({ fd, readable: false, writable: true });
  socket.on('error', failed);
  return {
    write: (bytes) => {
      socket.write(bytes, (error) => {
        if (error === undefined || error === null) written(bytes.length);
      });
    },
    // What the pipe takes at once was written as it was handed over; the rest cannot be waited for.
    flushSync: () => {},
    end: (onClosed) => {
      socket.end(onClosed);
    },
  };
}

/**
 * A terminal, reopened as a file description of its own that never blocks, and written on the
 * event loop as far as it takes the bytes, then again a moment later: a write that waits for a
 * suspended terminal, on the event loop or in the thread pool, would hold the process forever.
 * Undefined where the terminal cannot be reopened so (a system without /proc, a master side).
 */
function terminalSink(fd: number, { written, failed }: SinkEvents): Sink | undefined {
  const link = `/proc/self/fd/${fd}`;
  let own: number;
  try {
    // A pseudo-terminal's master side would open as a new terminal, which no one reads.
    if (readlinkSync(link).endsWith('ptmx')) return undefined;
    own = openSync(link, constants.O_WRONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch {
    return undefined;
  }
  const waiting: Buffer[] = [];
  let writing = false;
  let retry: NodeJS.Timeout | undefined;
  let onWritten: (() => void) | undefined;
  let closed = false;
  /** Writes what waits until the terminal takes no more; the lines logged meanwhile are queued behind. */
  const writeOut = (): void => {
    clearTimeout(retry);
    retry = undefined;
    if (writing) return;
    writing = true;
    let progressed = false;
    try {
      for (let bytes = waiting[0]; bytes !== undefined; bytes = waiting[0]) {
        const taken = takenBy(own, bytes);
        if (taken === undefined) {
          waiting.length = 0;
          failed();
          break;
        }
        if (taken === 0) {
          retry = setTimeout(writeOut, progressed ? TERMINAL_READ_RETRY_MS : TERMINAL_STALLED_RETRY_MS);
          return;
        }
        progressed = true;
        if (taken < bytes.length) waiting[0] = bytes.subarray(taken);
        else waiting.shift();
        written(taken);
      }
      onWritten?.();
    } finally {
      writing = false;
    }
  };
  return {
    write: (bytes) => {
      // Its descriptor closed, its number may be another file's by now.
      if (closed) return failed();
      waiting.push(bytes);
      if (retry === undefined) writeOut();
    },
    flushSync: writeOut,
    end: (onClosed) => {
      onWritten = () => {
        onWritten = undefined;
        closed = true;
        closeSync(own);
        onClosed();
      };
      writeOut();
    },
  };
}

/** The bytes of `bytes` that `fd` takes now: 0 when it takes none, undefined when it cannot be written. */
function takenBy(fd: number, bytes: Buffer): number | undefined {
  try {
    return writeSync(fd, bytes);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EAGAIN' ? 0 : undefined;
  }
}

/**
 * A file (or a terminal that cannot be reopened), written in libuv's pool one batch at a time.
 * A write that fails (ENOSPC: the disk is full) ends the writing: what waits is dropped, and
 * nothing is tried again, at an exit least of all, which a write retried until it is taken would
 * hold for ever.
 */
function fileSink(fd: number, { written, failed }: SinkEvents): Sink {
  const waiting: Buffer[] = [];
  /** Whether `waiting[0]` is being written by the pool. */
  let inPool = false;
  let stopped = false;
  let onWritten: (() => void) | undefined;
  const fail = (): void => {
    stopped = true;
    waiting.length = 0;
    failed();
  };
  const next = (): void => {
    const bytes = waiting[0];
    if (bytes === undefined) {
      onWritten?.();
      return;
    }
    inPool = true;
    write(fd, bytes, (error, taken) => {
      inPool = false;
      // A write refused meanwhile (by flushSync) stopped the writing, this batch's rest with it.
      if (error !== null || stopped) fail();
      else {
        if (taken < bytes.length) waiting[0] = bytes.subarray(taken);
        else waiting.shift();
        written(taken);
      }
      // What `written` logged may have started the next write already.
      if (!inPool) next();
    });
  };
  return {
    write: (bytes) => {
      waiting.push(bytes);
      if (!inPool) next();
    },
    // The batch in the pool stays the pool's; those behind it are written now.
    flushSync: () => {
      for (const bytes of waiting.splice(inPool ? 1 : 0)) {
        try {
          for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at);
        } catch {
          fail();
          return;
        }
        written(bytes.length);
      }
    },
    end: (onClosed) => {
      onWritten = () => {
        onWritten = undefined;
        onClosed();
      };
      if (!inPool) next();
    },
  };
}

/** The lines in `bytes`: each ends with a newline. */
function countLines(bytes: Buffer): number {
  let lines = 0;
  for (let at = bytes.indexOf(NEWLINE); at !== -1; at = bytes.indexOf(NEWLINE, at + 1)) lines++;
  return lines;
}

/**
 * Log lines go to standard output asynchronously, in batches: each line is encoded as it comes into
 * a buffer of lines, which is handed over at most 10 ms after its first line (or once full), so
 * that under load one system call carries hundreds of lines, where a write per line or per turn of
 * the event loop cost as much as the rest of the request's logging. A line's text is garbage as
 * soon as it is encoded: lines kept as text for those 10 ms outlived the young generation's
 * collections and made V8 grow it. Every line, pino's own included, takes this way, so lines leave
 * in the order they were written; an exit writes what waits first (`flushSync`, `end`).
 *
 * What is handed over and not yet written is bounded by `MAX_PENDING_BYTES`: a batch that does not
 * fit is dropped and its lines counted, so a reader that stalls costs lines, never memory. A pipe
 * or socket (`streamSink`) and a terminal (`terminalSink`) are written without blocking; a file
 * (`fileSink`) in libuv's pool, until a write fails (a full disk), after which all is dropped.
 */
export function logDestination(fd = 1): LogDestination {
  let pending = 0;
  let dropped = 0;
  let unreported = 0;
  let broken = false;
  let report: ((dropped: number) => void) | undefined;
  const events: SinkEvents = {
    written: (bytes) => {
      pending -= bytes;
      if (pending > 0 || unreported === 0 || report === undefined) return;
      const count = unreported;
      unreported = 0;
      report(count);
    },
    failed: () => {
      broken = true;
    },
  };
  const stat = fstatSync(fd);
  const sink =
    stat.isFIFO() || stat.isSocket()
      ? streamSink(fd, events)
      : ((isatty(fd) ? terminalSink(fd, events) : undefined) ?? fileSink(fd, events));
  let chunk = Buffer.allocUnsafeSlow(CHUNK_BYTES);
  let used = 0;
  let timer: NodeJS.Timeout | undefined;
  /** Hands `bytes` over, unless they do not fit: then drops them, and says whether it did. */
  const send = (bytes: Buffer): boolean => {
    if (broken || pending + bytes.length > MAX_PENDING_BYTES) {
      const lines = countLines(bytes);
      dropped += lines;
      unreported += lines;
      return false;
    }
    pending += bytes.length;
    sink.write(bytes);
    return true;
  };
  const hand = (): void => {
    clearTimeout(timer);
    timer = undefined;
    if (used === 0) return;
    // A dropped batch's buffer is written over by the next lines.
    if (send(chunk.subarray(0, used))) chunk = Buffer.allocUnsafeSlow(CHUNK_BYTES);
    used = 0;
  };
  return {
    stream: {
      write: (line) => {
        const most = line.length * MAX_BYTES_PER_UNIT;
        if (used + most > CHUNK_BYTES) hand();
        if (most > CHUNK_BYTES) {
          send(Buffer.from(line));
          return;
        }
        used += chunk.write(line, used);
        timer ??= setTimeout(hand, FLUSH_MS).unref();
      },
    },
    droppedLines: () => dropped,
    reportDropsWith: (reporter) => {
      report = reporter;
    },
    flushSync: () => {
      hand();
      sink.flushSync();
    },
    end: (onClosed) => {
      hand();
      sink.end(onClosed);
    },
  };
}
