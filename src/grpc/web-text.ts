import type { UniversalServerRequest } from '@connectrpc/connect/protocol';

/**
 * gRPC-Web in base64 (`application/grpc-web-text`, `+proto` or not), which browsers' grpc-web
 * clients send by default: ConnectRPC serves binary gRPC-Web alone, so a call in text is decoded
 * for it here, and its answer encoded back (PROTOCOL-WEB.md).
 */
const WEB_TEXT = /^application\/grpc-web-text(?=$|[+;])/i;

/** Whether `request` is gRPC-Web in base64; if so, it is made binary gRPC-Web, as ConnectRPC reads it. */
export function binaryFromWebText(request: UniversalServerRequest): boolean {
  const type = request.header.get('content-type');
  if (type === null || !WEB_TEXT.test(type)) return false;
  request.header.set('content-type', type.replace(WEB_TEXT, 'application/grpc-web'));
  // Never JSON parsed ahead: the routes hand ConnectRPC the body as it comes.
  request.body = decodedBase64(request.body as AsyncIterable<Uint8Array>);
  return true;
}

/** The content type of an answer to a call in text: its binary gRPC-Web type, in text. */
export const webTextType = (binaryType: string): string =>
  binaryType.replace(/^application\/grpc-web/i, 'application/grpc-web-text');

/** A piece of an answer to a call in text: in base64, padded, as each piece may be. */
export const asWebText = (piece: Uint8Array): string =>
  Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength).toString('base64');

/**
 * A body in base64, decoded a whole group of four characters at a time: a client may send padded
 * pieces one after another, each group of which decodes on its own.
 */
async function* decodedBase64(body: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  let rest = '';
  for await (const chunk of body) {
    const text = rest + Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('latin1');
    const whole = text.length - (text.length % 4);
    rest = text.slice(whole);
    if (whole > 0) yield decoded(text.slice(0, whole));
  }
  // Not a whole group: as much as it holds, for ConnectRPC to refuse the message it cuts short.
  if (rest.length > 0) yield decoded(rest);
}

/** Base64 of padded pieces one after another: Node's decoder ends at the first padding. */
function decoded(text: string): Buffer {
  if (!text.includes('=')) return Buffer.from(text, 'base64');
  return Buffer.concat(text.split(/(?<==)(?=[^=])/).map((piece) => Buffer.from(piece, 'base64')));
}
