import { randomFillSync } from 'node:crypto';

/**
 * W3C Trace Context Level 1 (https://www.w3.org/TR/trace-context/): reading `traceparent` and
 * `tracestate` as a service receiving a request must, and making span ids.
 */

/** A caller's span, as its `traceparent` names it. */
export interface TraceParent {
  /** 32 lower-case hex digits, not all zero. */
  traceId: string;
  /** The caller's span: 16 lower-case hex digits, not all zero. */
  parentId: string;
  /** The trace flags as a number; bit 0 is `sampled`. */
  flags: number;
}

const HEX = /^[0-9a-f]*$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);
/** The length of a version-00 header, which a later version's header starts with. */
const LENGTH = 55;

/**
 * The caller's span, or null for a header that is absent or unusable, which the specification
 * says to ignore (a new trace begins): a bad length, anything but lower-case hex, version `ff`,
 * all-zero ids, or more than one header (which Node joins with `, `). A version above 00 is read
 * as version 00 when its first 55 characters are one and what follows starts with `-`.
 */
export function parseTraceParent(header: string | undefined): TraceParent | null {
  if (header === undefined || header.length < LENGTH) return null;
  if (header[2] !== '-' || header[35] !== '-' || header[52] !== '-') return null;
  const version = header.slice(0, 2);
  if (version === 'ff' || !HEX.test(version)) return null;
  if (version === '00' ? header.length !== LENGTH : header.length > LENGTH && header[LENGTH] !== '-') return null;
  const traceId = header.slice(3, 35);
  const parentId = header.slice(36, 52);
  const flags = header.slice(53, 55);
  if (!HEX.test(traceId) || !HEX.test(parentId) || !HEX.test(flags)) return null;
  if (traceId === ZERO_TRACE || parentId === ZERO_SPAN) return null;
  return { traceId, parentId, flags: Number.parseInt(flags, 16) };
}

/** A `tracestate` key: a simple one, or `tenant@system`. */
const KEY = /^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})$/;
/** A value: 1 to 256 printable ASCII characters but `,` and `=`, not ending in a space. */
const VALUE = /^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;
const MAX_MEMBERS = 32;

/**
 * The vendors' entries that go with a valid `traceparent`, as one header (repeated headers are one
 * list, as HTTP joins them), or undefined when absent or malformed: an entry that breaks the
 * grammar, a key seen twice or more than 32 entries discard the whole header.
 */
export function parseTraceState(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const members: string[] = [];
  const keys = new Set<string>();
  for (const part of header.split(',')) {
    const member = part.trim();
    if (member === '') continue;
    const equals = member.indexOf('=');
    const key = member.slice(0, equals);
    if (equals === -1 || !KEY.test(key) || !VALUE.test(member.slice(equals + 1)) || keys.has(key)) return undefined;
    keys.add(key);
    members.push(member);
  }
  return members.length === 0 || members.length > MAX_MEMBERS ? undefined : members.join(',');
}

/** Random bytes made in batches: one system call for many span ids. */
const pool = Buffer.alloc(8 * 512);
let offset = pool.length;

/** A new span id: 16 lower-case hex digits, never all zero. */
export function newSpanId(): string {
  for (;;) {
    if (offset === pool.length) {
      randomFillSync(pool);
      offset = 0;
    }
    const id = pool.toString('hex', offset, offset + 8);
    offset += 8;
    if (id !== ZERO_SPAN) return id;
  }
}
