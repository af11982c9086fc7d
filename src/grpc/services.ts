import type { MessageInitShape } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import type { TSchema } from 'typebox';
import type { Collection } from '../domain/collection.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../domain/collection.js';
import type { Currency as CurrencyRow } from '../domain/currencies.js';
import { entityTag, mergeProfile, type ProfileFields } from '../domain/profile.js';
import {
  ApiError,
  apiError,
  type ErrorDetail,
  streamWhileMemoryFull,
  streamWhileShuttingDown,
  tooManyStreams,
  validationError,
} from '../errors.js';
import { localDateTime } from '../lib/local-time.js';
import type { SchemaCode } from '../lib/schema-code.js';
import { validationDetails } from '../plugins/errors.js';
import { validatorCompiler } from '../plugins/validation.js';
import { CurrencyListQuery, CurrencyParams } from '../routes/currencies.js';
import { EventsQuery } from '../routes/events.js';
import { ExchangeQuery, exchange } from '../routes/exchange.js';
import { GREETING, GreetingParams } from '../routes/hello.js';
import { FieldsBody } from '../routes/profile.js';
import { SearchQuery } from '../routes/search.js';
import type { EventStreams, GreetingMessage } from '../services/event-streams.js';
import { readProfile, writeProfile } from '../services/profile.js';
import type { Readiness } from '../services/readiness.js';
import type { ProfileSnapshot, ProfileStore } from '../stores/profile.js';
import {
  type CurrencySchema,
  GreetingService,
  type Profile,
  type ProfileSchema,
} from './generated/greeting/v1/greeting_pb.js';
import { type Health, HealthCheckResponse_ServingStatus } from './generated/grpc/health/v1/health_pb.js';
import { Greeter } from './generated/helloworld/helloworld_pb.js';
import { FASTIFY_REQUEST } from './routes.js';
import { toConnectError } from './status.js';

type Part = 'body' | 'querystring' | 'params';

/**
 * A check of a message's fields by the REST route's own schema, so that a call is held to the
 * same rules, with the same messages, as the request: the valid value, else a 400's details.
 */
function schemaCheck<T>(schemaCode: SchemaCode, schema: TSchema, part: Part): (value: object) => T {
  const validate = validatorCompiler(schemaCode)({ schema, httpPart: part, method: 'POST', url: '' }) as (
    data: unknown,
  ) => { value: T } | { error: Parameters<typeof validationDetails>[0] };
  return (value) => {
    const result = validate(value);
    if ('error' in result) throw validationError(validationDetails(result.error, part, value));
    return result.value;
  };
}

function requestOf(context: HandlerContext) {
  const request = context.values.get(FASTIFY_REQUEST);
  if (request === null) throw new ConnectError('no request', Code.Internal);
  return request;
}

const asCurrency = (row: Partial<CurrencyRow>): MessageInitShape<typeof CurrencySchema> => ({
  code: row.code,
  name: row.name,
  minorUnits: row.minor_units,
  rate: row.rate,
});

const asProfile = ({ profile, version }: ProfileSnapshot): MessageInitShape<typeof ProfileSchema> => ({
  name: profile.name ?? undefined,
  email: profile.email ?? undefined,
  bio: profile.bio ?? undefined,
  etag: entityTag(version),
});

const PROFILE_FIELDS = ['name', 'email', 'bio'] as const;

/** The fields an update sets: those of its mask (absent ones null), or without a mask those present. */
function fieldsOf(profile: Partial<Profile> | undefined, paths: readonly string[] | undefined): ProfileFields {
  const fields: Record<string, string | null> = {};
  if (paths === undefined || paths.length === 0) {
    for (const field of PROFILE_FIELDS) {
      const value = profile?.[field];
      if (value !== undefined) fields[field] = value;
    }
    return fields;
  }
  const unknown: ErrorDetail[] = [];
  for (const path of paths) {
    if ((PROFILE_FIELDS as readonly string[]).includes(path)) {
      fields[path] = profile?.[path as (typeof PROFILE_FIELDS)[number]] ?? null;
    } else unknown.push({ field: 'update_mask', message: 'must name only name, email and bio', value: path });
  }
  if (unknown.length > 0) throw validationError(unknown);
  return fields;
}

