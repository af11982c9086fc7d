import { expectEnvelope, expectEqual, expectValidation, fail, header, show } from '../assert.js';
import type { Check } from '../context.js';
import { acceptOf, BINARY, CLOSE, clientFrame, handshakeHead, newKey, openWebSocket, TEXT } from '../websocket.js';

const CLAUSE = 'contract: Streams and content codings';
const PATH = '/api/v1/echo/websocket';
/** How long a frame or the handshake's answer may take. */
const WAIT_MS = 5000;

export const websocketChecks: Check[] = [
  {
    id: 'websocket.echo',
    group: 'websocket',
    clause: CLAUSE,
    title: `GET ${PATH} switches to a WebSocket (101, X-Request-Id) that echoes text and binary messages unchanged`,
    async run(ctx) {
      const key = newKey();
      const { socket, reader, answer, statusLine } = await openWebSocket(ctx.http, PATH, key, '13', WAIT_MS);
      try {
        const { headers } = answer;
        if (!/^HTTP\/1\.1 101 /.test(statusLine)) {
          fail(`GET ${answer.request.path}: HTTP/1.1 101`, show(statusLine || 'no status line'));
        }
        expectEqual(headers['sec-websocket-accept'], acceptOf(key), 'Sec-WebSocket-Accept');
        if (headers['x-request-id'] === undefined) fail('X-Request-Id on the 101', show(headers));
        for (const [opcode, payload] of [
          [TEXT, Buffer.from('Grüße, 世界 👋')],
          [BINARY, Buffer.from([0, 1, 0xfe, 0xff, 0xc3])],
        ] as const) {
          socket.write(clientFrame(opcode, payload));
          const echo = await reader.frame(WAIT_MS);
          expectEqual(echo.opcode, opcode, `the echo's opcode`);
          expectEqual([...echo.payload], [...payload], `the echo's bytes`);
        }
        const code = Buffer.alloc(2);
        code.writeUInt16BE(1000);
        socket.write(clientFrame(CLOSE, code));
        const close = await reader.frame(WAIT_MS);
        expectEqual(close.opcode, CLOSE, 'the close answered');
      } finally {
        socket.destroy();
      }
    },
  },
  {
    id: 'websocket.refusals',
    group: 'websocket',
    clause: CLAUSE,
    title: `${PATH} refuses a plain GET with 426 UPGRADE_REQUIRED, and a wrong Sec-WebSocket-Version with 400 naming it`,
    async run(ctx) {
      const plain = await ctx.get(PATH);
      expectEnvelope(plain, 426, 'UPGRADE_REQUIRED');
      if (plain.httpVersion === '1.1' && header(plain, 'upgrade')?.toLowerCase() !== 'websocket') {
        fail('Upgrade: websocket on the 426', show(header(plain, 'upgrade')));
      }
      const wrong = await ctx.http.raw(
        handshakeHead(ctx.http, PATH, newKey(), '8'),
        `GET ${ctx.http.prefix}${PATH} (Sec-WebSocket-Version: 8)`,
      );
      expectValidation(wrong, 'Sec-WebSocket-Version', '8');
      expectEqual(header(wrong, 'sec-websocket-version'), '13', 'Sec-WebSocket-Version on the 400');
    },
  },
];
