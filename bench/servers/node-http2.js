/**
 * The baseline of HTTP/2: bare node:http2 answering as node:http does, through its compatibility
 * API: h2c with prior knowledge, or h2 over TLS (ALPN) with TLS_CERT_FILE and TLS_KEY_FILE.
 */
import { readFileSync } from 'node:fs';
import { createSecureServer, createServer } from 'node:http2';
import { answerRequest } from './answer-request.js';

const { TLS_CERT_FILE: cert, TLS_KEY_FILE: key } = process.env;
const server =
  cert === undefined
    ? createServer(answerRequest)
    : createSecureServer({ cert: readFileSync(cert), key: readFileSync(key) }, answerRequest);
server.listen(Number(process.env.PORT), '127.0.0.1');
