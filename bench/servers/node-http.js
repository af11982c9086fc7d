/** The baseline: bare node:http answering the benchmark's endpoints, and nothing else. */
import { createServer } from 'node:http';
import { answerRequest } from './answer-request.js';

createServer(answerRequest).listen(Number(process.env.PORT), '127.0.0.1');
