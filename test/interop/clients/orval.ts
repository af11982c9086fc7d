import {
  exchange,
  getCurrency,
  getGreeting,
  getHealth,
  getHello,
  getMetrics,
  getOpenApi,
  getProfile,
  getReadiness,
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
  getOpenApi: () => getOpenApi(),
  getMetrics: () => getMetrics(),
});
