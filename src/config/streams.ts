import { integer } from './parsers.js';
import { concern, setting } from './setting.js';

const settings = {
  /** Each open event stream holds a connection (HTTP/1.1) or a stream of a session (HTTP/2), and a timer. */
  streamsMax: setting({
    env: 'STREAMS_MAX',
    help: 'event streams (GET /api/events) open at once, 1 to 1000000; past it, 503 with Retry-After',
    default: 1000,
    parse: integer(1, 1_000_000),
  }),
};

/** The long-lived answers: the event stream. */
export const STREAMS = concern({ settings });
