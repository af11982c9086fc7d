/**
 * The headers' own price: the ways node:http can write one answer's headers, and what Fastify's
 * reply does with each header, measured in one process with no network: each answer is a fresh
 * ServerResponse whose head and body go to a socket that drops them.
 *
 *   node bench/headers.js                         # ns per answer of every way, and their bytes checked
 *   node bench/headers.js --instructions          # and instructions per answer (valgrind's callgrind)
 *   node bench/headers.js --way fastify --answers 20000    # one way, N answers (what callgrind runs)
 *
 * The header set is the service's on `GET /api/hello`, read from a live answer of `dist/server.js`
 * (build it first): its fixed part, a request id, the rate limit's three, Content-Type and
 * Content-Length. Every way but `none` must write the same bytes; `none` writes only Content-Type
 * and Content-Length, as bare node:http does, so each way's headers cost what it takes beyond it.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { request as httpRequest, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const require = createRequire(import.meta.url);
const Reply = require('fastify/lib/reply.js');
const { kReplyHeaders } = require('fastify/lib/symbols.js');

const root = fileURLToPath(new URL('..', import.meta.url));
const self = fileURLToPath(import.meta.url);

const { values: options } = parseArgs({
  options: {
    way: { type: 'string' },
    answers: { type: 'string', default: '200000' },
    headers: { type: 'string' },
    instructions: { type: 'boolean', default: false },
    rounds: { type: 'string', default: '5' },
  },
});

/** Head lines node:http writes itself, the same whatever way the rest were given. */
const OWN = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding']);

