import { boolean, integer } from './parsers.js';
import type { SERVICE } from './service.js';
import { concern, type SettingValues, setting } from './setting.js';

const settings = {
  /** Each open event stream holds a connection (HTTP/1.1) or a stream of a session (HTTP/2), and a timer. */
  streamsMax: setting({
    env: 'STREAMS_MAX',
    help: 'event streams (GET /api/events) open at once, 1 to 1000000; past it, 503 with Retry-After',
    default: 1000,
    parse: integer(1, 1_000_000),
  }),
  // The WebSocket echo (GET /api/echo/websocket).
  wsMaxConnections: setting({
    env: 'WS_MAX_CONNECTIONS',
    help: 'WebSocket connections open at once, 1 to 1000000; a handshake past them is answered 503 with Retry-After',
    default: 1000,
    parse: integer(1, 1_000_000),
  }),
  wsMaxMessageBytes: setting({
    env: 'WS_MAX_MESSAGE_BYTES',
    help: 'largest WebSocket message, in bytes once inflated, 1 to 2147483647; a larger one closes the connection with 1009, and one in more fragments than one per 64 of these bytes with 1008',
    default: 1024 * 1024,
    defaultText: 'BODY_LIMIT',
    parse: integer(1, 2 ** 31 - 1),
  }),
  wsMaxBufferedBytes: setting({
    env: 'WS_MAX_BUFFERED_BYTES',
    help: 'bytes of echoes a WebSocket client has not read yet, 1 to 2147483647, past which the service stops reading that client until it reads',
    default: 4 * 1024 * 1024,
    parse: integer(1, 2 ** 31 - 1),
  }),
  wsPingIntervalMs: setting({
    env: 'WS_PING_INTERVAL_MS',
    help: 'how often each WebSocket is pinged, in ms, 10 to 2147483647; a connection that did not answer the last ping by the next is ended',
    default: 30_000,
    parse: integer(10, 2 ** 31 - 1),
  }),
  wsPermessageDeflate: setting({
    env: 'WS_PERMESSAGE_DEFLATE',
    help: 'true, false, 1 or 0, in any case; true: WebSocket messages may be compressed (permessage-deflate), inflated no further than WS_MAX_MESSAGE_BYTES',
    default: false,
    parse: boolean,
  }),
};

/** The long-lived answers: the event stream, and the WebSocket echo's limits. */
export const STREAMS = concern({
  settings,
  check(config, given) {
    // A WebSocket message is as large as a body may be, unless told otherwise.
    const { bodyLimit } = config as typeof config & SettingValues<(typeof SERVICE)['settings']>;
    if (!given.has('wsMaxMessageBytes')) config.wsMaxMessageBytes = bodyLimit;
  },
});
