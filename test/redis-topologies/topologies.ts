import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort } from '../ports.js';

/**
 * Throw-away Redis topologies on loopback, each in a temporary directory of its own, with the
 * timings shortened so that a failover takes seconds: a primary, a replica and three sentinels,
 * or a Cluster of three primaries and three replicas. Every process is SIGKILLed by `stop`, and
 * by the exit of the test process whatever happened.
 */

const BINARIES = ['redis-server', 'redis-sentinel', 'redis-cli'];
const missing = BINARIES.filter((binary) => spawnSync(binary, ['--version']).error !== undefined);
/** Why the topology tests cannot run here, or false. */
export const TOPOLOGIES_SKIP_REASON =
  missing.length > 0 &&
  `the Redis topology tests need ${missing.join(', ')} (.ci/run installs redis-sentinel and redis-tools)`;
if (TOPOLOGIES_SKIP_REASON) process.stdout.write(`SKIPPED: ${TOPOLOGIES_SKIP_REASON}\n`);

/** How long a node may not answer before it is taken for down, by the sentinels and by the Cluster. */
export const DOWN_AFTER_MS = 1000;
export const SENTINEL_NAME = 'greeting';
const FAILOVER_TIMEOUT_MS = 3000;

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** Polls `condition` every 50 ms until it holds; fails naming `what` after `ms`. */
export async function until(
  what: string | (() => string),
  condition: () => Promise<boolean>,
  ms = 20_000,
): Promise<number> {
  const started = performance.now();
  for (;;) {
    try {
      if (await condition()) return performance.now() - started;
    } catch {
      // not up yet
    }
    if (performance.now() - started > ms) {
      throw new Error(`${typeof what === 'string' ? what : what()}: not within ${ms} ms`);
    }
    await sleep(50);
  }
}

/** One command on a fresh connection that gives up at once: for asking a node that may be down. */
export async function ask(port: number, ...args: string[]): Promise<unknown> {
  const client = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    retryStrategy: () => null,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    commandTimeout: 1000,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    return await client.call(args[0] as string, ...args.slice(1));
  } finally {
    client.disconnect();
  }
}

/** The `field:value` lines of an INFO answer, as an object. */
export function infoFields(text: unknown): Record<string, string> {
  return Object.fromEntries(
    String(text)
      .split('\r\n')
      .filter((line) => line.includes(':'))
      .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1)]),
  );
}

/** A redis-server or redis-sentinel process on a port of its own, its configuration file in `dir`. */
export class RedisProcess {
  #child: ChildProcess | null = null;
  #log = '';

