import { Counter, Gauge, type Registry } from 'prom-client';

/** Something held on a client's or a peer's behalf, and the way to let go of it. */
export interface Holding {
  /** Bytes held now. */
  readonly bytes: number;
  /** What letting go of it does, as `/metrics` and the log name it: `connection_reset`, `websocket_closed`, ... */
  readonly action: string;
  /** Lets go of it: ends what holds the bytes. */
  shed(): void;
  /** Shed already, and still ending: counted as held, but neither shed again nor a reason to shed others. */
  readonly leaving?: boolean;
}

/** A kind of holder: each of its holdings as measured now. */
export type Holder = () => Iterable<Holding>;

/** What the budget tells of each holding it sheds. */
export type ShedListener = (holding: Holding, heldBytes: number, limit: number) => void;

/** How often the holdings are measured while there are holders, in ms; and while the budget is full and growing. */
const MEASURE_INTERVAL_MS = 50;
const FULL_INTERVAL_MS = 10;

/** Past this share of the limit, nothing new that may hold much is taken on. */
const HIGH_WATER = 0.8;

/**
 * One budget for the whole process: the bytes it holds for clients and peers that do not keep up
 * (answers not yet sent, in the process and in the kernel's send queues, WebSocket echoes not yet
 * read, ...), measured every 50 ms. Over the limit, the holdings that hold the most are shed
 * until what is left is under the high-water mark (80% of the limit); from that mark on the budget
 * is `full`, and what may come to hold much (a new stream, an upgrade, a WebSocket's next message)
 * is refused or waits, and while what it holds grows it is measured every 10 ms. Between two
 * measurements, `charge` adds what a fast producer has just given out, so that it stops before the next one.
 */
export class MemoryBudget {
  readonly limit: number;
  readonly #holders = new Set<Holder>();
  readonly #onShed: ShedListener;
  /** Bytes held at the last measurement, and charged since. */
  #measured = 0;
  #charged = 0;
  /** Holdings shed since start, by action; and requests refused while full. */
  readonly #shed = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  /** The next measurement while full, sooner than the interval's. */
  #soon: NodeJS.Timeout | undefined;
  /** What waits for the budget to be no longer full. */
  #waiting = new Set<() => void>();

  constructor(limit: number, onShed: ShedListener) {
    this.limit = limit;
    this.#onShed = onShed;
  }

  /** Bytes held at the last measurement, and those charged since. */
  get held(): number {
    return this.#measured + this.#charged;
  }

  /** Whether what is held has reached the high-water mark: nothing new that may hold much is taken on. */
  get full(): boolean {
    return this.#measured + this.#charged >= this.limit * HIGH_WATER;
  }

  /** Adds bytes just given out to what was held at the last measurement, until the next. */
  charge(bytes: number): void {
    this.#charged += bytes;
  }

  /** Whether something new that may hold much may begin now: not while full, which counts a refusal as `action`. */
  admits(action: string): boolean {
    if (!this.full) return true;
    this.#count(action);
    return false;
  }

  #count(action: string): void {
    this.#shed.set(action, (this.#shed.get(action) ?? 0) + 1);
  }

  /** Calls `resume` once a measurement finds the budget no longer full. */
  whenRoom(resume: () => void): void {
    this.#waiting.add(resume);
  }

  /** Measures `holder`'s holdings from now on, until `close`. */
  add(holder: Holder): void {
    this.#holders.add(holder);
    this.#timer ??= setInterval(this.measure, MEASURE_INTERVAL_MS).unref();
  }

  /** Stops measuring. */
  close(): void {
    clearInterval(this.#timer);
    clearTimeout(this.#soon);
    this.#timer = undefined;
    this.#holders.clear();
    this.#waiting.clear();
  }

  /** Measures every holding; over the limit, sheds those that hold the most until under the high-water mark. */
  readonly measure = (): void => {
    const before = this.#measured;
    const holdings: Holding[] = [];
    let held = 0;
    for (const holder of this.#holders) {
      for (const holding of holder()) {
        if (holding.bytes <= 0) continue;
        held += holding.bytes;
        holdings.push(holding);
      }
    }
    this.#charged = 0;
    this.#measured = held > this.limit ? this.#shedDownFrom(held, holdings) : held;
    if (!this.full) {
      const waiting = this.#waiting;
      this.#waiting = new Set();
      for (const resume of waiting) resume();
    } else if (held > before && this.#soon === undefined && this.#timer !== undefined) {
      // Full and growing, what comes between two measurements (a gigabyte a second on loopback) is
      // what overshoots. Full and still, the interval's measurement will do: measuring a thousand
      // clients that hold what they hold every 10 ms would take much of a core, for nothing.
      this.#soon = setTimeout(this.#measureSoon, FULL_INTERVAL_MS).unref();
    }
  };

  /** Sheds the holdings that hold the most until under the high-water mark; what is left. */
  #shedDownFrom(held: number, holdings: Holding[]): number {
    holdings.sort((a, b) => b.bytes - a.bytes);
    const target = this.limit * HIGH_WATER;
    // What is being let go of already is as good as gone: shed again, or shed for, it would be twice.
    let left = held;
    for (const holding of holdings) if (holding.leaving === true) left -= holding.bytes;
    for (const holding of holdings) {
      if (left <= target) break;
      if (holding.leaving === true) continue;
      this.#onShed(holding, held, this.limit);
      this.#count(holding.action);
      holding.shed();
      left -= holding.bytes;
    }
    return left;
  }

  readonly #measureSoon = (): void => {
    this.#soon = undefined;
    this.measure();
  };

  /** `memory_budget_bytes`, `memory_held_bytes` and `memory_shed_total`, read when `/metrics` is. */
  registerMetrics(registry: Registry): void {
    const budget = this;
    new Gauge({
      name: 'memory_budget_bytes',
      help: 'Bytes the service may hold for clients and peers that do not keep up (MEMORY_BUDGET_BYTES).',
      registers: [registry],
      collect() {
        this.set(budget.limit);
      },
    });
    new Gauge({
      name: 'memory_held_bytes',
      help: 'Bytes held for clients and peers that do not keep up, at the last measurement.',
      registers: [registry],
      collect() {
        this.set(budget.held);
      },
    });
    new Counter({
      name: 'memory_shed_total',
      help: 'What the memory budget shed or refused, by action.',
      labelNames: ['action'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [action, count] of budget.#shed) this.inc({ action }, count);
      },
    });
  }
}
