import {
  exchange,
  getAsyncApi,
  getCurrency,
  getEvents,
  getGreeting,
  getHealth,
  getHello,
  getMetrics,
  getOpenApi,
  getProfile,
  getReadiness,
  getVersion,
  listCurrencies,
  search,
} from './generated/sdk.gen.js';
import { type Answer, report } from './report.js';

/** Every read operation of the client @hey-api/openapi-ts generated, with the base URL it was generated with. */
const answer = async (call: Promise<{ response?: Response; data?: unknown; error?: unknown }>): Promise<Answer> => {
  const { response, data, error } = await call;
  return { status: response?.status ?? 0, data: data ?? error };
};

await report({
  getHello: () => answer(getHello()),
  getGreeting: () => answer(getGreeting({ path: { name: 'Ada' } })),
  search: () => answer(search({ query: { keyword: 'books', page: 2 } })),
  getProfile: () => answer(getProfile()),
  exchange: () => answer(exchange({ query: { from: 'USD', to: 'EUR', amount: '100' } })),
  listCurrencies: () => answer(listCurrencies({ query: { sort: ['-rate', 'code'], per_page: 3 } })),
  getCurrency: () => answer(getCurrency({ path: { code: 'EUR' }, query: { fields: ['code', 'rate'] } })),
  getHealth: () => answer(getHealth()),
  getReadiness: () => answer(getReadiness()),
  getVersion: () => answer(getVersion()),
  getOpenApi: () => answer(getOpenApi()),
  // The generator reads text/event-stream as a stream of the events' data, parsed.
  getEvents: async () => {
    let failure: unknown;
    const { stream } = await getEvents({
      query: { count: 2, interval_ms: 0, name: 'Ada' },
      sseMaxRetryAttempts: 0,
      onSseError: (error) => {
        failure = error;
      },
    });
    const data: unknown[] = [];
    for await (const event of stream) data.push(event);
    return failure === undefined ? { status: 200, data } : { status: 0, data: String(failure) };
  },
  getAsyncApi: () => answer(getAsyncApi()),
  getMetrics: () => answer(getMetrics()),
});
