import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';

/**
 * HTTP/2 frames as bytes (RFC 9113), for clients that misbehave on purpose: frames in orders and
 * numbers no client library sends. Header blocks are HPACK literals without indexing or Huffman
 * coding (RFC 7541, 6.2.2), which every decoder reads; what the server sends back is read frame by
 * frame, its header blocks left undecoded.
 */

export const PREFACE = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n';

export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

export const Flag = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 } as const;

/** Error codes of RST_STREAM and GOAWAY (RFC 9113, 7). */
export const ErrorCode = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  ENHANCE_YOUR_CALM: 0xb,
} as const;

/** SETTINGS parameters (RFC 9113, 6.5.2). */
export const Setting = {
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_HEADER_LIST_SIZE: 0x6,
} as const;

export function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head.writeUInt8(type, 3);
  head.writeUInt8(flags, 4);
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** An HPACK integer with an N-bit prefix (RFC 7541, 5.1). */
function hpackInteger(value: number, prefixBits: number, firstByte = 0): Buffer {
  const max = (1 << prefixBits) - 1;
  if (value < max) return Buffer.from([firstByte | value]);
  const bytes = [firstByte | max];
  let rest = value - max;
  while (rest >= 128) {
    bytes.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}

function hpackString(text: string): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  return Buffer.concat([hpackInteger(bytes.length, 7), bytes]);
}

/** A header block of literal fields without indexing, new names. */
export function headerBlock(fields: readonly (readonly [string, string])[]): Buffer {
  return Buffer.concat(fields.flatMap(([name, value]) => [Buffer.from([0]), hpackString(name), hpackString(value)]));
}

/** The fields of a request to `path` on 127.0.0.1. */
export function requestFields(
  path: string,
  method = 'GET',
  extra: readonly (readonly [string, string])[] = [],
): (readonly [string, string])[] {
  return [[':method', method], [':scheme', 'http'], [':authority', '127.0.0.1'], [':path', path], ...extra];
}

export function headersFrame(
  streamId: number,
  fields: readonly (readonly [string, string])[],
  endStream = true,
): Buffer {
  return frame(FrameType.HEADERS, Flag.END_HEADERS | (endStream ? Flag.END_STREAM : 0), streamId, headerBlock(fields));
}

export function settingsFrame(settings: readonly (readonly [number, number])[] = []): Buffer {
  const payload = Buffer.alloc(6 * settings.length);
  settings.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, 6 * i);
    payload.writeUInt32BE(value, 6 * i + 2);
  });
  return frame(FrameType.SETTINGS, 0, 0, payload);
}

export const settingsAck = (): Buffer => frame(FrameType.SETTINGS, Flag.ACK, 0);

export function pingFrame(data = 0): Buffer {
  const payload = Buffer.alloc(8);
  payload.writeUInt32BE(data >>> 0, 4);
  return frame(FrameType.PING, 0, 0, payload);
}

export function rstStreamFrame(streamId: number, code: number = ErrorCode.CANCEL): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(code);
  return frame(FrameType.RST_STREAM, 0, streamId, payload);
}

export function windowUpdateFrame(streamId: number, increment: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(increment);
  return frame(FrameType.WINDOW_UPDATE, 0, streamId, payload);
}

export interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

export interface Goaway {
  lastStreamId: number;
  errorCode: number;
}

/** The last stream id and the error code of a GOAWAY frame. */
export function goawayOf(received: Frame): Goaway {
  return { lastStreamId: received.payload.readUInt32BE(0) & 0x7fffffff, errorCode: received.payload.readUInt32BE(4) };
}

/** The parameters of a SETTINGS frame, by id. */
export function settingsOf(received: Frame): Map<number, number> {
  const values = new Map<number, number>();
  for (let at = 0; at + 6 <= received.payload.length; at += 6) {
    values.set(received.payload.readUInt16BE(at), received.payload.readUInt32BE(at + 2));
  }
  return values;
}

