import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An OTLP/HTTP trace receiver, as an OpenTelemetry collector's: it decodes what is posted to
 * /v1/traces, protobuf or JSON, into one shape, and answers as told (accept, fail with 500, or
 * hold the answer 10 s).
 */

export type AttributeValue = string | number | boolean;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  traceState: string;
  name: string;
  /** OTLP's numbers: 2 server, 3 client. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, AttributeValue>;
  /** 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  resource: Record<string, AttributeValue>;
}

export interface ReceivedExport {
  contentType: string | undefined;
  headers: IncomingHttpHeaders;
  spans: ReceivedSpan[];
}

// The wire format of protocol buffers: each field a tag (number and wire type), then its value.

type Field = { number: number; varint?: bigint; bytes?: Buffer; fixed64?: Buffer };

function readVarint(buffer: Buffer, at: { offset: number }): bigint {
  let value = 0n;
  for (let shift = 0n; ; shift += 7n) {
    const byte = buffer[at.offset++] as number;
    value |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) return value;
  }
}

function decodeFields(buffer: Buffer): Field[] {
  const fields: Field[] = [];
  const at = { offset: 0 };
  while (at.offset < buffer.length) {
    const tag = Number(readVarint(buffer, at));
    const number = tag >> 3;
    switch (tag & 7) {
      case 0:
        fields.push({ number, varint: readVarint(buffer, at) });
        break;
      case 1:
        fields.push({ number, fixed64: buffer.subarray(at.offset, at.offset + 8) });
        at.offset += 8;
        break;
      case 2: {
        const length = Number(readVarint(buffer, at));
        fields.push({ number, bytes: buffer.subarray(at.offset, at.offset + length) });
        at.offset += length;
        break;
      }
      case 5:
        at.offset += 4;
        break;
      default:
        throw new Error(`wire type ${tag & 7} at ${at.offset}`);
    }
  }
  return fields;
}

const all = (fields: Field[], number: number) => fields.filter((field) => field.number === number);
const one = (fields: Field[], number: number) => all(fields, number)[0];
const text = (field: Field | undefined) => field?.bytes?.toString('utf8') ?? '';
const hex = (field: Field | undefined) => field?.bytes?.toString('hex') ?? '';

/** AnyValue: string 1, bool 2, int 3, double 4. */
function protobufValue(fields: Field[]): AttributeValue {
  const [field] = fields;
  if (field === undefined) return '';
  if (field.number === 1) return text(field);
  if (field.number === 2) return field.varint === 1n;
  if (field.number === 3) return Number(BigInt.asIntN(64, field.varint ?? 0n));
  if (field.number === 4) return field.fixed64?.readDoubleLE(0) ?? 0;
  throw new Error(`an attribute value of field ${field.number}`);
}

/** KeyValue: key 1, value 2. */
function protobufAttributes(fields: Field[]): Record<string, AttributeValue> {
  return Object.fromEntries(
    fields.map((field) => {
      const pair = decodeFields(field.bytes as Buffer);
      return [text(one(pair, 1)), protobufValue(decodeFields(one(pair, 2)?.bytes ?? Buffer.alloc(0)))];
    }),
  );
}

/** ExportTraceServiceRequest → ResourceSpans (resource 1, scope spans 2) → ScopeSpans (spans 2) → Span. */
function decodeProtobuf(body: Buffer): ReceivedSpan[] {
  return all(decodeFields(body), 1).flatMap((resourceSpans) => {
    const fields = decodeFields(resourceSpans.bytes as Buffer);
    const resource = protobufAttributes(all(decodeFields(one(fields, 1)?.bytes ?? Buffer.alloc(0)), 1));
    return all(fields, 2).flatMap((scopeSpans) =>
      all(decodeFields(scopeSpans.bytes as Buffer), 2).map((spanField) => {
        const span = decodeFields(spanField.bytes as Buffer);
        const status = decodeFields(one(span, 15)?.bytes ?? Buffer.alloc(0));
        return {
          traceId: hex(one(span, 1)),
          spanId: hex(one(span, 2)),
          traceState: text(one(span, 3)),
          parentSpanId: hex(one(span, 4)),
          name: text(one(span, 5)),
          kind: Number(one(span, 6)?.varint ?? 0n),
          startNs: one(span, 7)?.fixed64?.readBigUInt64LE(0) ?? 0n,
          endNs: one(span, 8)?.fixed64?.readBigUInt64LE(0) ?? 0n,
          attributes: protobufAttributes(all(span, 9)),
          status: { code: Number(one(status, 3)?.varint ?? 0n), message: text(one(status, 2)) },
          resource,
        };
      }),
    );
  });
}