export interface GreetingServicesOptions {
  schemaCode: SchemaCode;
  currencies: Collection<CurrencyRow>;
  profileStore: ProfileStore;
  streams: EventStreams;
}

/** `helloworld.Greeter`, exactly as the gRPC project's examples define it. */
export const greeterService: ServiceImpl<typeof Greeter> = {
  sayHello: (request) => ({ message: `Hello, ${request.name}!` }),
};

/** `greeting.v1.GreetingService`: each REST operation as an RPC, by the same rules and the same code. */
export function greetingService(options: GreetingServicesOptions): ServiceImpl<typeof GreetingService> {
  const { schemaCode, currencies, profileStore, streams } = options;
  const greetChecked = schemaCheck<{ name: string }>(schemaCode, GreetingParams, 'params');
  const searchChecked = schemaCheck<{ keyword: string; page?: number }>(schemaCode, SearchQuery, 'querystring');
  const exchangeChecked = schemaCheck<{ from: string; to: string; amount: string }>(
    schemaCode,
    ExchangeQuery,
    'querystring',
  );
  const listChecked = schemaCheck<{ limit: number; cursor?: string }>(schemaCode, CurrencyListQuery, 'querystring');
  const codeChecked = schemaCheck<{ code: string }>(schemaCode, CurrencyParams, 'params');
  const fieldsChecked = schemaCheck<ProfileFields>(schemaCode, FieldsBody, 'body');
  const eventsChecked = schemaCheck<{ count: number; interval_ms: number; name: string }>(
    schemaCode,
    EventsQuery,
    'querystring',
  );

  return {
    hello: () => ({ message: GREETING, timestamp: localDateTime() }),

    greet: (request) => ({ greeting: `Hello, ${greetChecked({ name: request.name }).name}!` }),

    search: (request) => {
      const query = searchChecked(request.page === undefined ? { keyword: request.keyword } : request);
      const page = query.page ?? 1;
      return { keyword: query.keyword, page, results: `Search results for '${query.keyword}' (page ${page})` };
    },

    echo: (request) => {
      if (request.message === undefined) {
        throw validationError([{ field: 'message', message: 'is required', value: null }]);
      }
      return { received: request.message, echo: true, timestamp: localDateTime() };
    },

    exchange: (request) => {
      const { from, to, amount, rate, result } = exchange(exchangeChecked(request));
      return { from, to, amount: amount.toFixed(), rate: rate.toFixed(), result: result.toFixed() };
    },

    listCurrencies: (request) => {
      if (request.pageSize < 0) {
        throw validationError([{ field: 'page_size', message: 'must not be negative', value: request.pageSize }]);
      }
      // AIP-158: no size is the default, more than the most is the most.
      const limit = request.pageSize === 0 ? DEFAULT_PAGE_SIZE : Math.min(request.pageSize, MAX_PAGE_SIZE);
      const query = listChecked(request.pageToken === '' ? { limit } : { limit, cursor: request.pageToken });
      const result = currencies.query(query);
      if (!result.ok) {
        throw validationError(
          result.issues.map((issue) => (issue.field === 'cursor' ? { ...issue, field: 'page_token' } : issue)),
        );
      }
      const { data, pagination } = result.page;
      return {
        currencies: data.map(asCurrency),
        nextPageToken: 'next_cursor' in pagination ? pagination.next_cursor : '',
      };
    },

    getCurrency: (request) => {
      const { code } = codeChecked({ code: request.code });
      const currency = currencies.find(code);
      if (currency === undefined) throw apiError(404, `No currency ${code.toUpperCase()} in the table.`);
      return { currency: asCurrency(currency) };
    },

    getProfile: async () => ({ profile: asProfile(await readProfile(profileStore, undefined)) }),

    updateProfile: async (request, context) => {
      const fields = fieldsChecked(fieldsOf(request.profile, request.updateMask?.paths));
      const etag = request.profile?.etag ?? '';
      try {
        const stored = await writeProfile(profileStore, { ifMatch: etag === '' ? undefined : etag }, (current) =>
          mergeProfile(current, fields),
        );
        return { profile: asProfile(stored) };
      } catch (error) {
        // AIP-154: an etag that names an older version is ABORTED; the client reads and tries again.
        if (error instanceof ApiError && error.statusCode === 412) {
          throw toConnectError(error, requestOf(context).id, Code.Aborted);
        }
        throw error;
      }
    },

    async *streamGreetings(request, context) {
      const query = eventsChecked({
        ...(request.count !== 0 && { count: request.count }),
        ...(request.intervalMs !== undefined && { interval_ms: request.intervalMs }),
        ...(request.name !== '' && { name: request.name }),
      });
      if (request.afterId < 0 || request.afterId > query.count) {
        throw validationError([
          { field: 'after_id', message: 'must be an integer from 0 to count', value: request.afterId },
        ]);
      }
      if (request.afterId === query.count) return;
      const fastify = requestOf(context);
      if (fastify.server.draining) throw streamWhileShuttingDown();
      const plan = { first: request.afterId + 1, count: query.count, intervalMs: query.interval_ms, name: query.name };
      const stream = streams.begin(fastify, { ...plan, messages: true });
      if (stream === 'max') throw tooManyStreams(streams.max);
      if (stream === 'memory') throw streamWhileMemoryFull();
      const stop = () => stream.destroy();
      context.signal.addEventListener('abort', stop, { once: true });
      try {
        for await (const greeting of stream) yield greeting as GreetingMessage;
      } catch (error) {
        // Destroyed as its call ended (its deadline passed, its client left): the call's reason, not the stream's.
        context.signal.throwIfAborted();
        throw error;
      } finally {
        context.signal.removeEventListener('abort', stop);
        stream.destroy();
      }
      context.signal.throwIfAborted();
    },

    async *echoStream(requests) {
      for await (const request of requests) yield { message: request.message };
    },
  };
}

