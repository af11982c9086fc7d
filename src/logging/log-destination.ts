import { destination } from 'pino';

/** Standard output for log lines, written asynchronously: see `logDestination`. */
export interface LogDestination {
  /** What pino writes each line to. */
  readonly stream: { write(line: string): void };
  /** Writes what is buffered now, blocking: for an exit that cannot wait. */
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

/**
 * Log lines go to standard output asynchronously, in batches: each line is encoded as it comes into
 * a buffer of lines, which is handed to pino's SonicBoom at most 10 ms after its first line (or
 * once full), so that under load one system call carries hundreds of lines, where a write per line
 * or per turn of the event loop cost as much as the rest of the request's logging. A line's text is
 * garbage as soon as it is encoded: lines kept as text for those 10 ms outlived the young
 * generation's collections and made V8 grow it. Every line, pino's own included, takes this way,
 * so lines leave in the order they were written; an exit writes what waits first (`flushSync`,
 * `end`).
 */
export function logDestination(fd = 1): LogDestination {
  const boom = destination({ dest: fd, sync: false, contentMode: 'buffer' });
  let chunk = Buffer.allocUnsafeSlow(CHUNK_BYTES);
  let used = 0;
  let timer: NodeJS.Timeout | undefined;
  // SonicBoom's types know only strings; in buffer mode it takes, and wants, bytes.
  const send = (bytes: Buffer): void => {
    boom.write(bytes as unknown as string);
  };
  const hand = (): void => {
    clearTimeout(timer);
    timer = undefined;
    if (used === 0) return;
    send(chunk.subarray(0, used));
    chunk = Buffer.allocUnsafeSlow(CHUNK_BYTES);
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
    flushSync: () => {
      hand();
      boom.flushSync();
    },
    end: (onClosed) => {
      hand();
      boom.once('close', onClosed);
      boom.end();
    },
  };
}
