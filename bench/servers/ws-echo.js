/** The WebSocket baseline: a bare `ws` server echoing every message, and a 200 for the bench to know it is up. */
import { createServer } from 'node:http';
import { WebSocketServer } from 'ws';

const server = createServer((_request, response) => {
  response.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end('{}');
});
const echo = new WebSocketServer({ server, perMessageDeflate: false });
echo.on('connection', (ws) => ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary })));
server.listen(Number(process.env.PORT), '127.0.0.1');
