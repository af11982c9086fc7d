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
  createZstdDecompress(): Transform;
}
const zstd = typeof (zlib as Partial<Zstd>).zstdCompress === 'function' ? (zlib as unknown as Zstd) : null;
// ZSTD_c_compressionLevel, where the runtime has zstd.
const ZSTD_COMPRESSION_LEVEL = 100;

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

/** A new decoder of `coding`, where the runtime has it; `deflate` is the zlib format, as HTTP's coding is. */
export function decoderOf(coding: string): Transform | null {
  switch (coding) {
    case 'gzip':
    case 'x-gzip':
      return zlib.createGunzip();
    case 'deflate':
      return zlib.createInflate();
    case 'br':
      return zlib.createBrotliDecompress();
    case 'zstd':
      return zstd?.createZstdDecompress() ?? null;
    default:
      return null;
  }
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