/**
 * A raw HTTP/2 connection: what is written goes out as it is, and what the server sends is read as
 * frames. `read: false` leaves what the server sends unread in the socket, as a client that never
 * reads does.
 */
export class RawH2 {
  readonly frames: Frame[] = [];
  /** performance.now() when the connection closed, or undefined while it is open. */
  closedAt: number | undefined;
  #buffer: Buffer = Buffer.alloc(0);
  #waiters = new Set<() => void>();

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
      while (this.#buffer.length >= 9) {
        const length = this.#buffer.readUIntBE(0, 3);
        if (this.#buffer.length < 9 + length) break;
        this.frames.push({
          type: this.#buffer.readUInt8(3),
          flags: this.#buffer.readUInt8(4),
          streamId: this.#buffer.readUInt32BE(5) & 0x7fffffff,
          payload: this.#buffer.subarray(9, 9 + length),
        });
        this.#buffer = this.#buffer.subarray(9 + length);
      }
      this.#wake();
    });
    // A server that closes on a flood makes the client's next writes fail: that is the close.
    socket.on('error', () => {});
    socket.on('close', () => {
      this.closedAt = performance.now();
      this.#wake();
    });
  }

  /** Connects, and sends the preface and `settings` unless `preface` is false. */
  static open(
    port: number,
    {
      preface = true,
      settings = [],
      read = true,
    }: { preface?: boolean; settings?: [number, number][]; read?: boolean } = {},
  ): Promise<RawH2> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.off('error', reject);
        const raw = new RawH2(socket);
        if (!read) socket.pause();
        if (preface) socket.write(Buffer.concat([Buffer.from(PREFACE, 'latin1'), settingsFrame(settings)]));
        resolve(raw);
      });
      socket.once('error', reject);
    });
  }

  #wake(): void {
    for (const wake of this.#waiters) wake();
  }

  get closed(): boolean {
    return this.closedAt !== undefined;
  }

  /**
   * Writes `bytes`, resolving once the socket has taken them: false if the connection is gone, or
   * if the server has not read them within `timeoutMs` (a server that stops reading a client).
   */
  write(bytes: Buffer, timeoutMs = 10_000): Promise<boolean> {
    if (this.socket.destroyed || !this.socket.writable) return Promise.resolve(false);
    return new Promise((resolve) => {
      if (this.socket.write(bytes)) resolve(true);
      else {
        const done = () => {
          clearTimeout(timer);
          this.socket.off('drain', done);
          this.socket.off('close', done);
          resolve(!this.socket.destroyed && this.socket.writableLength === 0);
        };
        const timer = setTimeout(done, timeoutMs);
        this.socket.once('drain', done);
        this.socket.once('close', done);
      }
    });
  }

  /** The first frame received that matches, waiting up to `timeoutMs`; undefined if none came. */
  async waitFor(match: (received: Frame) => boolean, timeoutMs = 10_000): Promise<Frame | undefined> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const found = this.frames.find(match);
      if (found !== undefined || this.closed || performance.now() >= deadline) return found;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.#waiters.delete(done);
          resolve();
        };
        const timer = setTimeout(done, Math.max(0, deadline - performance.now()));
        this.#waiters.add(done);
      });
    }
  }

  /** The GOAWAY received, waiting up to `timeoutMs`. */
  async goaway(timeoutMs = 10_000): Promise<Goaway | undefined> {
    const received = await this.waitFor((f) => f.type === FrameType.GOAWAY, timeoutMs);
    return received === undefined ? undefined : goawayOf(received);
  }

  /** Resolves once the server has closed the connection, or after `timeoutMs` (false then). */
  async untilClosed(timeoutMs = 10_000): Promise<boolean> {
    await this.waitFor(() => false, timeoutMs);
    return this.closed;
  }

  destroy(): void {
    this.socket.destroy();
  }
}