/** The header fields of one live `GET /api/hello` of the built service, in its order. */
async function liveHeaders() {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const child = spawn(process.execPath, ['dist/server.js'], {
    cwd: root,
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '2147483647' },
    stdio: 'ignore',
  });
  try {
    for (let tries = 0; ; tries++) {
      try {
        return await new Promise((resolve, reject) => {
          httpRequest(`http://127.0.0.1:${port}/api/hello`, (response) => {
            response.resume();
            const raw = response.rawHeaders;
            const fields = [];
            for (let i = 0; i < raw.length; i += 2)
              if (!OWN.has(raw[i].toLowerCase())) fields.push([raw[i], raw[i + 1]]);
            resolve(fields);
          })
            .on('error', reject)
            .end();
        });
      } catch (error) {
        if (tries > 100) throw error;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  } finally {
    child.kill('SIGTERM');
  }
}

/** What one answer writes: a fresh request id and a counted RateLimit-Remaining, as the service's would be. */
const BODY = '{"message":"Hello, World!","timestamp":"2026-11-27T12:00:00.000"}';
const IDS = Array.from({ length: 1024 }, () => randomUUID());
/** The fields set per answer, in the service's order, after its fixed ones. */
const VARIABLE = [
  'x-request-id',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'content-type',
  'content-length',
];

/**
 * The ways, each a function that writes one answer's head and body with the header set given:
 * its fixed part kept ready (an object, a list of pairs, a flat array of strings), the rest set
 * per answer by name, as a server would.
 */
function makeWays(fields) {
  const fixed = fields.filter(([name]) => !VARIABLE.includes(name));
  const variable = fields.filter(([name]) => VARIABLE.includes(name)).map(([name]) => name);
  if (fields.slice(0, fixed.length).some(([name]) => VARIABLE.includes(name)) || variable.join() !== VARIABLE.join())
    throw new Error(
      `the service's fields are no longer its fixed ones, then ${VARIABLE.join(', ')}: ${fields.map(([name]) => name).join(', ')}`,
    );
  const value = (name) => fields.find(([field]) => field === name)[1];
  const [LIMIT, RESET, TYPE] = [value('ratelimit-limit'), value('ratelimit-reset'), value('content-type')];
  const fixedObject = Object.fromEntries(fixed);
  const fixedPairs = Object.entries(fixedObject);
  const fixedFlat = fixedPairs.flat();
  let counted = 0;
  const id = () => IDS[++counted & 1023];
  const remaining = () => String(2_147_483_646 - (counted % 1_000_000));
  const length = () => String(Buffer.byteLength(BODY));
  /** A Fastify 5 reply on the response, with Fastify's own `header`, `headers` and header object. */
  const fastifyReply = (response) => {
    const reply = Object.create(Reply.prototype);
    reply.raw = response;
    reply[kReplyHeaders] = {};
    return reply;
  };
  /** The rest of a Fastify answer: the request id and the rate limit by `reply.header`, then its send path. */
  const fastifySend = (reply, response) => {
    reply.header('x-request-id', id());
    reply.header('ratelimit-limit', LIMIT);
    reply.header('ratelimit-remaining', remaining());
    reply.header('ratelimit-reset', RESET);
    // Fastify's send path stores these two straight into its object, then writes it in one `writeHead`.
    reply[kReplyHeaders]['content-type'] = TYPE;
    reply[kReplyHeaders]['content-length'] = length();
    response.writeHead(200, reply[kReplyHeaders]);
    response.end(BODY);
  };
  return {
    /** Bare node:http: Content-Type and Content-Length only, as one object. */
    none: (response) => {
      response.writeHead(200, { 'content-type': TYPE, 'content-length': length() });
      response.end(BODY);
    },
    /** `writeHead(status, object)`, the object made per answer, its keys set one by one. */
    object: (response) => {
      const headers = {};
      for (const [name, field] of fixedPairs) headers[name] = field;
      headers['x-request-id'] = id();
      headers['ratelimit-limit'] = LIMIT;
      headers['ratelimit-remaining'] = remaining();
      headers['ratelimit-reset'] = RESET;
      headers['content-type'] = TYPE;
      headers['content-length'] = length();
      response.writeHead(200, headers);
      response.end(BODY);
    },
    /** `setHeader` one by one, then `writeHead(status)`. */
    setHeader: (response) => {
      for (const [name, field] of fixedPairs) response.setHeader(name, field);
      response.setHeader('x-request-id', id());
      response.setHeader('ratelimit-limit', LIMIT);
      response.setHeader('ratelimit-remaining', remaining());
      response.setHeader('ratelimit-reset', RESET);
      response.setHeader('content-type', TYPE);
      response.setHeader('content-length', length());
      response.writeHead(200);
      response.end(BODY);
    },
    /** `writeHead(status, flat array)`: the fixed part a ready array of strings, copied, the rest pushed. */
    flatArray: (response) => {
      const head = fixedFlat.slice();
      head.push('x-request-id', id(), 'ratelimit-limit', LIMIT, 'ratelimit-remaining', remaining());
      head.push('ratelimit-reset', RESET, 'content-type', TYPE, 'content-length', length());
      response.writeHead(200, head);
      response.end(BODY);
    },
    /** `writeHead(status, [[name, value], ...])`: the fixed pairs ready, the rest added. */
    pairs: (response) => {
      const head = fixedPairs.slice();
      head.push(['x-request-id', id()], ['ratelimit-limit', LIMIT], ['ratelimit-remaining', remaining()]);
      head.push(['ratelimit-reset', RESET], ['content-type', TYPE], ['content-length', length()]);
      response.writeHead(200, head);
      response.end(BODY);
    },
    /** Fastify 5 as the service uses it: its fixed part a ready list of pairs walked with `reply.header`. */
    fastify: (response) => {
      const reply = fastifyReply(response);
      for (const [name, field] of fixedPairs) reply.header(name, field);
      fastifySend(reply, response);
    },
    /** Fastify, the fixed part a flat array walked by index with `reply.header`. */
    fastifyFlat: (response) => {
      const reply = fastifyReply(response);
      for (let i = 0; i < fixedFlat.length; i += 2) reply.header(fixedFlat[i], fixedFlat[i + 1]);
      fastifySend(reply, response);
    },
    /** Fastify, the fixed part one object given to `reply.headers`. */
    fastifyHeaders: (response) => {
      const reply = fastifyReply(response);
      reply.headers(fixedObject);
      fastifySend(reply, response);
    },
    /** Fastify, the fixed part set on the raw response (`setHeader`): its `writeHead` then sets its own one by one too. */
    fastifyRaw: (response) => {
      const reply = fastifyReply(response);
      for (const [name, field] of fixedPairs) response.setHeader(name, field);
      fastifySend(reply, response);
    },
    /** Fastify with no fixed part: what the rest of its answer costs, to tell what it pays per fixed header. */
    fastifyNoFixed: (response) => {
      fastifySend(fastifyReply(response), response);
    },
  };
}

/** A socket that takes the answer's bytes and drops them (or keeps them, to compare). */
function socket(kept) {
  const sink = new Writable({
    write(chunk, _encoding, done) {
      kept?.push(Buffer.from(chunk));
      done();
    },
    writev(chunks, done) {
      for (const { chunk } of chunks) kept?.push(Buffer.from(chunk));
      done();
    },
  });
  sink.setMaxListeners(0);
  return sink;
}

const REQUEST = { method: 'GET', httpVersionMajor: 1, httpVersionMinor: 1, headers: {} };

/** Writes `count` answers the way given, each on a fresh ServerResponse, a turn of the event loop for every 16 as a server's would be. */
async function answer(way, count, sink) {
  for (let i = 0; i < count; i++) {
    const response = new ServerResponse(REQUEST);
    response.shouldKeepAlive = true;
    response.assignSocket(sink);
    way(response);
    response.detachSocket(sink);
    if ((i & 15) === 15) await new Promise(setImmediate);
  }
}

/** The bytes one answer of a way puts on the wire, its Date line masked. */
async function bytesOf(way) {
  const kept = [];
  await answer(way, 1, socket(kept));
  return Buffer.concat(kept)
    .toString('latin1')
    .replace(/\r\nDate: [^\r]*\r\n/, '\r\nDate: -\r\n');
}

/** Instructions the process runs to write `count` answers the way given (valgrind's callgrind, whole process). */
function instructions(way, count, headers) {
  const args = ['--tool=callgrind', '--callgrind-out-file=/dev/null', process.execPath, self];
  const child = spawn('valgrind', [...args, '--way', way, '--answers', String(count), '--headers', headers]);
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve, reject) =>
    child.on('close', () => {
      const collected = /Collected : (\d+)/.exec(stderr);
      if (collected === null) reject(new Error(`callgrind gave no count for ${way}: ${stderr.slice(-500)}`));
      else resolve(Number(collected[1]));
    }),
  );
}

