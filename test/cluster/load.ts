import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, type Dispatcher } from 'undici';
import { MIX, type MixRequest } from '../soak/mix.js';

/**
 * The paced load of a deployment under test (test/cluster/ on loopback, test/container/ under
 * podman): clients sending every endpoint through the balancer, and one writer of the profile whose
 * writes each name the version they read (If-Match), read back to be found applied once. Each
 * answer is an outcome of the phase it was sent in; the tally gives figures per phase.
 */

/** A phase of a run: `steady`, `rolling restart`, ...; those listed as outages may answer 503 for the store. */
export type Phase = string;

export interface Outcome {
  phase: Phase;
  ms: number;
  /** `ok`, `store unavailable` (a 503 that is the answer while Redis is down) or the failure's kind. */
  kind: string;
  idempotent: boolean;
  request: string;
}

export interface LoadOptions {
  /** Concurrent clients of the mixed load, each sending a request every `paceMs` at most. */
  clients: number;
  paceMs: number;
  /** The bound on the load, whatever happens to the phases' timing. */
  maxRequests: number;
  /** An answer slower than this is a failure, `slow (N ms)`; a 503 of the store's during an outage, slower than `outageSlowMs`. */
  slowMs: number;
  outageSlowMs: number;
  /** The phases in which Redis is down: a 503 of the store's is their answer, not a failure. */
  outages: Phase[];
  /** Whether the load's own writer of the profile runs: false where the test brings writers of its own. */
  writer?: boolean;
}

const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);

/** The mixed load: every endpoint through the balancer but `/readyz`, which is each instance's own. */
function loadMix(cursor: string): MixRequest[] {
  return [
    // Unconditional profile writes would race the writer's If-Match chain: the writer writes.
    ...MIX.filter(({ method, path }) => path !== '/readyz' && !(path === '/api/profile' && method !== 'GET')),
    // A cursor issued by one instance, honoured by all: they share CURSOR_SECRET.
    { method: 'GET', path: `/api/currencies?limit=3&cursor=${cursor}`, status: 200 },
  ];
}

/** A GET's status from a fresh connection, or the error's code: for polling until a server answers. */
export async function statusOf(url: string): Promise<number | string> {
  const client = new Client(new URL(url).origin);
  try {
    const res = await client.request({ method: 'GET', path: new URL(url).pathname, headersTimeout: 5000 });
    await res.body.dump();
    return res.statusCode;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? String(error);
  } finally {
    await client.close();
  }
}

export const percentile = (values: number[], p: number): number => {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return Math.round(sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number);
};

export const isStoreUnavailable = (status: number, text: string) =>
  status === 503 && /"code":"SERVICE_UNAVAILABLE"/.test(text) && /shared store is unavailable/.test(text);

export interface Answer {
  status: number;
  text: string;
  ms: number;
  etag?: string;
  error?: string;
}

const note = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
const version = (etag: string | undefined) => Number(etag?.slice(1, -1));

export class MixedLoad {
  phase: Phase = 'steady';
  /** How many times Redis, when it keeps nothing on disk, has lost what it held: bumped by the run. */
  redisEpoch = 0;
  readonly outcomes: Outcome[] = [];
  readonly writes = {
    acknowledged: 0,
    refusedWhileStoreDown: 0,
    failed: new Map<string, number>(),
    appliedUnacknowledged: 0,
    lost: 0,
    appliedTwice: 0,
    unexpected412: 0,
  };
  #stopped = false;
  #sent = 0;
  #running: Promise<unknown> | undefined;

  constructor(
    /** A pool of one origin, or a balanced pool of several instances. */
    readonly pool: Dispatcher,
    readonly options: LoadOptions,
  ) {}

  /** One request through the pool; a failure to get an answer is status 0 with the error's code. */
  async send(request: Omit<MixRequest, 'status'>): Promise<Answer> {
    const started = performance.now();
    this.#sent++;
    try {
      const res = await this.pool.request({
        method: request.method,
        path: request.path,
        headers: request.headers,
        body: request.body,
        headersTimeout: 15_000,
        bodyTimeout: 15_000,
      });
      const text = await res.body.text();
      const etag = res.headers.etag;
      return {
        status: res.statusCode,
        text,
        ms: performance.now() - started,
        etag: typeof etag === 'string' ? etag : undefined,
      };
    } catch (error) {
      return {
        status: 0,
        text: '',
        ms: performance.now() - started,
        error: (error as NodeJS.ErrnoException).code ?? String(error),
      };
    }
  }

