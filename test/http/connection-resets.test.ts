import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { get as getHttp } from 'node:http';
import { get as getHttps } from 'node:https';
import { connect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect as connectTls, type TLSSocket } from 'node:tls';
import { gzipSync } from 'node:zlib';
import {
  Flag,
  FrameType,
  frame,
  headerBlock,
  headersFrame,
  PREFACE,
  requestFields,
  Setting,
  settingsFrame,
} from '../h2-frames.js';
import { killAllServers, type RunningServer, startServer } from '../server-process.js';
import { makeTlsFiles, OPENSSL_MISSING, OPENSSL_SKIP_REASON, type TlsFiles } from '../tls-files.js';

/**
 * A client that resets its connection (TCP RST) at any point of the connection's life leaves the
 * process running: while the server reads the first bytes to tell HTTP/2 from HTTP/1.1 (after each
 * byte of the preface), before and after each answer Node or the service writes by itself (408,
 * 400, 505, 405), on HTTP/1.1, on h2c sessions and streams, during and after a TLS handshake.
 * Every socket handed from one owner to another must have an `error` listener at every moment:
 * one missing, a reset is an uncaught ECONNRESET, which ends the process. Each case is a client of
 * its own, all at once, against the built server with its timeouts shortened.
 */

const HEADERS_TIMEOUT_MS = 1_000;
const REQUEST_TIMEOUT_MS = 1_500;
const KEEP_ALIVE_TIMEOUT_MS = 1_000;
/** Long enough for every timeout above to have fired, and its answer to have been written. */
const AFTER_TIMEOUTS_MS = 5_000;

const PREFACE_BYTES = Buffer.concat([Buffer.from(PREFACE, 'latin1'), settingsFrame()]);
const REQUEST = 'GET /api/hello HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
/** The first bytes of a gzip body: decoding has begun, and waits for the rest. */
const GZIP_START = gzipSync(`{"a":"${'x'.repeat(50_000)}"}`).subarray(0, 40);
/** A request to switch protocols on a route that answers it in HTTP/1.1. */
const UPGRADE = 'GET /api/hello HTTP/1.1\r\nHost: x\r\nUpgrade: foo/1\r\nConnection: upgrade\r\n\r\n';
const WEBSOCKET =
  'GET /api/echo/websocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
  'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n';
/** The head of a POST to the echo, its last line still to come. */
const postEcho = (length: number) =>
  `POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n`;
const gzipPost = (length: number) =>
  `POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: ${length}\r\n\r\n`;

/** A client connection: its TCP socket, which is reset, and what is written and read (TLS over it, or itself). */
interface Connection {
  tcp: Socket;
  stream: Socket | TLSSocket;
  /** Resolves once the server has sent something, or closed, or after `timeoutMs`. */
  answered(timeoutMs?: number): Promise<void>;
  /** Resolves once the server has ended its side, or after `timeoutMs`. */
  ended(timeoutMs?: number): Promise<void>;
}

function until(emitter: Socket, events: string[], timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      for (const event of events) emitter.off(event, done);
      resolve();
    };
    const timer = setTimeout(done, timeoutMs);
    for (const event of events) emitter.once(event, done);
  });
}

/** Connects over TCP, and with `alpn` does the TLS handshake over it, offering those protocols. */
function open(port: number, alpn?: string[]): Promise<Connection> {
  return new Promise((resolve, reject) => {
    // Half open: its side stays open once the server ends its own, so that it can still be reset (Node's
    // resetAndDestroy on a socket it has already ended never completes, and its exit then waits for ever).
    const tcp = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    tcp.on('error', () => {});
    let got = false;
    const connection = (stream: Socket | TLSSocket): Connection => {
      stream.on('data', () => {
        got = true;
      });
      return {
        tcp,
        stream,
        answered: (timeoutMs = AFTER_TIMEOUTS_MS) =>
          got || tcp.destroyed ? Promise.resolve() : until(stream, ['data', 'end', 'close'], timeoutMs),
        ended: (timeoutMs = AFTER_TIMEOUTS_MS) =>
          stream.readableEnded || tcp.destroyed ? Promise.resolve() : until(stream, ['end', 'close'], timeoutMs),
      };
    };
    tcp.once('connect', () => {
      if (alpn === undefined) {
        resolve(connection(tcp));
        return;
      }
      const tls = connectTls({ socket: tcp, ALPNProtocols: alpn, rejectUnauthorized: false });
      tls.on('error', () => {});
      tls.once('secureConnect', () => resolve(connection(tls)));
      tls.once('close', () => reject(new Error('the TLS handshake failed')));
    });
    tcp.once('close', () => reject(new Error('connection closed before it opened')));
  });
}

