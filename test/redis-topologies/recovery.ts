import { performance } from 'node:perf_hooks';
import type { ProfileAnswer } from './profile-writers.js';

/**
 * One failure of the topology under load: from `at` to the next event's start (performance.now()).
 * A request belongs to the event in which it was answered: one sent just before a failure and
 * answered after it met the failure.
 */
export interface TopologyEvent {
  name: string;
  at: number;
  end: number;
  /** When the sentinels or the Cluster had another primary: the failover's own end; undefined if none. */
  switchedAt?: number;
}

/** What an event cost the profile's clients, in milliseconds from its start. */
export interface Recovery {
  event: string;
  /** The failover's own time: from the failure (or the command) to another primary. */
  failover_ms: number | null;
  /** From the event to the sending of the last read, or write, that did not get a 200 (412 aside): 0 when none failed. */
  reads_failing_ms: number;
  writes_failing_ms: number;
  failed_reads: number;
  failed_writes: number;
  /** What the failures answered: `503`, `0` for no answer, with counts. */
  failed_statuses: Record<string, number>;
}

const failed = (a: ProfileAnswer) => a.status !== 200 && a.status !== 412;

export function recoveryOf(event: TopologyEvent, answers: ProfileAnswer[]): Recovery {
  const during = answers.filter((a) => a.answered >= event.at && a.answered < event.end);
  const lastFailure = (kind: ProfileAnswer['kind']) => {
    const failures = during.filter((a) => a.kind === kind && failed(a));
    return failures.length === 0 ? 0 : Math.max(0, Math.round(Math.max(...failures.map((a) => a.sent)) - event.at));
  };
  const statuses: Record<string, number> = {};
  for (const a of during.filter(failed)) statuses[a.status] = (statuses[a.status] ?? 0) + 1;
  return {
    event: event.name,
    failover_ms: event.switchedAt === undefined ? null : Math.round(event.switchedAt - event.at),
    reads_failing_ms: lastFailure('read'),
    writes_failing_ms: lastFailure('write'),
    failed_reads: during.filter((a) => a.kind === 'read' && failed(a)).length,
    failed_writes: during.filter((a) => a.kind === 'write' && failed(a)).length,
    failed_statuses: statuses,
  };
}

/** The events of a run in order, each lasting until the next starts. */
export class Timeline {
  readonly events: TopologyEvent[] = [];

  constructor(private readonly onEvent: (name: string) => void = () => {}) {}

  /** Starts an event now, ending the one before. */
  start(name: string): TopologyEvent {
    const now = performance.now();
    const previous = this.events.at(-1);
    if (previous !== undefined) previous.end = now;
    const next = { name, at: now, end: Number.POSITIVE_INFINITY };
    this.events.push(next);
    this.onEvent(name);
    return next;
  }

  recoveries(answers: ProfileAnswer[]): Recovery[] {
    return this.events.map((event) => recoveryOf(event, answers));
  }
}

/** Whether every reader has had a 200 to a read sent after `since`. */
export function readsServedSince(answers: ProfileAnswer[], since: number): boolean {
  const readers = new Set(answers.filter((a) => a.kind === 'read').map((a) => a.client));
  const served = new Set(
    answers.filter((a) => a.kind === 'read' && a.status === 200 && a.sent > since).map((a) => a.client),
  );
  return [...readers].every((reader) => served.has(reader));
}
