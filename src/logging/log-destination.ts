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
 * Log lines go to standard output asynchronously: under load many lines leave in one system call
 * instead of one blocking write each. Each line is encoded once, into bytes, as it is logged.
 * Handed strings, pino's SonicBoom would append each line to one growing string and measure that
 * whole string's UTF-8 length again for every line, and convert it once more to write it; under load,
 * with hundreds of lines waiting for a write, that cost about as much as the rest of the logging.
 */
export function logDestination(fd = 1): LogDestination {
  const boom = destination({ dest: fd, sync: false, contentMode: 'buffer' });
  return {
    // SonicBoom's types know only strings; in buffer mode it takes, and wants, bytes.
    stream: { write: (line) => boom.write(Buffer.from(line) as unknown as string) },
    flushSync: () => boom.flushSync(),
    end: (onClosed) => {
      boom.once('close', onClosed);
      boom.end();
    },
  };
}
