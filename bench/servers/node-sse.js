/**
 * The baseline of the event stream: bare node:http writing what GET /api/events writes (the same
 * events, timestamps and schedule, the stream's own headers), and nothing else: no validation, no
 * hooks, no log line, no metrics.
 */
import { createServer } from 'node:http';
import { localDateTime } from '../../dist/lib/local-time.js';

const HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store',
  'x-accel-buffering': 'no',
};

createServer((request, response) => {
  const url = new URL(request.url ?? '/', 'http://localhost');
  if (url.pathname !== '/api/events') {
    response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    return;
  }
  const count = Number(url.searchParams.get('count') ?? 10);
  const interval = Number(url.searchParams.get('interval_ms') ?? 1000);
  const greeting = JSON.stringify(`Hello, ${url.searchParams.get('name') ?? 'World'}!`);
  response.writeHead(200, HEADERS);
  let next = 1;
  let due = performance.now();
  let timer;
  const tick = () => {
    let chunk = '';
    while (next <= count && due <= performance.now() + 1) {
      chunk += `id: ${next}\nevent: greeting\ndata: {"id":${next},"greeting":${greeting},"timestamp":"${localDateTime()}"}\n\n`;
      next += 1;
      due += interval;
    }
    if (chunk !== '') response.write(chunk);
    if (next > count) response.end();
    else timer = setTimeout(tick, Math.max(0, due - performance.now()));
  };
  response.on('close', () => clearTimeout(timer));
  tick();
}).listen(Number(process.env.PORT), '127.0.0.1');