  constructor(
    readonly port: number,
    readonly dir: string,
    readonly binary: 'redis-server' | 'redis-sentinel',
    readonly config: string[],
  ) {}

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Writes its configuration afresh (a sentinel rewrites its own) and starts it, with no data. */
  async start(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    const file = join(this.dir, `${this.port}.conf`);
    await writeFile(
      file,
      [
        `port ${this.port}`,
        'bind 127.0.0.1',
        `dir ${this.dir}`,
        'save ""',
        'appendonly no',
        // Pidfile and logs of their own, never the system's.
        `pidfile ${join(this.dir, `${this.port}.pid`)}`,
        'daemonize no',
        ...this.config,
        '',
      ].join('\n'),
    );
    await rm(join(this.dir, 'dump.rdb'), { force: true });
    const child = spawn(this.binary, [file], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    running.add(child);
    this.#log = '';
    const collect = (chunk: Buffer) => {
      this.#log = (this.#log + chunk.toString('utf8')).slice(-20_000);
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    child.once('exit', () => running.delete(child));
    // The log as it is when the wait fails, which says why the process did not answer.
    await until(
      () => `${this.binary} on ${this.port} (${this.#log})`,
      async () => {
        if (child.exitCode !== null) throw new Error(`${this.binary} exited: ${this.#log}`);
        return (await ask(this.port, 'PING')) === 'PONG';
      },
    );
  }

  /** SIGKILL, as a crash: nothing saved, connections dropped. */
  async kill(): Promise<void> {
    const child = this.#child;
    this.#child = null;
    if (child === null || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }

  log(): string {
    return this.#log;
  }
}

/** Settings shared by every data node: fast replication, nothing on disk. */
const DATA_NODE = ['repl-diskless-sync yes', 'repl-diskless-sync-delay 0', 'repl-diskless-load on-empty-db'];

export class SentinelTopology {
  private constructor(
    readonly dir: string,
    /** [0] is the primary at start, the others its replicas. */
    readonly nodes: RedisProcess[],
    readonly sentinels: RedisProcess[],
  ) {}

  /**
   * Starts a primary, `replicas` replicas and three sentinels watching them, and waits until all
   * know each other. The data nodes take writes only with `minReplicasToWrite` replicas in step.
   */
  static async start(replicas = 1, minReplicasToWrite = replicas): Promise<SentinelTopology> {
    const dir = await mkdtemp(join(tmpdir(), 'redis-sentinel-'));
    const ports = await Promise.all(Array.from({ length: 4 + replicas }, () => freePort()));
    const [primaryPort, ...others] = ports as [number, ...number[]];
    const sentinelPorts = others.slice(replicas);
    // A primary cut off from any of its replicas refuses writes (NOREPLICAS), as docs/operations.md
    // advises with REDIS_MIN_REPLICAS_ACK: no write that a promoted replica may lack is made at all.
    const guarded = [...DATA_NODE, `min-replicas-to-write ${minReplicasToWrite}`, 'min-replicas-max-lag 10'];
    const primary = new RedisProcess(primaryPort, join(dir, 'primary'), 'redis-server', guarded);
    const replicaNodes = others
      .slice(0, replicas)
      .map(
        (port, i) =>
          new RedisProcess(port, join(dir, `replica-${i + 1}`), 'redis-server', [
            ...guarded,
            `replicaof 127.0.0.1 ${primaryPort}`,
          ]),
      );
    const sentinels = sentinelPorts.map(
      (port, i) =>
        new RedisProcess(port, join(dir, `sentinel-${i + 1}`), 'redis-sentinel', [
          `sentinel monitor ${SENTINEL_NAME} 127.0.0.1 ${primaryPort} 2`,
          `sentinel down-after-milliseconds ${SENTINEL_NAME} ${DOWN_AFTER_MS}`,
          `sentinel failover-timeout ${SENTINEL_NAME} ${FAILOVER_TIMEOUT_MS}`,
          `sentinel parallel-syncs ${SENTINEL_NAME} 1`,
        ]),
    );
    const topology = new SentinelTopology(dir, [primary, ...replicaNodes], sentinels);
    try {
      await primary.start();
      await Promise.all(replicaNodes.map((replica) => replica.start()));
      await topology.untilReplicated(primary);
      await Promise.all(sentinels.map((sentinel) => sentinel.start()));
      // Each sentinel has found the replicas and the two other sentinels (hello messages, every 2 s).
      await until('the sentinels to know each other and the replicas', async () => {
        for (const sentinel of sentinels) {
          const known = (await ask(sentinel.port, 'SENTINEL', 'SENTINELS', SENTINEL_NAME)) as unknown[];
          const found = (await ask(sentinel.port, 'SENTINEL', 'REPLICAS', SENTINEL_NAME)) as unknown[];
          if (known.length !== 2 || found.length !== replicas) return false;
        }
        return true;
      });
    } catch (error) {
      await topology.stop();
      throw error;
    }
    return topology;
  }

  /** `host:port,host:port,host:port`: what REDIS_SENTINELS takes. */
  get sentinelList(): string {
    return this.sentinels.map((sentinel) => sentinel.address).join(',');
  }

  /** The node the sentinels name as primary, asking the first one that answers. */
  async primary(): Promise<RedisProcess> {
    for (const sentinel of this.sentinels) {
      try {
        const [, port] = (await ask(sentinel.port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_NAME)) as string[];
        const node = this.nodes.find((n) => n.port === Number(port));
        if (node !== undefined) return node;
      } catch {
        // the next one
      }
    }
    throw new Error('no sentinel names a primary');
  }

  /** Resolves once `primary` reports every other node a replica online that acknowledged its offset within the last second. */
  async untilReplicated(primary: RedisProcess, ms = 20_000): Promise<number> {
    let last = '';
    const replicas = Array.from({ length: this.nodes.length - 1 }, (_, i) => `slave${i}`);
    try {
      return await until(
        `the replicas in step with ${primary.address}`,
        async () => {
          const info = infoFields(await ask(primary.port, 'INFO', 'replication'));
          last = JSON.stringify(info);
          return info.role === 'master' && replicas.every((name) => /state=online,.*,lag=[01]$/.test(info[name] ?? ''));
        },
        ms,
      );
    } catch (error) {
      throw new Error(`${(error as Error).message}; INFO replication: ${last}`);
    }
  }

  /**
   * A connection to one sentinel that resolves with performance.now() at the next `+switch-master`:
   * when the sentinels have made another node the primary, the end of a failover.
   */
  async nextSwitch(): Promise<{ switched: Promise<number>; close: () => void }> {
    const subscriber = new Redis({ port: this.sentinels[0]?.port, host: '127.0.0.1', lazyConnect: true });
    subscriber.on('error', () => {});
    await subscriber.connect();
    await subscriber.subscribe('+switch-master');
    const switched = new Promise<number>((resolve) => {
      subscriber.once('message', () => resolve(performance.now()));
    });
    return { switched, close: () => subscriber.disconnect() };
  }

  async stop(): Promise<void> {
    await Promise.all([...this.sentinels, ...this.nodes].map((node) => node.kill()));
    await rm(this.dir, { recursive: true, force: true });
  }
}

const run = promisify(execFile);

export class ClusterTopology {
  private constructor(
    readonly dir: string,
    readonly nodes: RedisProcess[],
  ) {}

  /** Six nodes made into three primaries with a replica each, all slots covered. */
  static async start(): Promise<ClusterTopology> {
    const dir = await mkdtemp(join(tmpdir(), 'redis-cluster-'));
    const ports = await Promise.all(Array.from({ length: 6 }, () => freePort()));
    const nodes = ports.map(
      (port) =>
        new RedisProcess(port, join(dir, String(port)), 'redis-server', [
          ...DATA_NODE,
          'cluster-enabled yes',
          `cluster-config-file nodes-${port}.conf`,
          `cluster-node-timeout ${DOWN_AFTER_MS}`,
        ]),
    );
    const topology = new ClusterTopology(dir, nodes);
    try {
      await Promise.all(nodes.map((node) => node.start()));
      await run('redis-cli', [
        '--cluster',
        'create',
        ...nodes.map((node) => node.address),
        '--cluster-replicas',
        '1',
        '--cluster-yes',
      ]);
      await until('the cluster to be ok on every node', async () => {
        for (const node of nodes) {
          if (infoFields(await ask(node.port, 'CLUSTER', 'INFO')).cluster_state !== 'ok') return false;
        }
        // Every replica attached and in step.
        for (const node of await topology.primaries()) {
          const info = infoFields(await ask(node.port, 'INFO', 'replication'));
          if (!/state=online/.test(info.slave0 ?? '')) return false;
        }
        return true;
      });
    } catch (error) {
      await topology.stop();
      throw error;
    }
    return topology;
  }

  /** `host:port,...` of every node: what REDIS_CLUSTER_NODES takes. */
  get seedList(): string {
    return this.nodes.map((node) => node.address).join(',');
  }

  /** The nodes that are primaries now, by their own INFO. */
  async primaries(): Promise<RedisProcess[]> {
    const roles = await Promise.all(
      this.nodes.map(async (node) => {
        try {
          return infoFields(await ask(node.port, 'INFO', 'replication')).role;
        } catch {
          return 'down';
        }
      }),
    );
    return this.nodes.filter((_, i) => roles[i] === 'master');
  }

  /** The primary that holds `slot` now, by CLUSTER SHARDS of a live node. */
  async primaryOfSlot(slot: number): Promise<RedisProcess> {
    const primaries = await this.primaries();
    for (const node of primaries) {
      const [start, end] = await this.slotRange(node);
      if (slot >= start && slot <= end) return node;
    }
    throw new Error(`no primary holds slot ${slot}`);
  }

  /** The slots a primary of a cluster made by `redis-cli --cluster create` holds: one range each. */
  async slotRange(primary: RedisProcess): Promise<[number, number]> {
    const lines = String(await ask(primary.port, 'CLUSTER', 'NODES')).split('\n');
    const own = lines.find((line) => line.includes('myself'));
    const range = own?.split(' ')[8]?.split('-').map(Number);
    if (range === undefined || range.length !== 2) throw new Error(`no slot range in ${own}`);
    return range as [number, number];
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.kill()));
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** The hash slot of a key, as Redis computes it (CRC16 mod 16384), asked of a node. */
export async function slotOf(port: number, key: string): Promise<number> {
  return Number(await ask(port, 'CLUSTER', 'KEYSLOT', key));
}
