/**
 * The baseline of `--encodings`: bare node:http serving the OpenAPI document and the echo, each
 * compressed by node:zlib in the coding Accept-Encoding names, at the service's own level and by the
 * same call (`compress`), and every other endpoint as bench/servers/node-http.js does.
 */
import { createServer } from 'node:http';
import { buildApp } from '../../dist/app.js';
import { DEFAULT_CONFIG } from '../../dist/config/index.js';
import { CODINGS, compress } from '../../dist/lib/content-coding.js';
import { answerRequest } from './answer-request.js';
import * as answers from './answers.js';

// The service's own document, made once, as the service serves it.
const app = await buildApp({ ...DEFAULT_CONFIG, logLevel: 'silent' });
const documentText = Buffer.from((await app.inject('/openapi.json')).body);
await app.close();

/** Sends `body` in the coding the request names alone, plain otherwise. */
function send(request, response, body) {
  const coding = request.headers['accept-encoding'];
  if (!CODINGS.includes(coding)) {
    response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length });
    return response.end(body);
  }
  compress(coding, body, (error, coded) => {
    if (error !== null) return response.destroy(error);
    response.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'content-encoding': coding,
      'content-length': coded.length,
    });
    response.end(coded);
  });
}

createServer((request, response) => {
  if (request.url === '/openapi.json') return send(request, response, documentText);
  if (request.url === '/api/echo' && request.method === 'POST') {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      const received = JSON.parse(Buffer.concat(chunks).toString());
      send(request, response, Buffer.from(JSON.stringify(answers.echo(received))));
    });
    return;
  }
  answerRequest(request, response);
}).listen(Number(process.env.PORT), '127.0.0.1');
