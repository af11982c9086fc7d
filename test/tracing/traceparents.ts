/** W3C Trace Context headers for the tests: a valid one, and every form the specification says to ignore. */

export const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
export const PARENT_ID = '00f067aa0ba902b7';
export const VALID_TRACEPARENT = `00-${TRACE_ID}-${PARENT_ID}-01`;

/** Every form the specification says to ignore, with what is wrong with it. */
export const INVALID_TRACEPARENTS: [string, string][] = [
  ['version ff', `ff-${TRACE_ID}-${PARENT_ID}-01`],
  ['all-zero trace id', `00-${'0'.repeat(32)}-${PARENT_ID}-01`],
  ['all-zero parent id', `00-${TRACE_ID}-${'0'.repeat(16)}-01`],
  ['upper-case trace id', `00-${TRACE_ID.toUpperCase()}-${PARENT_ID}-01`],
  ['upper-case parent id', `00-${TRACE_ID}-${PARENT_ID.toUpperCase()}-01`],
  ['upper-case version', `0A-${TRACE_ID}-${PARENT_ID}-01`],
  ['upper-case flags', `00-${TRACE_ID}-${PARENT_ID}-0A`],
  ['a short trace id', `00-${TRACE_ID.slice(1)}-${PARENT_ID}-01`],
  ['a long parent id', `00-${TRACE_ID}-${PARENT_ID}0-01`],
  ['one-digit flags', `00-${TRACE_ID}-${PARENT_ID}-1`],
  ['version 00 with more after it', `${VALID_TRACEPARENT}-what-comes-next`],
  ['a later version with something but a dash after 55 characters', `cc-${TRACE_ID}-${PARENT_ID}-01x`],
  ['non-hex digits', `00-${TRACE_ID.replace('a', 'g')}-${PARENT_ID}-01`],
  ['underscores for dashes', VALID_TRACEPARENT.replaceAll('-', '_')],
  ['two headers joined', `${VALID_TRACEPARENT}, 00-${'1'.repeat(32)}-${PARENT_ID}-01`],
  ['the same header twice', `${VALID_TRACEPARENT}, ${VALID_TRACEPARENT}`],
  ['empty', ''],
  ['junk', 'not a traceparent'],
];
