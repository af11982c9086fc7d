import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { Readable } from 'node:stream';

/**
 * Meets `Expect: 100-continue` (RFC 9110, 10.1.1) once the body is first read, not as the request
 * comes, as Node would: a request refused on its headers alone (401, 404, 413, 415, 429, ...) gets
 * its final status and no 100, so its client need not send a body nobody reads. Node then closes an
 * HTTP/1.1 connection after that answer, as the body may still come. A request whose framing says
 * it has no body gets its 100 at once, as before: there is nothing to wait for.
 */
export function continueWhenRead(
  request: IncomingMessage | Http2ServerRequest,
  response: ServerResponse | Http2ServerResponse,
): void {
  if (bodiless(request)) response.writeContinue();
  else continueOnFirstRead(request, response);
}

/**
 * `100 Continue` once `body` is first read (Readable's 'resume': its reader started the flow), the
 * request's own or the one read for it from its connection. After the answer, Node's discarding of
 * an unread body resumes it too: then no 100 is due.
 */
export function continueOnFirstRead(body: Readable, response: ServerResponse | Http2ServerResponse): void {
  body.once('resume', () => {
    if (!response.headersSent) response.writeContinue();
  });
}

function bodiless(request: IncomingMessage | Http2ServerRequest): boolean {
  if ('stream' in request) return request.stream.endAfterHeaders;
  const { headers } = request;
  return headers['transfer-encoding'] === undefined && Number(headers['content-length'] ?? 0) === 0;
}
