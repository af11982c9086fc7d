import type { Report } from '../../packages/conformance/src/index.js';

/** The failures and skips of a report, one line each, for an assertion message. */
export function notPassed(report: Report): string[] {
  return report.results
    .filter((result) => result.outcome !== 'pass')
    .map((result) => `${result.outcome} ${result.id}: ${result.expected ?? result.reason} | ${result.actual ?? ''}`);
}

/** What a run over HTTP/1.1 leaves out: the HTTP/2 checks need `http2: true`. */
export const SKIPPED_OVER_HTTP1 = [
  'skip http2.protocol: needs --http2 | ',
  'skip http2.connection-specific-fields: needs --http2 | ',
  'skip http2.multiplexed: needs --http2 | ',
  'skip http2.body-without-length: needs --http2 | ',
];
