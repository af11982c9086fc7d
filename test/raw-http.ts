import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { connectLocal } from './helpers.js';

// Raw HTTP/1.1 over a socket, for requests held half-sent, pipelining and hostile clients.

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: a JSON body, whose shape each assertion checks
  json(): any;
}

/** Reads the responses arriving on a socket, in order; only Content-Length bodies (all this service sends). */
export class ResponseReader {
  private buffer = Buffer.alloc(0);
  private wake: (() => void) | undefined;
  /** The connection is closed (by either side); `closedAt` is when, as performance.now(). */
  ended = false;
  closedAt: number | undefined;
  error: Error | undefined;

  constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.wake?.();
    });
    socket.on('error', (error) => {
      this.error = error;
    });
    socket.on('close', () => {
      this.ended = true;
      this.closedAt = performance.now();
      this.wake?.();
    });
  }

  private parse(): RawResponse | undefined {
    const end = this.buffer.indexOf('\r\n\r\n');
    if (end === -1) return undefined;
    const [statusLine = '', ...headerLines] = this.buffer.subarray(0, end).toString('latin1').split('\r\n');
    const match = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine);
    if (match === null) throw new Error(`not an HTTP/1.1 status line: ${JSON.stringify(statusLine)}`);
    const status = Number(match[1]);
    const headers: Record<string, string> = {};
    for (const line of headerLines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    let length = 0;
    // 1xx, 204 and 304 have no body (RFC 9112, 6.3).
    if (status >= 200 && status !== 204 && status !== 304) {
      const declared = headers['content-length'];
      if (declared === undefined) throw new Error(`a response without Content-Length: ${statusLine}`);
      length = Number(declared);
    }
    if (this.buffer.length < end + 4 + length) return undefined;
    const text = this.buffer.subarray(end + 4, end + 4 + length).toString('utf8');
    this.buffer = this.buffer.subarray(end + 4 + length);
    return { status, headers, text, json: () => JSON.parse(text) };
  }

  /** Resolves when more bytes arrive or the connection closes, or at `deadline` (a performance.now() time). */
  private async moreBy(deadline: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, deadline - performance.now());
      this.wake = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
    });
  }

  /** The next response, interim (1xx) ones included. */
  async next(timeoutMs = 10_000): Promise<RawResponse> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const response = this.parse();
      if (response !== undefined) return response;
      if (this.ended) {
        throw new Error(
          `the server closed the connection before a complete response${this.error ? ` (${this.error.message})` : ''}; ` +
            `unread bytes: ${JSON.stringify(this.buffer.toString('latin1'))}`,
        );
      }
      if (performance.now() >= deadline) throw new Error(`no complete response within ${timeoutMs} ms`);
      await this.moreBy(deadline);
    }
  }

  /** Resolves once the connection is closed with nothing more sent; fails if more comes, or if it is still open after `timeoutMs`. */
  async closed(timeoutMs = 10_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (!this.ended && this.buffer.length === 0) {
      if (performance.now() >= deadline) throw new Error(`the connection is still open after ${timeoutMs} ms`);
      await this.moreBy(deadline);
    }
    assert.equal(this.buffer.toString('latin1'), '', 'nothing more is sent');
  }
}

export function connectTo(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

/**
 * Opens a connection (over TLS with `tls`) and writes `head` at once, then one byte of `dribble`
 * every `everyMs`, until the server ends the connection. Resolves with what the server sent and when it ended.
 */
export function slowClient(
  port: number,
  head: string,
  dribble: string,
  everyMs: number,
  tls = false,
): Promise<{ response: string; elapsedMs: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    let response = '';
    let sent = 0;
    let timer: NodeJS.Timeout | undefined;
    // The dribble starts once the head is written: a timer started before the connection is
    // up could put a byte of it ahead of the head on a busy machine.
    const socket = connectLocal(port, tls, () => {
      socket.write(head);
      timer = setInterval(() => {
        if (sent < dribble.length && socket.writable) socket.write(dribble[sent++] ?? '');
      }, everyMs);
    });
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      response += chunk;
    });
    socket.on('close', () => {
      clearInterval(timer);
      resolve({ response, elapsedMs: Date.now() - started });
    });
    // Writing to a connection the server has just closed fails; the close that follows resolves.
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE' && error.code !== 'ECONNRESET') reject(error);
    });
  });
}

/**
 * Sends header lines as fast as the connection takes them, never ending the header block, until
 * the server closes the connection (or twice the limit is out, then waits). Resolves with
 * what the server sent and when it closed.
 */
export function headerFlood(port: number, limitBytes: number): Promise<{ response: string; elapsedMs: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let response = '';
    let sentBytes = 0;
    const line = `X-Flood: ${'f'.repeat(1000)}\r\n`;
    const socket = connect(port, '127.0.0.1', () => {
      const flood = () => {
        while (socket.writable && sentBytes < 2 * limitBytes) {
          sentBytes += line.length;
          if (!socket.write(sentBytes === line.length ? `GET /api/hello HTTP/1.1\r\n${line}` : line)) {
            socket.once('drain', flood);
            return;
          }
        }
      };
      flood();
    });
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      response += chunk;
    });
    socket.on('close', () => resolve({ response, elapsedMs: performance.now() - started }));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE' && error.code !== 'ECONNRESET') reject(error);
    });
  });
}

export const SLOW_BODY = '{"slow":true}';
const SENT_FIRST = 4;

export interface HeldRequest {
  socket: Socket;
  reader: ResponseReader;
  /** The part of the body not sent yet. */
  rest: string;
}

/**
 * Starts POST /api/echo on a new connection and sends only the first bytes of its body, so
 * the request stays in flight until the rest is written. `Expect: 100-continue` makes the
 * server answer `100 Continue` once it has read the headers and dispatched the request, so
 * the test knows the request is in flight before it signals the process, without sleeping.
 */
export async function holdEchoRequest(port: number): Promise<HeldRequest> {
  const socket = await connectTo(port);
  const reader = new ResponseReader(socket);
  socket.write(
    'POST /api/echo HTTP/1.1\r\n' +
      `Host: 127.0.0.1:${port}\r\n` +
      'Content-Type: application/json\r\n' +
      `Content-Length: ${Buffer.byteLength(SLOW_BODY)}\r\n` +
      'Expect: 100-continue\r\n' +
      '\r\n' +
      SLOW_BODY.slice(0, SENT_FIRST),
  );
  const interim = await reader.next();
  assert.equal(interim.status, 100, 'the server has read the headers');
  return { socket, reader, rest: SLOW_BODY.slice(SENT_FIRST) };
}