/** A case: what the client does on a connection (in cleartext, or with TLS and ALPN) before it resets it. */
interface ResetCase {
  name: string;
  alpn?: string[];
  /** The client's steps; the connection is reset when they end. */
  steps(connection: Connection): Promise<void>;
}

const write = (connection: Connection, bytes: string | Buffer) => {
  if (connection.stream.writable) connection.stream.write(bytes);
};

/** Each prefix of the preface, and of the preface and SETTINGS, reset at once and after the server's answer to it. */
function prefaceCases(alpn?: string[]): ResetCase[] {
  const cases: ResetCase[] = [];
  for (let n = 0; n <= PREFACE_BYTES.length; n += 1) {
    const bytes = PREFACE_BYTES.subarray(0, n);
    cases.push(
      { name: `${n} bytes of the preface, reset at once`, alpn, steps: async (c) => write(c, bytes) },
      {
        name: `${n} bytes of the preface, reset once answered`,
        alpn,
        steps: async (c) => {
          write(c, bytes);
          await c.answered();
        },
      },
      {
        name: `${n} bytes of the preface, reset once the server ended its side`,
        alpn,
        steps: async (c) => {
          write(c, bytes);
          await c.ended();
        },
      },
    );
  }
  return cases;
}

/** HTTP/1.1: each answer the service or Node gives, reset before it and after it. */
function http1Cases(alpn?: string[]): ResetCase[] {
  const exchanges: [string, string | Buffer][] = [
    ['a request', REQUEST],
    ['a gzip body cut short (408)', Buffer.concat([Buffer.from(gzipPost(1000)), GZIP_START])],
    ['a corrupt gzip body (400)', `${gzipPost(10)}not gzip!!`],
    ['half a request line', 'GET /api/hel'],
    ['headers never ended (408)', 'GET /api/hello HTTP/1.1\r\nHost: 127.0.0.1\r\n'],
    [
      'a body never ended (408)',
      'POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{',
    ],
    ['garbage (400)', 'GARBAGE\r\n\r\n'],
    ['HTTP/3.0 (505)', 'GET / HTTP/3.0\r\nHost: x\r\n\r\n'],
    ['CONNECT (405)', 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'],
    [
      'a request held by a fault delay',
      'GET /api/hello HTTP/1.1\r\nHost: x\r\nx-envoy-fault-delay-request: 300\r\n\r\n',
    ],
    ['a paced answer', 'GET /api/hello HTTP/1.1\r\nHost: x\r\nx-envoy-fault-throughput-response: 1\r\n\r\n'],
    [
      'a request whose connection the fault resets',
      'GET /api/hello HTTP/1.1\r\nHost: x\r\nx-fault-connection: reset\r\n\r\n',
    ],
    ['a request and an idle keep-alive', REQUEST],
    ['requests pipelined', REQUEST.repeat(5)],
    ['an Upgrade to a route that does not switch (closed after the answer)', UPGRADE],
    ['an Upgrade with bytes after it', `${UPGRADE}GET /api/hello HTTP/1.1\r\n`],
    ['an Upgrade whose headers never end (408)', UPGRADE.slice(0, -2)],
    ['a WebSocket handshake (101)', WEBSOCKET],
    ['a WebSocket handshake refused (400)', WEBSOCKET.replace('Sec-WebSocket-Version: 13', 'Sec-WebSocket-Version: 7')],
    ['a WebSocket frame cut short', Buffer.concat([Buffer.from(WEBSOCKET), Buffer.from('818a0000', 'hex')])],
    ['Expect: 100-continue and no body', `${postEcho(20)}Expect: 100-continue\r\n\r\n`],
    ['Expect: 100-continue and half a body', `${postEcho(20)}Expect: 100-continue\r\n\r\n{"a":`],
    ['an event stream', 'GET /api/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n'],
  ];
  return exchanges.flatMap(([what, bytes]): ResetCase[] => [
    { name: `HTTP/1.1, ${what}, reset at once`, alpn, steps: async (c) => write(c, bytes) },
    {
      name: `HTTP/1.1, ${what}, reset once answered`,
      alpn,
      steps: async (c) => {
        write(c, bytes);
        await c.answered();
      },
    },
    {
      name: `HTTP/1.1, ${what}, reset once the server ended its side`,
      alpn,
      steps: async (c) => {
        write(c, bytes);
        await c.ended();
      },
    },
  ]);
}

/** HTTP/2: sessions and streams at each stage, reset then. */
function http2Cases(alpn?: string[]): ResetCase[] {
  const preface = (c: Connection, settings: [number, number][] = []) =>
    write(c, Buffer.concat([Buffer.from(PREFACE, 'latin1'), settingsFrame(settings)]));
  const exchanges: [string, (c: Connection) => Promise<void>][] = [
    [
      'a stream opened',
      async (c) => {
        preface(c);
        write(c, headersFrame(1, requestFields('/api/hello')));
      },
    ],
    [
      'a stream answered',
      async (c) => {
        preface(c);
        write(c, headersFrame(1, requestFields('/api/hello')));
        await sleep(200);
      },
    ],
    [
      'a body never ended (408)',
      async (c) => {
        preface(c);
        write(c, headersFrame(1, requestFields('/api/echo', 'POST', [['content-type', 'application/json']]), false));
        write(c, frame(FrameType.DATA, 0, 1, Buffer.from('{')));
        await sleep(REQUEST_TIMEOUT_MS + 500);
      },
    ],
    [
      'a gzip body being decoded',
      async (c) => {
        preface(c);
        const fields = [
          ['content-type', 'application/json'],
          ['content-encoding', 'gzip'],
        ] as [string, string][];
        write(c, headersFrame(1, requestFields('/api/echo', 'POST', fields), false));
        write(c, frame(FrameType.DATA, 0, 1, GZIP_START));
        await sleep(200);
      },
    ],
    [
      'streams stalled by a window of 0',
      async (c) => {
        preface(c, [[Setting.INITIAL_WINDOW_SIZE, 0]]);
        for (let id = 1; id < 20; id += 2) write(c, headersFrame(id, requestFields('/openapi.json')));
        await sleep(300);
      },
    ],
    [
      'a paced answer',
      async (c) => {
        preface(c);
        write(c, headersFrame(1, requestFields('/api/hello', 'GET', [['x-envoy-fault-throughput-response', '1']])));
        await sleep(300);
      },
    ],
    [
      'a held request',
      async (c) => {
        preface(c);
        write(c, headersFrame(1, requestFields('/api/hello', 'GET', [['x-envoy-fault-delay-request', '300']])));
        await sleep(100);
      },
    ],
    [
      'CONNECT (405)',
      async (c) => {
        preface(c);
        write(
          c,
          headersFrame(1, [
            [':method', 'CONNECT'],
            [':authority', 'example.com:443'],
          ]),
        );
        await sleep(200);
      },
    ],
    [
      'an event stream',
      async (c) => {
        preface(c);
        write(c, headersFrame(1, requestFields('/api/events', 'GET', [['accept', 'text/event-stream']])));
        await sleep(300);
      },
    ],
    [
      'Expect: 100-continue and no body',
      async (c) => {
        preface(c);
        const fields = [
          ['content-type', 'application/json'],
          ['expect', '100-continue'],
        ] as [string, string][];
        write(c, headersFrame(1, requestFields('/api/echo', 'POST', fields), false));
        await sleep(200);
      },
    ],
    [
      'a frame that breaks the protocol (GOAWAY)',
      async (c) => {
        preface(c);
        write(c, frame(FrameType.HEADERS, Flag.END_HEADERS, 2, headerBlock(requestFields('/'))));
        await c.ended();
      },
    ],
    [
      'an idle session (GOAWAY after the keep-alive timeout)',
      async (c) => {
        preface(c);
        await sleep(KEEP_ALIVE_TIMEOUT_MS + 300);
      },
    ],
    [
      'an idle session closed',
      async (c) => {
        preface(c);
        await c.ended();
      },
    ],
  ];
  return exchanges.map(([what, steps]) => ({ name: `HTTP/2, ${what}, reset`, alpn, steps }));
}

/** Runs every case at once, each on a connection of its own, and resets each connection when its steps end. */
async function resetAll(port: number, cases: ResetCase[]): Promise<void> {
  await Promise.all(
    cases.map(async (resetCase) => {
      const connection = await open(port, resetCase.alpn);
      await resetCase.steps(connection);
      if (!connection.tcp.destroyed) connection.tcp.resetAndDestroy();
    }),
  );
}

/** The status of GET /healthz, over TLS trusting `ca` when given. */
function healthz(port: number, ca?: string): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const options = { host: '127.0.0.1', port, path: '/healthz', ...(ca !== undefined && { ca: readFileSync(ca) }) };
    const request = (ca === undefined ? getHttp : getHttps)(options, (response) => {
      response.resume();
      resolve(response.statusCode);
    });
    request.on('error', reject);
  });
}

