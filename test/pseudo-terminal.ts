import { spawn } from 'node:child_process';
import { once } from 'node:events';

/** A pseudo-terminal held by python3, whose terminal side reads nothing until asked to. */
export interface PseudoTerminal {
  /** The device a process writes to, as to a terminal. */
  path: string;
  /** Starts reading: what was written from now on is in `received()`. */
  read(): void;
  /** The bytes read so far, as text. */
  received(): string;
  close(): Promise<void>;
}

/**
 * Opens a pseudo-terminal in raw mode (its lines as written, no `\r` added) that nobody reads, as a
 * suspended terminal, until `read()`.
 */
export async function pseudoTerminal(): Promise<PseudoTerminal> {
  const script = [
    'import os, pty, sys, tty',
    'm, s = pty.openpty()',
    'tty.setraw(s)',
    'print(os.ttyname(s), flush=True)',
    'sys.stdin.readline()',
    'while True:',
    '    sys.stdout.buffer.write(os.read(m, 65536))',
    '    sys.stdout.flush()',
  ].join('\n');
  const holder = spawn('python3', ['-c', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  // Its first line is the device's path; what follows, the bytes read from the terminal.
  let output = '';
  const path = await new Promise<string>((resolve, reject) => {
    holder.on('error', reject);
    holder.stdout.setEncoding('utf8').on('data', (text: string) => {
      output += text;
      const end = output.indexOf('\n');
      if (end !== -1) resolve(output.slice(0, end));
    });
  });
  return {
    path,
    read: () => holder.stdin.write('\n'),
    received: () => output.slice(path.length + 1),
    close: async () => {
      if (holder.exitCode === null && holder.signalCode === null) {
        holder.kill();
        await once(holder, 'close');
      }
    },
  };
}
