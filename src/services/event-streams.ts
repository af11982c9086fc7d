import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { jsonString } from '../lib/json-text.js';
import { localDateTime } from '../lib/local-time.js';
import type { MemoryBudget } from '../lib/memory-budget.js';

/** A stream with nothing to send for this long gets a comment line, so that no proxy takes it for dead. */
const KEEP_ALIVE_MS = 15_000;

/** What is written to a quiet stream: a comment, which clients skip. */
const KEEP_ALIVE_COMMENT = ': keep-alive\n\n';

/** How early a timer may fire and its event still count as due: Node's timers keep whole milliseconds. */
const TIMER_SLACK_MS = 1;

/** What a stream sends: events `first` to `count`, `intervalMs` apart, each greeting `name`. */
export interface GreetingStreamPlan {
  first: number;
  count: number;
  intervalMs: number;
  name: string;
  /** Each greeting as a `GreetingMessage` (a gRPC stream's), not as event-stream text. */
  messages?: boolean;
}

/** One greeting of a stream of messages. */
export interface GreetingMessage {
  id: number;
  greeting: string;
  timestamp: string;
}

/** How much of a stream is made at once, in characters: a client that does not read holds a chunk (an event at least) and no more. */
const MAX_CHUNK = 16 * 1024;

/**
 * One stream of greeting events, written when due: the first at once, each next `intervalMs` after
 * the one before (on a schedule, so that a late timer does not delay the rest), a comment after
 * `KEEP_ALIVE_MS` of silence, and the end after the last. Events due together go out in chunks of
 * about 16 KiB. Made only as its client takes them: while the response cannot take more, no event is
 * made, and those that fell due meanwhile go out once it can. Destroyed (its client gone, or the
 * service ending it), its timer is cleared and its slot freed.
 */
export class GreetingStream extends Readable {
  /** Events given to the response so far. */
  sent = 0;
  readonly #streams: EventStreams;
  readonly #count: number;
  readonly #intervalMs: number;
  /** What every event's data begins with after its id, and ends with before its timestamp. */
  readonly #greeting: string;
  /** The greeting itself, for a stream of messages; null for event-stream text. */
  readonly #message: string | null;
  #next: number;
  #dueAt: number;
  #lastWriteAt: number;
  #timer: NodeJS.Timeout | undefined;
  /** Whether it waits for its response to take what it was given before making more. */
  #waiting = false;
  #ended = false;

  constructor(streams: EventStreams, { first, count, intervalMs, name, messages = false }: GreetingStreamPlan) {
    // A stream of messages holds one greeting made and not taken, at most.
    super(messages ? { objectMode: true, highWaterMark: 1 } : {});
    this.#message = messages ? `Hello, ${name}!` : null;
    this.#streams = streams;
    this.#count = count;
    this.#intervalMs = intervalMs;
    this.#greeting = `,"greeting":${jsonString(`Hello, ${name}!`)},"timestamp":"`;
    this.#next = first;
    this.#dueAt = performance.now();
    this.#lastWriteAt = this.#dueAt;
    this.#tick();
  }

  override _read(): void {
    if (!this.#waiting) return;
    this.#waiting = false;
    this.#tick();
  }

  readonly #tick = (): void => {
    this.#timer = undefined;
    const now = performance.now();
    let chunk = '';
    let taken = true;
    while (this.#next <= this.#count && this.#dueAt <= now + TIMER_SLACK_MS && chunk.length < MAX_CHUNK && taken) {
      const id = this.#next;
      if (this.#message === null) {
        chunk += `id: ${id}\nevent: greeting\ndata: {"id":${id}${this.#greeting}${localDateTime()}"}\n\n`;
      } else {
        taken = this.push({ id, greeting: this.#message, timestamp: localDateTime() } satisfies GreetingMessage);
        this.#lastWriteAt = now;
      }
      this.#next += 1;
      this.#dueAt += this.#intervalMs;
      this.sent += 1;
      this.#streams.eventsSent += 1;
    }
    const done = this.#next > this.#count;
    // Nothing due and quiet for long enough: a comment (a stream of messages has the transport's pings).
    const quiet = now - this.#lastWriteAt >= this.#streams.keepAliveMs - TIMER_SLACK_MS;
    if (chunk === '' && !done && quiet && this.#message === null) chunk = KEEP_ALIVE_COMMENT;
    if (chunk !== '') {
      taken = this.push(chunk);
      this.#lastWriteAt = now;
    }
    if (done) {
      this.#end();
      return;
    }
    if (!taken) {
      this.#waiting = true;
      return;
    }
    const at = Math.min(this.#dueAt, this.#lastWriteAt + this.#streams.keepAliveMs);
    this.#timer = setTimeout(this.#tick, Math.max(0, at - performance.now()));
  };

  #end(): void {
    this.#ended = true;
    this.push(null);
  }

  /** Ends the stream after what it has written: the events not yet due are not sent. */
  stop(): void {
    if (this.#ended || this.destroyed) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#waiting = false;
    this.#end();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#streams.release(this);
    callback(error);
  }
}

/**
 * The event streams open in this instance: at most `max` at once, none begun while the memory
 * budget is full, counted for `/metrics`, and ended when the service shuts down.
 */
export class EventStreams {
  readonly max: number;
  readonly keepAliveMs: number;
  readonly #budget: MemoryBudget;
  /** Events sent by every stream since the start. */
  eventsSent = 0;
  readonly #open = new Set<GreetingStream>();
  /** Each stream by what it answers (its request), for the request's log line, after it has ended too. */
  readonly #answering = new WeakMap<object, GreetingStream>();

  constructor(max: number, budget: MemoryBudget, keepAliveMs = KEEP_ALIVE_MS) {
    this.max = max;
    this.#budget = budget;
    this.keepAliveMs = keepAliveMs;
  }

  /** Streams open now. */
  get open(): number {
    return this.#open.size;
  }

  /**
   * A new stream answering `request`, its first events already written; or why none can begin:
   * `max` are open, or the memory budget is full (counted as a refusal).
   */
  begin(request: object, plan: GreetingStreamPlan): GreetingStream | 'max' | 'memory' {
    if (this.#open.size >= this.max) return 'max';
    if (!this.#budget.admits('stream_refused')) return 'memory';
    const stream = new GreetingStream(this, plan);
    this.#open.add(stream);
    this.#answering.set(request, stream);
    return stream;
  }

  /** The events sent by the stream that answered `request`, or null if none did. */
  sentTo(request: object): number | null {
    return this.#answering.get(request)?.sent ?? null;
  }

  /** Frees a stream's slot: called once it is destroyed. */
  release(stream: GreetingStream): void {
    this.#open.delete(stream);
  }

  /**
   * Ends every open stream after what it has written; a stream still open `graceMs` later (its
   * client does not read what is left) is destroyed, which breaks its response.
   */
  endAll(graceMs: number): void {
    for (const stream of this.#open) stream.stop();
    if (this.#open.size === 0) return;
    setTimeout(() => {
      for (const stream of this.#open) stream.destroy();
    }, graceMs).unref();
  }
}
