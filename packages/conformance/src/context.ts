import type { Decimal } from 'decimal.js';
import { AnswerAudit } from './answers.js';
import { BudgetError, type Http, isInjectedAbort, type Request, type Response } from './http.js';
import { type Exact, isExactObject, parseExact } from './json.js';

export const GROUPS = [
  'hello',
  'search',
  'echo',
  'websocket',
  'errors',
  'request-id',
  'trace-context',
  'http',
  'versioning',
  'cors',
  'security',
  'health',
  'openapi',
  'currencies',
  'exchange',
  'profile',
  'codings',
  'timeouts',
  'rate-limit',
  'http2',
  'events',
  'grpc',
] as const;

export type Group = (typeof GROUPS)[number];

export interface Check {
  id: string;
  group: Group;
  /** The section of the specification or the contract it verifies: `spec 4.2`, `contract: Errors`. */
  clause: string;
  title: string;
  /** Runs only with --write, --rate-limit, --slow, --http2 or --grpc. */
  needs?: 'write' | 'rate-limit' | 'slow' | 'http2' | 'grpc';
  run(ctx: Context): Promise<void>;
}

/** A clause not kept: what it asks for and what came instead. */
export class CheckFailure extends Error {
  constructor(
    readonly expected: string,
    readonly actual: string,
  ) {
    super(`expected ${expected}, actual ${actual}`);
  }
}

/**
 * A failure of what checks share (the currency table, read once), carrying the injected answers
 * met on the way: each check that depends on it is judged by them as by its own.
 */
export class DependencyFailure extends CheckFailure {
  constructor(
    expected: string,
    actual: string,
    readonly injected: readonly Response[],
  ) {
    super(expected, actual);
  }
}

/** The check cannot tell here, and says why. */
export class CheckSkip extends Error {}

export interface RunOptions {
  write: boolean;
  rateLimit: boolean;
  slow: boolean;
  http2: boolean;
  grpc: boolean;
  bodyLimit: number;
  origin: string;
}

/** A currency of the table as `GET /api/currencies` serves it, its rate exact. */
export interface Currency {
  code: string;
  name: string;
  minor_units: number;
  rate: Decimal;
}

export interface Context {
  readonly http: Http;
  readonly options: RunOptions;
  send(request: Request): Promise<Response>;
  get(path: string, headers?: Record<string, string>): Promise<Response>;
  /** The whole table, read once through offset pagination (`per_page=100`). */
  table(): Promise<Currency[]>;
  /** Shared between the checks of a group, such as the profile found before the writes. */
  readonly state: Map<string, unknown>;
  /** Every answer of the run so far, held to the headers every answer must carry. */
  readonly answers: AnswerAudit;
}

async function readTable(ctx: Context): Promise<Currency[]> {
  const currencies: Currency[] = [];
  for (let page = 1; page <= 100; page += 1) {
    const res = await ctx.get(`/api/currencies?per_page=100&page=${page}`);
    if (res.status !== 200) {
      throw new CheckFailure(`GET ${res.request.path}: 200`, `${res.status} ${JSON.stringify(res.text.slice(0, 120))}`);
    }
    let body: Exact;
    try {
      body = parseExact(res.text);
    } catch {
      throw new CheckFailure(`GET ${res.request.path}: a JSON body`, JSON.stringify(res.text.slice(0, 120)));
    }
    const data = isExactObject(body) ? body.values.get('data') : undefined;
    if (!Array.isArray(data))
      throw new CheckFailure(`GET ${res.request.path}: a data array`, JSON.stringify(res.text.slice(0, 120)));
    if (data.length === 0) return currencies;
    for (const item of data) currencies.push(currencyOf(item));
    if (data.length < 100) return currencies;
  }
  return currencies;
}

/** The table, or a DependencyFailure naming the injected answers met reading it. */
async function sharedTable(ctx: Context): Promise<Currency[]> {
  const before = ctx.http.injected.length;
  try {
    return await readTable(ctx);
  } catch (error) {
    if (error instanceof BudgetError) throw error;
    const injected = ctx.http.injected.slice(before);
    if (error instanceof CheckFailure) throw new DependencyFailure(error.expected, error.actual, injected);
    throw new DependencyFailure(
      `the currency table (GET ${ctx.http.prefix}/api/currencies)`,
      String((error as Error).message),
      injected,
    );
  }
}

function currencyOf(item: Exact): Currency {
  const get = (key: string) => (isExactObject(item) ? item.values.get(key) : undefined);
  const [code, name, minor, rate] = [get('code'), get('name'), get('minor_units'), get('rate')];
  if (typeof code !== 'string' || typeof name !== 'string' || typeof minor !== 'object' || typeof rate !== 'object') {
    throw new CheckFailure('currency items {code, name, minor_units, rate}', JSON.stringify(item).slice(0, 120));
  }
  return { code, name, minor_units: Number(minor), rate: rate as Decimal };
}

export function makeContext(http: Http, options: RunOptions): Context {
  let table: Promise<Currency[]> | undefined;
  const answers = new AnswerAudit();
  http.onAnswer = answers.inspect;
  const ctx: Context = {
    http,
    options,
    state: new Map(),
    answers,
    send: (request) => http.send(request),
    get: (path, headers) => http.send({ path, ...(headers !== undefined && { headers }) }),
    table() {
      if (table === undefined) {
        const read = sharedTable(ctx);
        // An injected answer says nothing of the table: the next check that needs it reads it again.
        read.catch((error: unknown) => {
          if (error instanceof DependencyFailure && error.injected.some(isInjectedAbort)) table = undefined;
        });
        table = read;
      }
      return table;
    },
  };
  return ctx;
}
