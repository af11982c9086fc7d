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
} from './generated/api.js';
import { report } from './report.js';

// Every read operation of the client orval generated, with the base URL it was generated with.
await report({
  getHello: () => getHello(),
  getGreeting: () => getGreeting('Ada'),
  search: () => search({ keyword: 'books', page: 2 }),
  getProfile: () => getProfile(),
  exchange: () => exchange({ from: 'USD', to: 'EUR', amount: '100' }),
  listCurrencies: () => listCurrencies({ sort: ['-rate', 'code'], per_page: 3 }),
  getCurrency: () => getCurrency('EUR', { fields: ['code', 'rate'] }),
  getHealth: () => getHealth(),
  getReadiness: () => getReadiness(),
  getVersion: () => getVersion(),
  getOpenApi: () => getOpenApi(),
  // The generator reads text/event-stream whole, as text: the events' data lines, parsed.
  getEvents: async () => {
    const { status, data } = await getEvents({ count: 2, interval_ms: 0, name: 'Ada' });
    return { status, data: [...String(data).matchAll(/^data: (.*)$/gm)].map(([, json]) => JSON.parse(json as string)) };
  },
  getAsyncApi: () => getAsyncApi(),
  getMetrics: () => getMetrics(),
});
