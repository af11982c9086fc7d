/**
 * The baseline of gRPC: a bare @grpc/grpc-js server (h2c, no TLS) serving helloworld.Greeter/SayHello
 * from the same .proto as the service, loaded by @grpc/proto-loader, answering `Hello, <name>!` as
 * the service does: no validation, rate limit, log line, metrics or span.
 */
import { fileURLToPath } from 'node:url';
import { loadPackageDefinition, Server, ServerCredentials } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';

const proto = fileURLToPath(new URL('../../proto/vendor/helloworld/helloworld.proto', import.meta.url));
const { helloworld } = loadPackageDefinition(loadSync(proto));

const server = new Server();
server.addService(helloworld.Greeter.service, {
  sayHello({ request }, callback) {
    callback(null, { message: `Hello, ${request.name}!` });
  },
});
server.bindAsync(`127.0.0.1:${process.env.PORT}`, ServerCredentials.createInsecure(), (error) => {
  if (error) throw error;
});
