/**
 * `--grpc`: a unary gRPC call, `helloworld.Greeter/SayHello`, of the service over h2c
 * (`HTTP2=true`, its production defaults) against a bare @grpc/grpc-js server serving the same
 * method from the same .proto (bench/servers/grpc-js.js). Both are driven by h2load with one fixed
 * request, the call as any gRPC client sends it: `POST`, `content-type: application/grpc`,
 * `te: trailers`, and a length-prefixed protobuf `HelloRequest{name: "Ada"}` as its body.
 */
import { connect } from 'node:http2';

/** The name every call sends: short enough that its length is one byte of protobuf. */
const NAME = 'Ada';

/** A gRPC message on the wire: a flag byte (0: not compressed), its length (4 bytes, big-endian), the message. */
function lengthPrefixed(message) {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(message.length, 1);
  return Buffer.concat([prefix, message]);
}

/** A message of one string field numbered 1 (`HelloRequest.name`, `HelloReply.message`) in protobuf: its tag, length and bytes. */
function stringField(text) {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length > 127) throw new Error('a length of one byte of protobuf (a varint) is at most 127');
  return Buffer.concat([Buffer.from([0x0a, bytes.length]), bytes]);
}

/** The call h2load sends, as bench/load.js's runH2load takes a request. */
export const SAY_HELLO = {
  name: 'helloworld.Greeter/SayHello',
  method: 'POST',
  path: '/helloworld.Greeter/SayHello',
  headers: { 'content-type': 'application/grpc', te: 'trailers' },
  body: lengthPrefixed(stringField(NAME)),
};

/** The reply every call must get, byte for byte: `HelloReply{message: "Hello, Ada!"}`, length-prefixed. */
export const REPLY = lengthPrefixed(stringField(`Hello, ${NAME}!`));

/** The bare server, as bench/run.js launches servers: ready once it answers SAY_HELLO. */
export const bareGrpcServer = (root) => ({
  key: 'grpc-js',
  label: '@grpc/grpc-js',
  cwd: root,
  script: 'bench/servers/grpc-js.js',
  env: {},
  protocol: 'h2c',
  firstRequest: SAY_HELLO,
});

/** One call of SAY_HELLO over h2c: the reply's bytes and the `grpc-status` of its trailers. */
async function callSayHello(base) {
  const session = connect(base);
  try {
    return await new Promise((resolve, reject) => {
      session.once('error', reject);
      const stream = session.request({ ':method': 'POST', ':path': SAY_HELLO.path, ...SAY_HELLO.headers });
      const chunks = [];
      let grpcStatus;
      // A call that fails at once sends its status in the headers (trailers-only), else in the trailers.
      const status = (fields) => {
        grpcStatus ??= fields['grpc-status'];
      };
      stream.on('response', status).on('trailers', status);
      stream.on('data', (chunk) => chunks.push(chunk));
      stream.on('end', () => resolve({ grpcStatus, reply: Buffer.concat(chunks) }));
      stream.on('error', reject);
      stream.end(SAY_HELLO.body);
    });
  } finally {
    session.close();
  }
}

/** Throws unless `server` answers SAY_HELLO with REPLY and status 0 (OK). */
export async function checkSayHello(server) {
  const { grpcStatus, reply } = await callSayHello(server.base);
  if (grpcStatus !== '0' || !reply.equals(REPLY)) {
    throw new Error(`${server.label}: SayHello answered grpc-status ${grpcStatus}, ${reply.toString('hex')}`);
  }
}

/** The report's lines: each server's calls per second, latency and CPU per call, the service first. */
export function grpcMarkdown(figures, { clients, streams, rounds, seconds }) {
  const [service, bare] = figures;
  const ms = (value) => (value < 10 ? value.toFixed(1) : value.toFixed(0));
  const row = ({ label, rps, mean, max, cpuMicros, peakRssMb }) =>
    `| ${label} | ${rps.toFixed(0)} | ${ms(mean)} / ${ms(max)} | ${cpuMicros.toFixed(0)} | ${peakRssMb.toFixed(1)} |`;
  return [
    `Unary gRPC, \`${SAY_HELLO.name}\` over h2c: h2load, one thread, ${clients} clients of ${streams} concurrent streams each, ${rounds} alternating rounds of ${seconds} s; calls/s and CPU per call are the medians of the rounds, latency the median of the rounds' mean time for a call and the worst round's longest (h2load gives no percentiles). Every call of every round got its whole reply, and the service counted every call OK.`,
    '',
    '| server | calls/s | mean / max ms | CPU µs/call | peak RSS MB |',
    '|---|---|---|---|---|',
    row(service),
    row(bare),
    '',
    `- ${service.label} / ${bare.label}: calls/s ${(service.rps / bare.rps).toFixed(2)}, CPU per call ${(service.cpuMicros / bare.cpuMicros).toFixed(2)} ×.`,
    `- Idle RSS a second after the first answer (MB): ${figures.map(({ label, idleRssMb }) => `${label} ${idleRssMb.toFixed(1)}`).join(', ')}.`,
  ];
}