/** Instructions per answer of a way: two runs of different lengths subtracted, so that start-up and compilation cancel out. */
async function instructionsPerAnswer(way, headers) {
  const [few, many] = [10_000, 30_000];
  const [short, long] = await Promise.all([instructions(way, few, headers), instructions(way, many, headers)]);
  return (long - short) / (many - few);
}

async function main() {
  if (options.way !== undefined) {
    const ways = makeWays(JSON.parse(options.headers));
    await answer(ways[options.way], Number(options.answers), socket());
    return;
  }
  const fields = await liveHeaders();
  const ways = makeWays(fields);
  const names = Object.keys(ways);
  console.log(
    `GET /api/hello: ${fields.length} fields, ${fields.filter(([name]) => !VARIABLE.includes(name)).length} fixed: ${fields.map(([name]) => name).join(', ')}`,
  );

  const masked = (text) => text.replace(/^(x-request-id|ratelimit-remaining): .*$/gm, '$1: -');
  const expected = masked(fields.map(([name, field]) => `${name}: ${field}`).join('\r\n'));
  for (const name of names.filter((way) => way !== 'none' && way !== 'fastifyNoFixed')) {
    const bytes = await bytesOf(ways[name]);
    const head = masked(bytes.slice(bytes.indexOf('\r\n') + 2, bytes.indexOf('\r\nDate: ')));
    if (head !== expected) throw new Error(`${name} writes other bytes than the service:\n${head}\n---\n${expected}`);
    if (!bytes.endsWith(`\r\n\r\n${BODY}`)) throw new Error(`${name} writes another body: ${bytes}`);
  }
  console.log(
    "bytes: every way but none writes the service's head lines, name for name, value for value, in its order",
  );

  const count = Number(options.answers);
  const sink = socket();
  const ns = Object.fromEntries(names.map((name) => [name, []]));
  for (const name of names) await answer(ways[name], count / 4, sink);
  for (let round = 0; round < Number(options.rounds); round++) {
    for (const name of names) {
      const started = process.hrtime.bigint();
      await answer(ways[name], count, sink);
      ns[name].push(Number(process.hrtime.bigint() - started) / count);
    }
  }
  const median = (list) => list.toSorted((a, b) => a - b)[Math.floor(list.length / 2)];
  const base = median(ns.none);
  const rows = [];
  for (const name of names) {
    const row = {
      way: name,
      'ns/answer': median(ns[name]).toFixed(0),
      'headers ns': (median(ns[name]) - base).toFixed(0),
    };
    if (options.instructions)
      row['instructions/answer'] = Math.round(await instructionsPerAnswer(name, JSON.stringify(fields)));
    rows.push(row);
  }
  if (options.instructions) {
    const none = rows[0]['instructions/answer'];
    for (const row of rows) row['headers instructions'] = row['instructions/answer'] - none;
  }
  console.table(rows);
}

await main();