  #inOutage(at: Phase): boolean {
    return this.options.outages.includes(at) || this.options.outages.includes(this.phase);
  }

  #going(): boolean {
    return !this.#stopped && this.#sent < this.options.maxRequests;
  }

  /** Starts the clients and the writer, with a cursor from the first page, issued by whichever instance answers. */
  async start(): Promise<void> {
    const first = await this.send({ method: 'GET', path: '/api/currencies?limit=3' });
    const cursor = encodeURIComponent(JSON.parse(first.text).pagination.next_cursor as string);
    const mix = loadMix(cursor);
    this.#running = Promise.all([
      ...Array.from({ length: this.options.clients }, (_, i) => this.#client(mix, i * 3)),
      this.options.writer === false ? undefined : this.#writer(),
    ]);
  }

  /** Stops sending; resolves when every client has its last answer. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#running;
  }

  async #client(mix: MixRequest[], offset: number): Promise<void> {
    for (let seq = 0; this.#going(); seq++) {
      const request = mix[(offset + seq) % mix.length] as MixRequest;
      const at = this.phase;
      const res = await this.send(request);
      let kind = 'ok';
      if (res.status !== request.status) {
        const needsStore = request.path.startsWith('/api/profile');
        kind =
          needsStore && isStoreUnavailable(res.status, res.text) && this.#inOutage(at)
            ? 'store unavailable'
            : `${request.method} ${request.path.split('?')[0]}: ${res.error ?? res.status}`;
      }
      // Nothing hangs: every answer within its bound, also while Redis is down.
      const bound = kind === 'store unavailable' ? this.options.outageSlowMs : this.options.slowMs;
      if ((kind === 'ok' || kind === 'store unavailable') && res.ms > bound) kind = `slow (${Math.round(res.ms)} ms)`;
      const idempotent = IDEMPOTENT.has(request.method);
      this.outcomes.push({ phase: at, ms: res.ms, kind, idempotent, request: `${request.method} ${request.path}` });
      await sleep(Math.max(0, this.options.paceMs - res.ms));
    }
  }

  async #read(): Promise<{ etag: string; bio: string | null; epoch: number } | null> {
    for (let attempt = 0; attempt < 200 && !this.#stopped; attempt++) {
      const res = await this.send({ method: 'GET', path: '/api/profile' });
      const epoch = this.redisEpoch;
      if (res.status === 200 && res.etag !== undefined) return { etag: res.etag, bio: JSON.parse(res.text).bio, epoch };
      await sleep(50);
    }
    return null;
  }

  // The one writer of the profile: each write names the version it read (If-Match), so none can
  // apply twice; each is checked for being applied once, and no acknowledged one lost.
  async #writer(): Promise<void> {
    const { writes } = this;
    let current = await this.#read();
    for (let n = 1; current !== null && this.#going(); n++) {
      const bio = `write ${n}`;
      const method = (['PATCH', 'PUT', 'POST'] as const)[n % 3] ?? 'PATCH';
      const at = this.phase;
      const res = await this.send({
        method,
        path: '/api/profile',
        headers: {
          'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json',
          'if-match': current.etag,
        },
        body: JSON.stringify(method === 'PUT' ? { name: 'Ada', bio } : { bio }),
      });
      const idempotent = IDEMPOTENT.has(method);
      if (res.status === 200) {
        writes.acknowledged++;
        const ackedIn = this.redisEpoch;
        if (version(res.etag) !== version(current.etag) + 1 && ackedIn === current.epoch) writes.appliedTwice++;
        this.outcomes.push({ phase: at, ms: res.ms, kind: 'ok', idempotent, request: `${method} /api/profile` });
        // Read back, through whichever instance: the write is there, once.
        const seen = await this.#read();
        if (seen !== null && (seen.etag !== res.etag || seen.bio !== bio)) {
          // A Redis that lost its data in between forgets it; anything else is a lost write.
          if (seen.epoch === ackedIn) writes.lost++;
        }
        current = seen;
        await sleep(this.options.paceMs);
        continue;
      }
      let kind = `${method} /api/profile: ${res.error ?? res.status}`;
      if (isStoreUnavailable(res.status, res.text) && this.#inOutage(at)) {
        writes.refusedWhileStoreDown++;
        kind = 'store unavailable';
      } else if (res.status === 412 && this.redisEpoch !== current.epoch) {
        // The version it named was of the Redis that lost its data since: part of the outage.
        kind = 'store unavailable';
      } else if (res.status === 412) {
        writes.unexpected412++;
      } else {
        note(writes.failed, kind);
      }
      this.outcomes.push({ phase: at, ms: res.ms, kind, idempotent, request: `${method} /api/profile` });
      // Whether it applied is read back: a write retried with the same If-Match can never apply twice.
      const seen = await this.#read();
      if (seen?.bio === bio && version(seen.etag) === version(current.etag) + 1) writes.appliedUnacknowledged++;
      current = seen;
      await sleep(this.options.paceMs);
    }
  }

  /** The figures of these phases: requests, p99, slowest, failures by kind, the writer's tally. */
  figures(phases: Phase[]): Record<string, unknown> {
    const failures = new Map<string, number>();
    for (const o of this.outcomes) {
      if (o.kind !== 'ok' && o.kind !== 'store unavailable') {
        note(failures, `${o.idempotent ? 'idempotent' : 'non-idempotent'} ${o.kind} (${o.phase})`);
      }
    }
    return {
      requests: this.outcomes.length,
      by_phase: Object.fromEntries(
        phases.map((name) => {
          const these = this.outcomes.filter((o) => o.phase === name);
          return [
            name,
            {
              requests: these.length,
              p99_ms: percentile(
                these.map((o) => o.ms),
                99,
              ),
              max_ms: Math.round(Math.max(0, ...these.map((o) => o.ms))),
              store_unavailable: these.filter((o) => o.kind === 'store unavailable').length,
              failed: these.filter((o) => o.kind !== 'ok' && o.kind !== 'store unavailable').length,
              slowest: [...these]
                .sort((a, b) => b.ms - a.ms)
                .slice(0, 3)
                .map((o) => `${o.request} ${Math.round(o.ms)} ms`),
            },
          ];
        }),
      ),
      failures: Object.fromEntries(failures),
      writes: { ...this.writes, failed: Object.fromEntries(this.writes.failed) },
    };
  }

  /** The idempotent requests that failed, as `kind (phase)`: none may. */
  idempotentFailures(): string[] {
    return this.outcomes
      .filter((o) => o.idempotent && o.kind !== 'ok' && o.kind !== 'store unavailable')
      .map((o) => `${o.kind} (${o.phase})`);
  }
}
