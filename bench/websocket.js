/**
 * `--streams`, the WebSocket's part: the echo of the service against a bare `ws` server
 * (bench/servers/ws-echo.js), messages per second over one connection and over 100, in
 * alternating rounds, and the memory each open connection holds.
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocket } from 'ws';

/** Messages each connection keeps in flight: enough to measure the server, not the round trip. */
const WINDOW = 8;
/** A short text message, as a chat or a game state would be. */
const MESSAGE = 'x'.repeat(64);
/** How many idle connections the memory per connection is measured over. */
const IDLE_CONNECTIONS = 500;
const KIB = 1024;

function rssBytes(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) * 1024;
}

/** `count` open WebSocket connections to `url`. */
async function openAll(url, count) {
  const sockets = [];
  // A hundred handshakes at a time: the listen backlog is not what is measured.
  for (let i = 0; i < count; i += 100) {
    const batch = Array.from(
      { length: Math.min(100, count - i) },
      () => new WebSocket(url, { perMessageDeflate: false }),
    );
    await Promise.all(batch.map((ws) => once(ws, 'open')));
    sockets.push(...batch);
  }
  return sockets;
}

async function closeAll(sockets) {
  await Promise.all(
    sockets.map((ws) => {
      const closed = once(ws, 'close');
      ws.close();
      return closed;
    }),
  );
}

/** Echoes through `connections` connections for `seconds`, WINDOW messages in flight on each: messages per second. */
async function echoRate(url, connections, seconds) {
  const sockets = await openAll(url, connections);
  let echoed = 0;
  let running = true;
  for (const ws of sockets) {
    ws.on('message', () => {
      echoed += 1;
      if (running) ws.send(MESSAGE);
    });
  }
  const started = performance.now();
  for (const ws of sockets) for (let i = 0; i < WINDOW; i++) ws.send(MESSAGE);
  await sleep(seconds * 1000);
  running = false;
  const rate = echoed / ((performance.now() - started) / 1000);
  await closeAll(sockets);
  return rate;
}

/** The server's RSS grown by IDLE_CONNECTIONS open connections, per connection, in KiB. */
async function memoryPerConnection(server, url) {
  await sleep(500);
  const before = rssBytes(server.child.pid);
  const sockets = await openAll(url, IDLE_CONNECTIONS);
  await sleep(1000);
  const after = rssBytes(server.child.pid);
  await closeAll(sockets);
  return (after - before) / IDLE_CONNECTIONS / KIB;
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

/**
 * The WebSocket echo of `service` (a launched server of run.js) against `bare`, `rounds`
 * alternating rounds of `seconds` each per number of connections.
 */
export async function websocketEcho(service, bare, { rounds, seconds }) {
  const servers = [
    { key: 'service', server: service, url: `${service.base.replace(/^http/, 'ws')}/api/echo/websocket` },
    { key: 'bare', server: bare, url: `${bare.base.replace(/^http/, 'ws')}/` },
  ];
  const rates = { 1: { service: [], bare: [] }, 100: { service: [], bare: [] } };
  for (const { url } of servers) await echoRate(url, 10, 1); // warm-up
  for (let round = 1; round <= rounds; round++) {
    for (const connections of [1, 100]) {
      for (const { key, url } of servers) rates[connections][key].push(await echoRate(url, connections, seconds));
    }
    process.stderr.write(`round ${round}/${rounds}: WebSocket echo\n`);
  }
  const memory = {};
  for (const { key, server, url } of servers) memory[key] = await memoryPerConnection(server, url);
  const figures = (connections) => ({
    service: median(rates[connections].service),
    bare: median(rates[connections].bare),
  });
  return {
    window: WINDOW,
    messageBytes: MESSAGE.length,
    idleConnections: IDLE_CONNECTIONS,
    one: figures(1),
    hundred: figures(100),
    memoryKiB: memory,
  };
}

/** The report's lines for the WebSocket echo. */
export function websocketMarkdown(ws) {
  const row = (label, { service, bare }) =>
    `| ${label} | ${service.toFixed(0)} | ${bare.toFixed(0)} | ${(service / bare).toFixed(2)} |`;
  return [
    '',
    `WebSocket echo: messages of ${ws.messageBytes} bytes, ${ws.window} in flight on each connection, messages echoed per second (median of the rounds):`,
    '',
    '| connections | service msg/s | bare ws msg/s | service / bare |',
    '|---|---|---|---|',
    row('1', ws.one),
    row('100', ws.hundred),
    '',
    `- Memory per open WebSocket, RSS over ${ws.idleConnections} idle connections (KiB): service ${ws.memoryKiB.service.toFixed(1)}, bare ws ${ws.memoryKiB.bare.toFixed(1)}.`,
  ];
}
