/**
 * What the comparison servers answer, computed with the service's own domain code (from dist/),
 * so that they do the same work per request as the service minus the framework and its features.
 */
import { Collection } from '../../dist/domain/collection.js';
import { CURRENCY_COLLECTION, findCurrency } from '../../dist/domain/currencies.js';
import { convert } from '../../dist/domain/exchange.js';
import { exactJson } from '../../dist/lib/json-text.js';
import { localDateTime } from '../../dist/lib/local-time.js';

const currencies = new Collection(CURRENCY_COLLECTION, 'a bench secret that is long enough to sign cursors');

export const hello = () => ({ message: 'Hello, World!', timestamp: localDateTime() });

export const greeting = (name) => ({ greeting: `Hello, ${name}!` });

export const search = (keyword, page) => ({ keyword, page, results: `Search results for '${keyword}' (page ${page})` });

export const echo = (received) => ({ received, echo: true, timestamp: localDateTime() });

/** JSON text: the amounts are decimals, written with every digit. */
export function exchange(from, to, amount) {
  const source = findCurrency(from);
  const target = findCurrency(to);
  const { amount: value, rate, result } = convert(amount, source, target);
  return exactJson({ from: source.code, to: target.code, amount: value, rate, result });
}

export function currencyPage() {
  const { page } = currencies.query({});
  return { ...page, data: page.data.map(({ rate, ...rest }) => ({ ...rest, rate: Number(rate) })) };
}
