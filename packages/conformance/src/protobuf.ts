/**
 * What the kit needs of the protobuf wire format, and no more: messages of string, bytes, varint
 * and nested message fields written, any message read field by field (a field it has no use for
 * is skipped by its wire type), and gRPC's length-prefixed envelopes.
 */

/** A field to write: text or bytes as length-delimited, a number as a varint. */
export type FieldValue = string | Uint8Array | number;

function varint(value: number): number[] {
  const bytes: number[] = [];
  let rest = value;
  while (rest > 0x7f) {
    bytes.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  bytes.push(rest);
  return bytes;
}

/** A message of `fields`, in the order given, as `[field number, value]`. */
export function encodeMessage(fields: readonly (readonly [number, FieldValue])[]): Buffer {
  const parts: Buffer[] = [];
  for (const [number, value] of fields) {
    if (typeof value === 'number') {
      parts.push(Buffer.from([...varint(number * 8), ...varint(value)]));
      continue;
    }
    const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : Buffer.from(value);
    parts.push(Buffer.from([...varint(number * 8 + 2), ...varint(bytes.length)]), bytes);
  }
  return Buffer.concat(parts);
}

/** A message read: each field number's values, in the order they came; a varint as a bigint, a length-delimited field as its bytes. */
export class Message {
  readonly #fields = new Map<number, (bigint | Buffer)[]>();

  /** Reads `bytes`; throws a `SyntaxError` where they are not a protobuf message. */
  constructor(bytes: Uint8Array) {
    const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let at = 0;
    const readVarint = (): bigint => {
      let value = 0n;
      for (let shift = 0n; ; shift += 7n) {
        if (at >= buffer.length || shift > 63n) throw new SyntaxError('a varint cut short');
        const byte = buffer[at] as number;
        at += 1;
        value |= BigInt(byte & 0x7f) << shift;
        if (byte < 0x80) return value;
      }
    };
    const take = (length: number): Buffer => {
      if (at + length > buffer.length) throw new SyntaxError('a field cut short');
      const slice = buffer.subarray(at, at + length);
      at += length;
      return slice;
    };
    while (at < buffer.length) {
      const key = readVarint();
      const number = Number(key >> 3n);
      const wireType = Number(key & 7n);
      let value: bigint | Buffer;
      if (wireType === 0) value = readVarint();
      else if (wireType === 2) value = take(Number(readVarint()));
      else if (wireType === 1) value = take(8);
      else if (wireType === 5) value = take(4);
      else throw new SyntaxError(`wire type ${wireType} of field ${number}`);
      if (number === 0) throw new SyntaxError('field number 0');
      const values = this.#fields.get(number) ?? [];
      values.push(value);
      this.#fields.set(number, values);
    }
  }

  #bytes(number: number): Buffer[] {
    return (this.#fields.get(number) ?? []).filter((value): value is Buffer => Buffer.isBuffer(value));
  }

  /** A string field (the last value, as protobuf reads a repeated scalar); '' when absent. */
  text(number: number): string {
    return this.texts(number).at(-1) ?? '';
  }

  /** Every value of a repeated string field. */
  texts(number: number): string[] {
    return this.#bytes(number).map((bytes) => bytes.toString('utf8'));
  }

  /** A varint field as a number; 0 when absent. */
  number(number: number): number {
    const value = (this.#fields.get(number) ?? []).findLast((one) => typeof one === 'bigint');
    return value === undefined ? 0 : Number(BigInt.asIntN(32, value as bigint));
  }

  /** Every value of a repeated message field, each read. */
  messages(number: number): Message[] {
    return this.#bytes(number).map((bytes) => new Message(bytes));
  }

  /** A message field; null when absent. */
  message(number: number): Message | null {
    return this.messages(number).at(-1) ?? null;
  }

  /** A bytes field as it came; null when absent. */
  bytes(number: number): Buffer | null {
    return this.#bytes(number).at(-1) ?? null;
  }
}

/** A message in gRPC's envelope: a flags byte, its length in 4 bytes, big-endian, then the message. */
export function envelope(flags: number, message: Uint8Array): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}

/** The whole envelopes at the start of `bytes`, and how many bytes they take. */
export function envelopes(bytes: Buffer): { items: { flags: number; data: Buffer }[]; length: number } {
  const items: { flags: number; data: Buffer }[] = [];
  let at = 0;
  while (at + 5 <= bytes.length) {
    const size = bytes.readUInt32BE(at + 1);
    if (at + 5 + size > bytes.length) break;
    items.push({ flags: bytes.readUInt8(at), data: bytes.subarray(at + 5, at + 5 + size) });
    at += 5 + size;
  }
  return { items, length: at };
}