type JsonValue = { stringValue?: string; boolValue?: boolean; intValue?: string | number; doubleValue?: number };
type JsonAttribute = { key: string; value: JsonValue };

function jsonAttributes(attributes: JsonAttribute[] = []): Record<string, AttributeValue> {
  return Object.fromEntries(
    attributes.map(({ key, value }) => [
      key,
      value.stringValue ??
        value.boolValue ??
        (value.intValue === undefined ? value.doubleValue : Number(value.intValue)) ??
        '',
    ]),
  );
}

/** The same message in OTLP's JSON mapping: ids as hex, times as decimal strings. */
function decodeJson(body: Buffer): ReceivedSpan[] {
  // biome-ignore lint/suspicious/noExplicitAny: OTLP's JSON, read field by field below
  const request = JSON.parse(body.toString('utf8')) as { resourceSpans: any[] };
  return request.resourceSpans.flatMap((resourceSpans) => {
    const resource = jsonAttributes(resourceSpans.resource?.attributes);
    // biome-ignore lint/suspicious/noExplicitAny: as above
    return resourceSpans.scopeSpans.flatMap((scope: any) =>
      // biome-ignore lint/suspicious/noExplicitAny: as above
      scope.spans.map((span: any) => ({
        traceId: span.traceId,
        spanId: span.spanId,
        traceState: span.traceState ?? '',
        parentSpanId: span.parentSpanId ?? '',
        name: span.name,
        kind: span.kind,
        startNs: BigInt(span.startTimeUnixNano),
        endNs: BigInt(span.endTimeUnixNano),
        attributes: jsonAttributes(span.attributes),
        status: { code: span.status?.code ?? 0, message: span.status?.message ?? '' },
        resource,
      })),
    );
  });
}

export type ReceiverMode = 'accept' | 'fail' | 'slow';

/** How long a slow receiver holds its answer. */
export const SLOW_MS = 10_000;

export class OtlpReceiver {
  readonly exports: ReceivedExport[] = [];
  mode: ReceiverMode = 'accept';
  readonly #server: Server;
  #arrivals: (() => void)[] = [];

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(): Promise<OtlpReceiver> {
    const server = createServer();
    const receiver = new OtlpReceiver(server);
    server.on('request', (request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => receiver.#received(request.headers, Buffer.concat(chunks), response));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  get spans(): ReceivedSpan[] {
    return this.exports.flatMap((received) => received.spans);
  }

  /** Resolves once an export has arrived, or at once if one has. */
  async arrival(): Promise<void> {
    if (this.exports.length > 0) return;
    await new Promise<void>((resolve) => this.#arrivals.push(resolve));
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  #received(headers: IncomingHttpHeaders, body: Buffer, response: ServerResponse): void {
    const contentType = headers['content-type'];
    const spans = contentType === 'application/json' ? decodeJson(body) : decodeProtobuf(body);
    this.exports.push({ contentType, headers, spans });
    for (const resolve of this.#arrivals.splice(0)) resolve();
    const answer = () => {
      if (response.destroyed) return;
      response.writeHead(this.mode === 'fail' ? 500 : 200, { 'content-type': contentType ?? 'application/x-protobuf' });
      response.end(contentType === 'application/json' ? '{}' : '');
    };
    if (this.mode === 'slow') setTimeout(answer, SLOW_MS).unref();
    else answer();
  }
}
