import type { Report } from '../../packages/conformance/src/index.js';

/** The failures and skips of a report, one line each, for an assertion message. */
export function notPassed(report: Report): string[] {
  return report.results
    .filter((result) => result.outcome !== 'pass')
    .map((result) => `${result.outcome} ${result.id}: ${result.expected ?? result.reason} | ${result.actual ?? ''}`);
}

/** What a run with `grpc: true` over HTTP/1.1 leaves out: gRPC itself, and reflection's bidirectional stream. */
export const GRPC_SKIPPED_OVER_HTTP1 = [
  'skip grpc.http2-say-hello: needs --http2: gRPC itself runs over HTTP/2 only (the Connect checks run over HTTP/1.1) | ',
  'skip grpc.http2-status-details: needs --http2: gRPC itself runs over HTTP/2 only (the Connect checks run over HTTP/1.1) | ',
  'skip grpc.http2-unimplemented: needs --http2: gRPC itself runs over HTTP/2 only (the Connect checks run over HTTP/1.1) | ',
  'skip grpc.reflection: needs --http2: reflection is a bidirectional stream, which the Connect protocol carries over HTTP/2 only | ',
];

/** What a run with `grpc: true` over HTTP/1.1 leaves out: the HTTP/2 checks need `http2: true`. */
export const SKIPPED_OVER_HTTP1 = [
  'skip http2.protocol: needs --http2 | ',
  'skip http2.connection-specific-fields: needs --http2 | ',
  'skip http2.multiplexed: needs --http2 | ',
  'skip http2.body-without-length: needs --http2 | ',
  ...GRPC_SKIPPED_OVER_HTTP1,
];
