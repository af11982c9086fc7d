import {
  type ClientHttp2Session,
  type ClientHttp2Stream,
  connect as connectHttp2,
  type SecureClientSessionOptions,
} from 'node:http2';
import { connect, type Socket } from 'node:net';

/** Node's own HTTP/2 client, as the tests use it. */

/** The connection-specific fields HTTP/2 forbids in a message (RFC 9113, 8.2.2). */
export const CONNECTION_SPECIFIC = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade'];

export interface H2Options {
  /** Writes the connection's first bytes (the preface and SETTINGS) one at a time, this many of them. */
  splitFirstBytes?: number;
  /** TLS options, for an https:// origin (the private CA, say). */
  tls?: SecureClientSessionOptions;
}

/** A session to `origin`, resolved once the server's SETTINGS have arrived. */
export function h2(origin: string, { splitFirstBytes = 0, tls = {} }: H2Options = {}): Promise<ClientHttp2Session> {
  const { port, hostname } = new URL(origin);
  const createConnection =
    splitFirstBytes === 0
      ? undefined
      : () => {
          const socket: Socket = connect(Number(port), hostname);
          const write = socket.write.bind(socket) as (chunk: Buffer) => boolean;
          let first = true;
          socket.write = ((chunk: Buffer | string) => {
            if (!first) return write(Buffer.from(chunk));
            first = false;
            const bytes = Buffer.from(chunk);
            // One byte a turn of the event loop, then the rest.
            const pieces = [...Array.from({ length: splitFirstBytes }, (_, i) => bytes.subarray(i, i + 1))];
            pieces.push(bytes.subarray(splitFirstBytes));
            const next = () => {
              const piece = pieces.shift();
              if (piece === undefined) return;
              write(piece);
              setImmediate(next);
            };
            next();
            return true;
          }) as typeof socket.write;
          return socket;
        };
  return new Promise((resolve, reject) => {
    const session = connectHttp2(origin, { ...tls, ...(createConnection !== undefined && { createConnection }) });
    session.once('error', reject);
    session.once('remoteSettings', () => {
      session.off('error', reject);
      // A session the server ends (GOAWAY, a reset connection) is the test's to look at, not an uncaught error.
      session.on('error', () => {});
      resolve(session);
    });
  });
}

export interface StreamAnswer {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  text: string;
  /** The code the stream was closed with: 0 (NO_ERROR) for a stream that ended, or the RST_STREAM's. */
  rstCode: number | undefined;
  // biome-ignore lint/suspicious/noExplicitAny: a JSON body, whose shape each assertion checks
  json(): any;
}

/** The answer on a stream the test opened itself, and the code it was closed with. */
export function readStream(stream: ClientHttp2Stream): Promise<StreamAnswer> {
  return new Promise((resolve, reject) => {
    let status = 0;
    let headers: StreamAnswer['headers'] = {};
    const chunks: Buffer[] = [];
    stream.on('response', ({ ':status': code, ...rest }) => {
      status = Number(code);
      headers = rest as StreamAnswer['headers'];
    });
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('error', (error) => {
      if (status === 0) reject(error);
    });
    stream.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      resolve({ status, headers, text, rstCode: stream.rstCode, json: () => JSON.parse(text) });
    });
    stream.resume();
  });
}
