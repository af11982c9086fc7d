import { createHash, randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Http, Response } from './http.js';

/**
 * The least of a WebSocket client (RFC 6455) the kit needs to check the echo: a handshake written
 * as it is, masked frames sent, whole frames read back. The kit depends on no WebSocket library.
 */

/** RFC 6455 (1.3): what the key is joined with to make Sec-WebSocket-Accept. */
const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

export const TEXT = 0x1;
export const BINARY = 0x2;
export const CLOSE = 0x8;

export interface Frame {
  opcode: number;
  payload: Buffer;
}

/** The Sec-WebSocket-Accept a server must answer `key` with. */
export function acceptOf(key: string): string {
  return createHash('sha1')
    .update(key + GUID)
    .digest('base64');
}

/** A new Sec-WebSocket-Key: 16 random bytes in base64. */
export function newKey(): string {
  return randomBytes(16).toString('base64');
}

/** A whole frame from the client: masked, as RFC 6455 (5.3) requires. */
export function clientFrame(opcode: number, payload: Buffer): Buffer {
  const length = payload.length;
  const head = length < 126 ? Buffer.alloc(2) : length < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  head[0] = 0x80 | opcode;
  if (length < 126) head[1] = 0x80 | length;
  else if (length < 65536) {
    head[1] = 0x80 | 126;
    head.writeUInt16BE(length, 2);
  } else {
    head[1] = 0x80 | 127;
    head.writeBigUInt64BE(BigInt(length), 2);
  }
  const mask = randomBytes(4);
  const masked = Buffer.from(payload);
  for (let i = 0; i < masked.length; i++) masked[i] = (masked[i] as number) ^ (mask[i % 4] as number);
  return Buffer.concat([head, mask, masked]);
}

/** Reads a connection's bytes: first the handshake's answer head, then server frames. */
export class FrameReader {
  #buffer = Buffer.alloc(0);
  #wake: (() => void) | undefined;
  #closed = false;

  constructor(socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.#buffer = Buffer.concat([this.#buffer, chunk]);
      this.#wake?.();
    });
    socket.on('close', () => {
      this.#closed = true;
      this.#wake?.();
    });
    socket.on('error', () => socket.destroy());
  }

  async #more(deadline: number, what: string): Promise<void> {
    if (this.#closed) throw new Error(`the connection closed before ${what}`);
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`no ${what} in time`);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, left);
      this.#wake = () => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
    });
  }

  /** The answer's status line and headers (lower-case names), once they have all come. */
  async head(timeoutMs: number): Promise<{ statusLine: string; headers: Record<string, string> }> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const end = this.#buffer.indexOf('\r\n\r\n');
      if (end >= 0) {
        const [statusLine = '', ...lines] = this.#buffer.subarray(0, end).toString('latin1').split('\r\n');
        this.#buffer = this.#buffer.subarray(end + 4);
        const headers: Record<string, string> = {};
        for (const line of lines) {
          const colon = line.indexOf(':');
          if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
        }
        return { statusLine, headers };
      }
      await this.#more(deadline, 'an answer to the handshake');
    }
  }

  /** The next `length` bytes, or as many as came before the connection closed or the time was up. */
  async bytes(length: number, timeoutMs: number): Promise<Buffer> {
    const deadline = Date.now() + timeoutMs;
    while (this.#buffer.length < length && !this.#closed && Date.now() < deadline) {
      await this.#more(deadline, 'the body').catch(() => {});
    }
    const bytes = this.#buffer.subarray(0, length);
    this.#buffer = this.#buffer.subarray(bytes.length);
    return Buffer.from(bytes);
  }

  /** The next whole frame from the server (unmasked, as a server's frames are). */
  async frame(timeoutMs: number): Promise<Frame> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const frame = this.#parse();
      if (frame !== null) return frame;
      await this.#more(deadline, 'a frame');
    }
  }

  #parse(): Frame | null {
    const b = this.#buffer;
    if (b.length < 2) return null;
    let length = (b[1] as number) & 0x7f;
    let at = 2;
    if (length === 126) {
      if (b.length < 4) return null;
      length = b.readUInt16BE(2);
      at = 4;
    } else if (length === 127) {
      if (b.length < 10) return null;
      length = Number(b.readBigUInt64BE(2));
      at = 10;
    }
    if (b.length < at + length) return null;
    this.#buffer = b.subarray(at + length);
    return { opcode: (b[0] as number) & 0x0f, payload: Buffer.from(b.subarray(at, at + length)) };
  }
}

/** The head of a handshake to `path` under the base URL, `version` as given. */
export function handshakeHead(http: Http, path: string, key: string, version: string): string {
  return (
    `GET ${http.prefix}${path} HTTP/1.1\r\nHost: ${http.origin.host}\r\nUpgrade: websocket\r\n` +
    `Connection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: ${version}\r\n\r\n`
  );
}

/**
 * Opens a WebSocket to `path` under the base URL: writes the handshake (with the fields of every
 * request, `--header`), and reads its answer. An answer other than 101 is read whole, its body by
 * its Content-Length, and noted as every answer is (an injected fault's is counted); the 101 is the
 * WebSocket's, not an HTTP answer the audit of every answer holds to its headers.
 */
export async function openWebSocket(
  http: Http,
  path: string,
  key: string,
  version: string,
  timeoutMs: number,
): Promise<{ socket: Socket; reader: FrameReader; answer: Response; statusLine: string }> {
  const socket = await http.connect();
  const reader = new FrameReader(socket);
  const sentAt = Date.now();
  const target = `${http.prefix}${path}`;
  try {
    socket.write(http.withHeaders(handshakeHead(http, path, key, version)));
    const { statusLine, headers } = await reader.head(timeoutMs);
    const match = /^HTTP\/(1\.[01]) (\d{3})/.exec(statusLine);
    const status = Number(match?.[2] ?? 0);
    const length = Number(headers['content-length'] ?? 0);
    const body = status !== 101 && length > 0 ? await reader.bytes(length, timeoutMs) : Buffer.alloc(0);
    const answer: Response = {
      request: { method: 'GET', path: target, route: path, sentAt },
      httpVersion: match?.[1] ?? '',
      status,
      headers,
      body,
      text: body.toString('utf8'),
    };
    if (status !== 101) http.note(answer);
    return { socket, reader, answer, statusLine };
  } catch (error) {
    socket.destroy();
    throw error;
  }
}
