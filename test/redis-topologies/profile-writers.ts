import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'undici';

/**
 * Writers and readers of the profile, each on a connection of its own to one instance: every
 * writer reads the profile, then replaces it naming the version it read (If-Match), with a value
 * no other write has; every reader reads it in a loop. Every answer is kept, so that the history
 * can be held to the acknowledged writes afterwards: one value per version, none lost, none
 * doubled, no version ever going back, nothing served from a node that has not the data.
 */

export interface ProfileAnswer {
  client: string;
  kind: 'read' | 'write';
  /** performance.now() when sent and when answered. */
  sent: number;
  answered: number;
  status: number;
  /** The version of the ETag of a 200, and its bio; NaN and null otherwise. */
  version: number;
  bio: string | null;
  /** The bio the write sent. */
  wrote?: string;
  text: string;
}

const versionOf = (etag: unknown) => (typeof etag === 'string' ? Number(etag.slice(1, -1)) : Number.NaN);

export class ProfileTraffic {
  readonly answers: ProfileAnswer[] = [];
  #stopped = false;
  #running: Promise<unknown> | undefined;

  constructor(
    /** The instances' origins: writer and reader i use origin i modulo their number. */
    readonly origins: string[],
    readonly options: { writers: number; readers: number; paceMs: number },
  ) {}

  start(): void {
    const { writers, readers } = this.options;
    this.#running = Promise.all([
      ...Array.from({ length: writers }, (_, i) => this.#writer(`writer ${i + 1}`, this.#origin(i))),
      ...Array.from({ length: readers }, (_, i) => this.#reader(`reader ${i + 1}`, this.#origin(i))),
    ]);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#running;
  }

  #origin(i: number): string {
    return this.origins[i % this.origins.length] as string;
  }

  async #send(client: Client, name: string, kind: 'read' | 'write', etag?: string, wrote?: string) {
    const sent = performance.now();
    let answer: ProfileAnswer;
    try {
      const res = await client.request({
        method: kind === 'read' ? 'GET' : 'PUT',
        path: '/api/profile',
        headers: kind === 'read' ? {} : { 'content-type': 'application/json', 'if-match': etag },
        body: kind === 'read' ? undefined : JSON.stringify({ name: 'Ada', bio: wrote }),
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      const text = await res.body.text();
      const ok = res.statusCode === 200;
      answer = {
        client: name,
        kind,
        sent,
        answered: performance.now(),
        status: res.statusCode,
        version: ok ? versionOf(res.headers.etag) : Number.NaN,
        bio: ok ? (JSON.parse(text) as { bio: string | null }).bio : null,
        wrote,
        text,
      };
    } catch (error) {
      const text = (error as NodeJS.ErrnoException).code ?? String(error);
      answer = {
        client: name,
        kind,
        sent,
        answered: performance.now(),
        status: 0,
        version: Number.NaN,
        bio: null,
        wrote,
        text,
      };
    }
    this.answers.push(answer);
    return answer;
  }

  async #writer(name: string, origin: string): Promise<void> {
    const client = new Client(origin, { pipelining: 1 });
    try {
      for (let n = 1; !this.#stopped; n++) {
        const read = await this.#send(client, name, 'read');
        if (read.status === 200) await this.#send(client, name, 'write', `"${read.version}"`, `${name}, write ${n}`);
        await sleep(this.options.paceMs);
      }
    } finally {
      await client.close();
    }
  }

  async #reader(name: string, origin: string): Promise<void> {
    const client = new Client(origin, { pipelining: 1 });
    try {
      while (!this.#stopped) {
        await this.#send(client, name, 'read');
        await sleep(this.options.paceMs);
      }
    } finally {
      await client.close();
    }
  }

  /** Acknowledged writes (200): each a version and the value written. */
  acknowledged(): ProfileAnswer[] {
    return this.answers.filter((a) => a.kind === 'write' && a.status === 200);
  }

  /**
   * What the history breaks, as sentences; none when every answer agrees with the acknowledged
   * writes. `first` is the version read before any write. A read may see a write that is not
   * acknowledged yet, which a crash of the primary can then lose (replication is asynchronous):
   * that breaks nothing, and `versionsLost` counts it.
   */
  violations(first: number): string[] {
    const found: string[] = [];
    const ok = this.answers.filter((a) => a.status === 200);
    const writesSent = this.answers.filter((a) => a.kind === 'write').length;
    for (const a of ok) {
      // A version outside these bounds is a profile made afresh: by a node that had no data.
      if (a.version < first || a.version > first + writesSent) {
        found.push(`${a.client} got version ${a.version}, outside ${first}..${first + writesSent}`);
      }
    }
    const acks = this.acknowledged();
    for (const ack of acks) {
      if (ack.bio !== ack.wrote) found.push(`${ack.client}'s write answered ${ack.bio}, not what it wrote`);
    }
    const acknowledged = new Map(acks.map((ack) => [ack.version, ack.wrote]));
    if (acknowledged.size !== acks.length) found.push('two acknowledged writes share a version');
    // Whoever reads an acknowledged version reads its value: else another write got that version.
    for (const a of ok) {
      const value = acknowledged.get(a.version);
      if (value !== undefined && a.bio !== value) {
        found.push(`${a.client} read version ${a.version} as ${JSON.stringify(a.bio)}, acknowledged as ${value}`);
      }
    }
    // Nothing read after a write was acknowledged is older than it: else that write was lost,
    // or the read came from a node that is not the primary. No read after the first write is empty.
    const byAnswer = [...acks].sort((a, b) => a.answered - b.answered);
    for (const read of ok.filter((a) => a.kind === 'read')) {
      let newest = Number.NEGATIVE_INFINITY;
      for (const ack of byAnswer) {
        if (ack.answered >= read.sent) break;
        newest = Math.max(newest, ack.version);
      }
      if (read.version < newest) {
        found.push(`${read.client} read version ${read.version} after ${newest} was acknowledged`);
      }
      if (newest > Number.NEGATIVE_INFINITY && read.bio === null) found.push(`${read.client} read the empty profile`);
    }
    return found;
  }

  /** Versions a client read and then saw replaced by an older one: writes seen before they were lost, never acknowledged. */
  versionsLost(): number {
    const lost = new Set<number>();
    const newest = new Map<string, number>();
    for (const a of this.answers.filter((x) => x.status === 200).sort((x, y) => x.answered - y.answered)) {
      const before = newest.get(a.client) ?? Number.NEGATIVE_INFINITY;
      if (a.version < before) lost.add(before);
      newest.set(a.client, Math.max(before, a.version));
    }
    return lost.size;
  }

  /** The counts the suites report. */
  figures() {
    return {
      reads: this.answers.filter((a) => a.kind === 'read').length,
      writes: this.answers.filter((a) => a.kind === 'write').length,
      acknowledged: this.acknowledged().length,
      refused_412: this.answers.filter((a) => a.status === 412).length,
      versions_read_then_lost: this.versionsLost(),
    };
  }
}
