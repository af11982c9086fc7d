import { Code, ConnectError } from '@connectrpc/connect';
import type { UniversalServerRequest } from '@connectrpc/connect/protocol';
import { compressionGzip } from '@connectrpc/connect-node';
import { payloadTooLarge } from '../errors.js';
import { type Protocol, toConnectError } from './status.js';

/** An enveloped message's head: its flags, then its length (gRPC, gRPC-Web, the Connect protocol's streams). */
const HEAD_BYTES = 5;
/** The flag of a compressed message. */
const COMPRESSED = 0x01;

/** The headers naming the coding of a protocol's messages, and the codings its client accepts in the answer. */
const CODING_HEADERS: Readonly<Record<Protocol, readonly [string, string]>> = {
  grpc: ['grpc-encoding', 'grpc-accept-encoding'],
  'grpc-web': ['grpc-encoding', 'grpc-accept-encoding'],
  'connect-stream': ['connect-content-encoding', 'connect-accept-encoding'],
  connect: ['content-encoding', 'accept-encoding'],
};

/**
 * Makes ConnectRPC read `request`'s messages through `requestMessages`: gzip ones decompressed
 * there, so that their coding is no longer named (nor, for the Connect protocol's unary call, the
 * compressed length), and the answer still coded as the request would have had it (the request's
 * coding, where the client names none it accepts).
 */
export function readMessagesWithin(
  request: UniversalServerRequest,
  protocol: Protocol,
  limit: number,
  requestId: string,
): void {
  const [coding, accepted] = CODING_HEADERS[protocol];
  const gzip = request.header.get(coding) === 'gzip';
  if (gzip) {
    request.header.delete(coding);
    if (!request.header.has(accepted)) request.header.set(accepted, 'gzip');
  }
  const enveloped = protocol !== 'connect';
  if (!enveloped) request.header.delete('content-length');
  // Never JSON parsed ahead: the routes hand ConnectRPC the body as it comes.
  const body = request.body as AsyncIterable<Uint8Array>;
  request.body = requestMessages(body, { enveloped, gzip, limit, requestId });
}

interface RequestMessagesOptions {
  /** Whether the body is a stream of enveloped messages; else one message, the Connect protocol's unary call. */
  enveloped: boolean;
  /** Whether its messages are gzip-compressed, as its `grpc-encoding` (or `connect-content-encoding`, `content-encoding`) says. */
  gzip: boolean;
  /** The most a message may hold, compressed or not: BODY_LIMIT. */
  limit: number;
  /** The call's request id, for the details of its error. */
  requestId: string;
}

/**
 * A call's request body as ConnectRPC is to read it: each message within `limit`, and gzip ones
 * decompressed (within `limit`) and passed on uncompressed. A message over the limit, as sent or
 * once decompressed, is refused here with the contract's 413 as a gRPC status (its message, its
 * details, the request's id): ConnectRPC refuses it with its own words and no details, where no
 * hook of the service sees the request. What is wrong otherwise (a message cut short, a
 * decompression that fails) is left to ConnectRPC, which says so.
 */
async function* requestMessages(
  body: AsyncIterable<Uint8Array>,
  options: RequestMessagesOptions,
): AsyncGenerator<Uint8Array> {
  const { enveloped, gzip, limit, requestId } = options;
  const tooLarge = () => toConnectError(payloadTooLarge(limit), requestId);
  const decompressed = async (bytes: Uint8Array): Promise<Uint8Array> => {
    try {
      return await compressionGzip.decompress(bytes, limit);
    } catch (error) {
      throw error instanceof ConnectError && error.code === Code.ResourceExhausted ? tooLarge() : error;
    }
  };
  // What has come and is not yet passed on, in the chunks it came in: joined once a message is whole.
  const chunks: Buffer[] = [];
  let buffered = 0;
  const take = (bytes: number): Buffer => {
    const all = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, buffered);
    chunks.length = 0;
    buffered -= bytes;
    if (buffered > 0) chunks.push(all.subarray(bytes));
    return all.subarray(0, bytes);
  };
  for await (const chunk of body) {
    chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    buffered += chunk.byteLength;
    if (!enveloped) {
      if (buffered > limit) throw tooLarge();
      continue;
    }
    while (buffered >= HEAD_BYTES) {
      if ((chunks[0] as Buffer).length < HEAD_BYTES) chunks.splice(0, chunks.length, Buffer.concat(chunks, buffered));
      const head = chunks[0] as Buffer;
      const length = head.readUInt32BE(1);
      if (length > limit) throw tooLarge();
      if (buffered < HEAD_BYTES + length) break;
      const message = take(HEAD_BYTES + length);
      const flags = message[0] as number;
      if (!gzip || (flags & COMPRESSED) === 0) {
        yield message;
        continue;
      }
      const data = await decompressed(message.subarray(HEAD_BYTES));
      const uncompressed = Buffer.alloc(HEAD_BYTES + data.byteLength);
      uncompressed[0] = flags & ~COMPRESSED;
      uncompressed.writeUInt32BE(data.byteLength, 1);
      uncompressed.set(data, HEAD_BYTES);
      yield uncompressed;
    }
  }
  // The Connect protocol's unary message, whole; or what is left of an envelope cut short, for ConnectRPC to refuse.
  const rest = take(buffered);
  if (!enveloped) yield gzip && rest.length > 0 ? await decompressed(rest) : rest;
  else if (rest.length > 0) yield rest;
}