/** The services whose health is told: the server as a whole (""), and each service of the API. */
const HEALTH_SERVICES = new Set(['', GreetingService.typeName, Greeter.typeName]);

/** How often a Watch looks at readiness again. */
const WATCH_INTERVAL_MS = 1000;

/** `grpc.health.v1.Health`: SERVING while the service is ready (as `/readyz` says), else NOT_SERVING. */
export function healthService(readiness: Readiness): ServiceImpl<typeof Health> {
  const status = async () =>
    (await readiness.notReadyReason()) === null
      ? HealthCheckResponse_ServingStatus.SERVING
      : HealthCheckResponse_ServingStatus.NOT_SERVING;
  return {
    check: async (request) => {
      if (!HEALTH_SERVICES.has(request.service)) {
        throw new ConnectError(`unknown service ${request.service}`, Code.NotFound);
      }
      return { status: await status() };
    },
    list: async () => {
      const now = await status();
      return { statuses: Object.fromEntries([...HEALTH_SERVICES].map((service) => [service, { status: now }])) };
    },
    async *watch(request, context) {
      const { server } = requestOf(context);
      // As the protocol says: an unknown service is watched as SERVICE_UNKNOWN, not refused.
      let last: HealthCheckResponse_ServingStatus | null = null;
      while (!context.signal.aborted) {
        const now = HEALTH_SERVICES.has(request.service)
          ? await status()
          : HealthCheckResponse_ServingStatus.SERVICE_UNKNOWN;
        if (now !== last) yield { status: now };
        last = now;
        // Shutting down: once NOT_SERVING is said, the stream ends, so that the service can.
        if (server.draining) return;
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, WATCH_INTERVAL_MS);
          context.signal.addEventListener('abort', () => resolve(clearTimeout(timer)), { once: true });
        });
      }
    },
  };
}
