/** The baseline of HTTPS/1.1: bare node:https with the bench's certificate, answering as node:http does. */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import { answerRequest } from './answer-request.js';

const tls = { cert: readFileSync(process.env.TLS_CERT_FILE), key: readFileSync(process.env.TLS_KEY_FILE) };
createServer(tls, answerRequest).listen(Number(process.env.PORT), '127.0.0.1');
