import type { Transform } from 'node:stream';
import zlib from 'node:zlib';
import { listElements } from './header-list.js';
import { Turns } from './turns.js';

/**
 * The content codings of RFC 9110 (8.4) the service speaks both ways: which the runtime has, the
 * client's preference among them (12.5.3), and each one's compressor and decoder.
 */

export type Coding = 'zstd' | 'br' | 'gzip' | 'deflate';

/** Every coding's name, whether or not this runtime has it: tags of any of them name a version. */
export const CODING_NAMES: readonly Coding[] = ['zstd', 'br', 'gzip', 'deflate'];

/** Node's zstd (22.15 and later), which the types of older runtimes do not declare. */
interface Zstd {
  zstdCompress(buffer: Buffer, options: object, callback: (error: Error | null, result: Buffer) => void): void;
  createZstdDecompress(options: object): Decoder;
}
const zstd = typeof (zlib as Partial<Zstd>).zstdCompress === 'function' ? (zlib as unknown as Zstd) : null;
// ZSTD_c_compressionLevel and ZSTD_d_windowLogMax, where the runtime has zstd.
const ZSTD_COMPRESSION_LEVEL = 100;
const ZSTD_WINDOW_LOG_MAX = 100;
/** A zstd window of at most 8 MiB, as RFC 9659 (3) bounds the coding; Node's decoder would take 128 MiB. */
const ZSTD_DECODER_OPTIONS = { params: { [ZSTD_WINDOW_LOG_MAX]: 23 } };

/** The codings this runtime has, in the order a tie between them goes. */
export const CODINGS: readonly Coding[] = CODING_NAMES.filter((coding) => coding !== 'zstd' || zstd !== null);

/**
 * Levels for speed: a JSON API is bound by its CPU, and the fastest level of each coding costs
 * a third to a half of the default's time for a few points of size (BENCHMARKS.md, content codings).
 */
const GZIP_OPTIONS: zlib.ZlibOptions = { level: 1 };
const BROTLI_QUALITY = 1;
const ZSTD_OPTIONS = { params: { [ZSTD_COMPRESSION_LEVEL]: 1 } };

type Compressor = (body: Buffer, done: (error: Error | null, result: Buffer) => void) => void;