/** The server after the resets: still running, serving, and nothing said on stderr. */
async function assertAlive(server: RunningServer, ca?: string): Promise<void> {
  await sleep(300); // the last resets read
  assert.equal(server.child.exitCode, null, `the process exited:\n${server.stderr()}`);
  assert.equal(server.stderr(), '');
  assert.equal(await healthz(server.port, ca), 200);
}

const TIMEOUTS = {
  HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
  REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
  KEEP_ALIVE_TIMEOUT_MS: String(KEEP_ALIVE_TIMEOUT_MS),
  FAULT_HEADERS: 'true',
  RATE_LIMIT_MAX: '0',
};

describe('a client that resets its connection at any point leaves the process running', () => {
  after(() => killAllServers());

  it('HTTP/1.1 alone', async () => {
    const server = await startServer(TIMEOUTS);
    await resetAll(server.port, [...prefaceCases(), ...http1Cases()]);
    await assertAlive(server);
  });

  it('HTTP2 in cleartext: while the preface is read, on HTTP/1.1, on h2c', async () => {
    const server = await startServer({ ...TIMEOUTS, HTTP2: 'true' });
    await resetAll(server.port, [...prefaceCases(), ...http1Cases(), ...http2Cases()]);
    await assertAlive(server);
  });

  describe('TLS', { skip: OPENSSL_MISSING && OPENSSL_SKIP_REASON }, () => {
    let files: TlsFiles;
    before(() => {
      files = makeTlsFiles();
    });
    after(() => files?.remove());

    for (const http2 of [false, true]) {
      it(`HTTP2=${http2}: during the handshake, on HTTP/1.1${http2 ? ' and on h2' : ''}`, async () => {
        const server = await startServer({
          ...TIMEOUTS,
          HTTP2: String(http2),
          TLS_CERT_FILE: files.serverCert,
          TLS_KEY_FILE: files.serverKey,
        });
        const handshake: ResetCase[] = [
          // A ClientHello's first bytes (a TLS record header and part of the handshake's), then silence.
          {
            name: 'part of a ClientHello, reset at once',
            steps: async (c) => write(c, Buffer.from('16030100c8010000c4', 'hex')),
          },
          {
            name: 'part of a ClientHello, reset once the server gave up',
            steps: async (c) => {
              write(c, Buffer.from('16030100c8010000c4', 'hex'));
              await c.ended();
            },
          },
          { name: 'nothing, reset at once', steps: async () => {} },
          {
            name: 'cleartext HTTP/1.1, reset once the server gave up',
            steps: async (c) => {
              write(c, REQUEST);
              await c.ended();
            },
          },
          { name: 'a handshake done, reset at once', alpn: ['http/1.1'], steps: async () => {} },
        ];
        const cases = [...handshake, ...http1Cases(['http/1.1'])];
        if (http2) cases.push(...prefaceCases(['h2']), ...http2Cases(['h2']));
        await resetAll(server.port, cases);
        await assertAlive(server, files.ca);
      });
    }
  });
});
