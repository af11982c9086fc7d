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

/**
 * Log lines go to standard output asynchronously, each turn of the event loop's lines together:
 * they are joined as they come and handed to pino's SonicBoom once, as bytes, when the turn is
 * done (`setImmediate`), so that under load one system call and one encoding carry dozens of lines,
 * and no line waits longer than the turn that wrote it. Every line, pino's own included, takes
 * this way, so lines leave in the order they were written.
 */
export function logDestination(fd = 1): LogDestination {
  const boom = destination({ dest: fd, sync: false, contentMode: 'buffer' });
  let pending = '';
  let scheduled = false;
  const hand = (): void => {
    scheduled = false;
    if (pending === '') return;
    // SonicBoom's types know only strings; in buffer mode it takes, and wants, bytes.
    boom.write(Buffer.from(pending) as unknown as string);
    pending = '';
  };
  return {
    stream: {
      write: (line) => {
        pending += line;
        if (scheduled) return;
        scheduled = true;
        setImmediate(hand);
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