const COMPRESSORS: Readonly<Record<Coding, Compressor>> = {
  zstd: (body, done) => zstd?.zstdCompress(body, ZSTD_OPTIONS, done),
  br: (body, done) =>
    zlib.brotliCompress(
      body,
      {
        params: {
          [zlib.constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
          [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.length,
        },
      },
      done,
    ),
  gzip: (body, done) => zlib.gzip(body, GZIP_OPTIONS, done),
  deflate: (body, done) => zlib.deflate(body, GZIP_OPTIONS, done),
};

/**
 * Compressions under way at once, as many as libuv's threadpool runs by default. Each holds its
 * coder's state (a quarter of a MiB for gzip, half a MiB for brotli) from the moment it is made,
 * though the pool runs no more than these at a time: 1,200 answers of 150 KiB compressed at once
 * would hold 650 MiB. The others wait here in turn, holding only their body.
 */
const COMPRESSIONS_AT_ONCE = 4;
const compressions = new Turns(COMPRESSIONS_AT_ONCE);

/** Compresses a whole answer in `coding`, off the event loop, in turn. */
export function compress(coding: Coding, body: Buffer, done: (error: Error | null, result: Buffer) => void): void {
  compressions.take(() =>
    COMPRESSORS[coding](body, (error, result) => {
      compressions.release();
      done(error, result);
    }),
  );
}

/** A decoder, and how many of the bytes written to it it has read: it stops where its stream ends. */
export type Decoder = Transform & { readonly bytesWritten: number };

/**
 * A new decoder of `coding`, where the runtime has it; `deflate` is the zlib format, as HTTP's coding
 * is. Each decodes one whole stream of its format: gzip one or more members (RFC 1952, 2.2), zstd
 * one frame (`zstdFrames` splits a body into its frames), deflate and br one stream.
 */
export function decoderOf(coding: string): Decoder | null {
  switch (coding) {
    case 'gzip':
    case 'x-gzip':
      return zlib.createGunzip();
    case 'deflate':
      return zlib.createInflate();
    case 'br':
      return zlib.createBrotliDecompress();
    case 'zstd':
      return zstd?.createZstdDecompress(ZSTD_DECODER_OPTIONS) ?? null;
    default:
      return null;
  }
}

const ZSTD_MAGIC = 0xfd2fb528;
/** Skippable frames' magic numbers are 0x184D2A50 to 0x184D2A5F. */
const ZSTD_SKIPPABLE_MAGIC = 0x184d2a50;
/** The size of a frame header's dictionary ID, by its flag. */
const ZSTD_DICTIONARY_ID_SIZES = [0, 1, 2, 4] as const;
const ZSTD_RLE_BLOCK = 1;
const ZSTD_RESERVED_BLOCK = 3;

/**
 * The frames of a zstd body that hold data, each whole, without its skippable frames (RFC 8878,
 * 3.1); or null where the body is not one or more whole frames: empty, cut short, or with bytes
 * after a frame that begin none. Node's decoder ends with the frame it decodes, and Node 22's takes
 * a frame cut short for a whole one: the frames are found here, from their block headers.
 */
export function zstdFrames(body: Buffer): Buffer[] | null {
  const frames: Buffer[] = [];
  let at = 0;
  while (at < body.length) {
    if (at + 8 > body.length) return null;
    const magic = body.readUInt32LE(at);
    if (magic >>> 4 === ZSTD_SKIPPABLE_MAGIC >>> 4) {
      at += 8 + body.readUInt32LE(at + 4);
      continue;
    }
    if (magic !== ZSTD_MAGIC) return null;
    const end = zstdFrameEnd(body, at);
    if (end === null) return null;
    frames.push(body.subarray(at, end));
    at = end;
  }
  return at === body.length && at > 0 ? frames : null;
}

/**
 * Where the zstd frame that starts at `start` ends, from its header and its blocks' headers (RFC
 * 8878, 3.1.1); null if it is cut short or has a block of the reserved type.
 */
function zstdFrameEnd(body: Buffer, start: number): number | null {
  const descriptor = body[start + 4] as number;
  const singleSegment = (descriptor >> 5) & 1;
  const contentSizeFlag = descriptor >> 6;
  const contentSizeSize = contentSizeFlag === 0 ? singleSegment : 1 << contentSizeFlag;
  let at = start + 5 + (1 - singleSegment) + (ZSTD_DICTIONARY_ID_SIZES[descriptor & 3] as number) + contentSizeSize;
  let last = false;
  while (!last) {
    if (at + 3 > body.length) return null;
    const header = body.readUIntLE(at, 3);
    const type = (header >> 1) & 3;
    if (type === ZSTD_RESERVED_BLOCK) return null;
    last = (header & 1) === 1;
    at += 3 + (type === ZSTD_RLE_BLOCK ? 1 : header >> 3);
  }
  // The content checksum's flag is its size: 4 bytes or none.
  const end = at + (descriptor & 4);
  return end <= body.length ? end : null;
}

/** A quality value (RFC 9110, 12.4.2): 0 to 1, at most three decimals. */
const QVALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/;

/** One element of Accept-Encoding: a coding (or `*`), and its `q` weight. */
const ELEMENT = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+)[ \t]*(?:;[ \t]*[qQ][ \t]*=[ \t]*([^ \t;]*)[ \t]*)?$/;

/** Answers of recent headers: a few values make up almost every request's. */
const PREFERENCES = new Map<string, Coding | null>();
const PREFERENCES_MAX = 64;
const CACHED_HEADER_MAX = 256;

/**
 * The coding an answer goes out in for a request's Accept-Encoding, or null for none (identity), per
 * RFC 9110, 12.5.3: without the header, no preference, so none; each coding has the weight it is
 * given, else that of `*`, else 0 (not acceptable); the heaviest above 0 wins, a tie going to the
 * order of CODINGS; identity wins only where the client weighs it above that coding. An element
 * that is not a coding with at most a `q` weight is ignored; `x-gzip` is `gzip` (8.4.1.3).
 */
export function preferredCoding(header: string | readonly string[] | undefined): Coding | null {
  if (header === undefined) return null;
  const value = typeof header === 'string' ? header : header.join(',');
  const known = PREFERENCES.get(value);
  if (known !== undefined) return known;
  const preferred = negotiate(value);
  if (value.length <= CACHED_HEADER_MAX) {
    if (PREFERENCES.size >= PREFERENCES_MAX) PREFERENCES.clear();
    PREFERENCES.set(value, preferred);
  }
  return preferred;
}

function negotiate(header: string): Coding | null {
  const weights = new Map<string, number>();
  for (const element of listElements(header)) {
    const match = ELEMENT.exec(element);
    if (match === null) continue;
    const [, token = '', q] = match;
    if (q !== undefined && !QVALUE.test(q)) continue;
    const name = token.toLowerCase();
    weights.set(name === 'x-gzip' ? 'gzip' : name, q === undefined ? 1 : Number(q));
  }
  const any = weights.get('*') ?? 0;
  let best: Coding | null = null;
  let bestWeight = 0;
  for (const coding of CODINGS) {
    const weight = weights.get(coding) ?? any;
    if (weight > bestWeight) {
      best = coding;
      bestWeight = weight;
    }
  }
  const identity = weights.get('identity');
  return identity !== undefined && identity > bestWeight ? null : best;
}

/**
 * The strong entity tag of an answer sent in `coding`: a tag is never shared by two codings (RFC 9110,
 * 8.8.3), so `"3"` sent in gzip is `"3-gzip"`. A weak tag stays as it is.
 */
export function codedTag(tag: string, coding: Coding): string {
  return tag.startsWith('"') && tag.endsWith('"') && tag.length >= 2 ? `${tag.slice(0, -1)}-${coding}"` : tag;
}

/** The opaque part of a tag that `codedTag` made, without its coding: `3-gzip` is `3`; any other stays. */
export function uncodedOpaque(opaque: string): string {
  const dash = opaque.lastIndexOf('-');
  return dash !== -1 && (CODING_NAMES as readonly string[]).includes(opaque.slice(dash + 1))
    ? opaque.slice(0, dash)
    : opaque;
}
