import type { FastifyInstance } from 'fastify';
import { messageLimitCloses } from '../http/websockets.js';
import { ECHO_WEBSOCKET_PATH, HandshakeHeaders } from '../schemas.js';
import { API_VERSION, LICENSE, VERSION } from '../version.js';

/** What the document says of the deployment: its context path, and its message limit. */
export interface AsyncApiOptions {
  contextPath: string;
  /** WS_MAX_MESSAGE_BYTES. */
  maxMessageBytes: number;
}

/**
 * The AsyncAPI 3.0 document of the WebSocket echo, which OpenAPI cannot describe: its channel (the
 * handshake's headers from the schema the route documents them with), its messages and its one
 * operation, the echo, a reply to each message; the closes for its limits as this deployment
 * sends them. Its server is the host that asked for it.
 */
export function asyncapiDocument(
  host: string,
  secure: boolean,
  { contextPath, maxMessageBytes }: AsyncApiOptions,
): object {
  const base = contextPath === '/' ? '' : contextPath;
  const { tooLarge, tooManyFragments } = messageLimitCloses(maxMessageBytes);
  const address = ECHO_WEBSOCKET_PATH.replace('/api/', `/api/v${API_VERSION}/`);
  const messages = { text: { $ref: '#/components/messages/text' }, binary: { $ref: '#/components/messages/binary' } };
  const channelMessages = [{ $ref: '#/channels/echo/messages/text' }, { $ref: '#/channels/echo/messages/binary' }];
  return {
    asyncapi: '3.0.0',
    info: {
      title: 'Greeting and Echo Service: WebSocket echo',
      version: VERSION,
      description:
        'The WebSocket of the Greeting and Echo Service (RFC 6455), over HTTP/1.1 and HTTPS. Its handshake is ' +
        'an HTTP request like any other of the API (`X-Request-Id`, `API-Version`, the rate limit and its ' +
        '`RateLimit-*` headers, the versioning rules), answered `101 Switching Protocols` with `Upgrade: websocket`, ' +
        '`Connection: Upgrade` and `Sec-WebSocket-Accept`. Its refusals are JSON in the error envelope of the API ' +
        `(\`ErrorEnvelope\` in the OpenAPI document at \`${base}/openapi.json\`): 426 \`UPGRADE_REQUIRED\` without ` +
        '`Upgrade: websocket` (with `Upgrade: websocket` over HTTP/1.1) or in HTTP/1.0; 400 `VALIDATION_ERROR` ' +
        'naming a bad `Sec-WebSocket-Key`, `Sec-WebSocket-Version` (with `Sec-WebSocket-Version: 13`) or ' +
        '`Sec-WebSocket-Extensions`, or a body (`Content-Length`); 403 `FORBIDDEN` for an `Origin` that ' +
        '`CORS_ORIGINS` does not allow; 429 `RATE_LIMIT_EXCEEDED` over the rate limit; 503 `SERVICE_UNAVAILABLE` ' +
        '(with `Retry-After`) past `WS_MAX_CONNECTIONS`, while shutting down, or while the memory ' +
        'budget (`MEMORY_BUDGET_BYTES`) is at 80% or more. The connection ends ' +
        `with ${tooLarge.code} (reason \`${tooLarge.reason}\`) after a message larger ` +
        `than \`WS_MAX_MESSAGE_BYTES\` (${maxMessageBytes} bytes here, once inflated); with ${tooManyFragments.code} ` +
        `(reason \`${tooManyFragments.reason}\`) after a message in more fragments than one per 64 bytes of ` +
        '`WS_MAX_MESSAGE_BYTES`; with 1001 ' +
        'when the service shuts down; with 1013 (then a reset, so seen only by a client that read what came ' +
        'before) when the memory budget is passed and it holds the most unread echoes; ' +
        'and without a close (1006) when the client did not answer a ping by the next one ' +
        '(`WS_PING_INTERVAL_MS`). Every ping is answered, however many come at once. A client that does not ' +
        'read its echoes and pongs is not read either, past `WS_MAX_BUFFERED_BYTES` unsent.',
      license: { name: LICENSE },
    },
    servers: {
      service: {
        host,
        protocol: secure ? 'wss' : 'ws',
        ...(base !== '' && { pathname: base }),
        description: 'The host that serves this document.',
      },
    },
    channels: {
      echo: {
        address,
        title: 'WebSocket echo',
        description: `Also at \`${ECHO_WEBSOCKET_PATH}\`, the same. Over HTTP/1.1 and HTTPS; not over HTTP/2.`,
        servers: [{ $ref: '#/servers/service' }],
        messages,
        bindings: {
          ws: { method: 'GET', headers: JSON.parse(JSON.stringify(HandshakeHeaders)), bindingVersion: '0.1.0' },
        },
      },
    },
    operations: {
      echo: {
        action: 'receive',
        channel: { $ref: '#/channels/echo' },
        title: 'Echo',
        summary: 'Every message comes back unchanged: the same type, the same bytes.',
        messages: channelMessages,
        reply: { channel: { $ref: '#/channels/echo' }, messages: channelMessages },
      },
    },
    components: {
      messages: {
        text: {
          name: 'text',
          title: 'Text message',
          summary: 'A text frame (or frames): UTF-8, echoed as a text message with the same bytes.',
          contentType: 'text/plain',
          payload: { type: 'string', examples: ['Hello, World!'] },
        },
        binary: {
          name: 'binary',
          title: 'Binary message',
          summary: 'A binary frame (or frames): any bytes, echoed as a binary message with the same bytes.',
          contentType: 'application/octet-stream',
          payload: { type: 'string', format: 'binary' },
        },
      },
    },
  };
}

/** `GET /asyncapi.json`: the document, for the host that asks. */
export async function asyncapiRoute(app: FastifyInstance, options: AsyncApiOptions): Promise<void> {
  app.get(
    '/asyncapi.json',
    {
      schema: {
        operationId: 'getAsyncApi',
        summary: 'AsyncAPI document',
        description: 'AsyncAPI 3.0 of the WebSocket echo: its channel, messages and the echo.',
        tags: ['operations'],
        response: {
          200: {
            type: 'object',
            additionalProperties: true,
            description: 'AsyncAPI 3.0 document.',
            examples: [
              { asyncapi: '3.0.0', info: { title: 'Greeting and Echo Service: WebSocket echo', version: VERSION } },
            ],
          },
        },
      },
    },
    async (request, reply) => {
      const document = asyncapiDocument(request.host || 'localhost', request.protocol === 'https', options);
      return reply.type('application/json; charset=utf-8').send(JSON.stringify(document));
    },
  );
}
