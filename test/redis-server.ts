import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { freePort } from './ports.js';

/** Whether `redis-server` is on PATH; without it the Redis suites skip, saying so once. */
export const REDIS_SERVER_MISSING = spawnSync('redis-server', ['--version']).error !== undefined;
export const REDIS_SKIP_REASON = 'Redis tests need redis-server';
if (REDIS_SERVER_MISSING) process.stdout.write(`SKIPPED: ${REDIS_SKIP_REASON}\n`);

/** A TLS port's certificate, key and CA, and whether clients must show a certificate the CA signed. */
export interface RedisTls {
  cert: string;
  key: string;
  ca: string;
  authClients: 'yes' | 'no' | 'optional';
}

/**
 * A throw-away redis-server on a free loopback port, with nothing saved to disk, that a test
 * can kill, pause and start again on the same port; with `tls`, that port is its only one, a
 * TLS port.
 */
export class RedisServer {
  #process: ChildProcess | null = null;

  private constructor(
    readonly port: number,
    readonly tls: RedisTls | null,
  ) {}

  static async start(tls: RedisTls | null = null): Promise<RedisServer> {
    const server = new RedisServer(await freePort(), tls);
    await server.restart();
    return server;
  }

  /** Whether it has been started and not killed since. */
  get running(): boolean {
    return this.#process !== null;
  }

  get url(): string {
    return `${this.tls === null ? 'redis' : 'rediss'}://127.0.0.1:${this.port}`;
  }

  /** Starts it (again) and resolves once it accepts connections. */
  async restart(): Promise<void> {
    const port = this.tls === null ? ['--port', String(this.port)] : ['--port', '0', '--tls-port', String(this.port)];
    const tls =
      this.tls === null
        ? []
        : [
            ...['--tls-cert-file', this.tls.cert, '--tls-key-file', this.tls.key],
            ...['--tls-ca-cert-file', this.tls.ca, '--tls-auth-clients', this.tls.authClients],
          ];
    const child = spawn('redis-server', [...port, ...tls, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    this.#process = child;
    let output = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout?.on('data', (chunk: Buffer) => {
        output += chunk.toString('utf8');
        if (output.includes('Ready to accept connections')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${output}`)));
    });
    child.stdout?.resume();
  }

  /** Kills it at once, as a crash would: connections drop, nothing is saved. */
  async kill(): Promise<void> {
    const child = this.#process;
    this.#process = null;
    if (child === null || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }

  /** Stops it answering while its connections stay open, as a hung server would. */
  pause(): void {
    this.#process?.kill('SIGSTOP');
  }

  resume(): void {
    this.#process?.kill('SIGCONT');
  }
}

/**
 * A proxy in front of a Redis that passes everything both ways until told to flood: then a
 * profile read (HMGET) gets, in place of Redis's reply, one declaring a gigabyte, streamed as fast
 * as the client takes it, as a Redis gone wrong (or anything on the way to one) would. It counts
 * the connections its clients open.
 */
export class FloodingRedisProxy {
  flooding = false;
  connections = 0;
  readonly #server: Server;

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(redisPort: number): Promise<FloodingRedisProxy> {
    const server = createServer();
    const proxy = new FloodingRedisProxy(server);
    server.on('connection', (client) => proxy.#relay(client, redisPort));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return proxy;
  }

  get url(): string {
    return `redis://127.0.0.1:${(this.#server.address() as { port: number }).port}`;
  }

  #relay(client: Socket, redisPort: number): void {
    this.connections += 1;
    const upstream = connect(redisPort, '127.0.0.1');
    upstream.pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    client.on('data', (chunk: Buffer) => {
      if (!(this.flooding && chunk.includes('hmget'))) {
        upstream.write(chunk);
        return;
      }
      upstream.unpipe(client);
      upstream.destroy();
      const bytes = Buffer.alloc(64 * 1024, 'x');
      client.write(`*2\r\n$${2 ** 30}\r\n`);
      const more = () => {
        while (!client.destroyed && client.write(bytes));
      };
      client.on('drain', more);
      more();
    });
  }

  close(): void {
    this.#server.close();
  }
}
