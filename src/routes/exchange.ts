import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { type Static, Type } from 'typebox';
import { findCurrency, RATES_AS_OF } from '../domain/currencies.js';
import {
  AMOUNT_FRACTION_DIGITS,
  AMOUNT_PATTERN,
  type Conversion,
  convert,
  MAX_AMOUNT,
  RATE_DECIMALS,
} from '../domain/exchange.js';
import { errorResponses, unsupportedCurrency } from '../errors.js';
import { exactJson } from '../lib/json-text.js';
import { currencyCode, exactDecimal } from '../schemas.js';

export const ExchangeQuery = Type.Object({
  from: currencyCode('Currency to convert from: an ISO 4217 code, any case.', 'USD'),
  to: currencyCode('Currency to convert to: an ISO 4217 code, any case.', 'EUR'),
  // Text, not a number: the amount is judged and converted as an exact decimal, never as a double.
  amount: Type.String({
    description:
      `A plain decimal from 0 to ${MAX_AMOUNT}: digits, optionally a point and 1 to ${AMOUNT_FRACTION_DIGITS} ` +
      'more digits. Leading zeros are allowed; a sign, an exponent, `.5` and `5.` are not.',
    pattern: AMOUNT_PATTERN,
    errorMessage: `must be a decimal number from 0 to ${MAX_AMOUNT} with at most ${AMOUNT_FRACTION_DIGITS} fraction digits`,
    examples: ['100'],
  }),
});

export const Exchange = Type.Object(
  {
    from: Type.String({ description: 'The source currency, upper case.', examples: ['USD'] }),
    to: Type.String({ description: 'The target currency, upper case.', examples: ['EUR'] }),
    amount: exactDecimal('The amount converted, its exact value in plain notation.', [100]),
    rate: exactDecimal(
      `Units of \`to\` per unit of \`from\`, rounded half-even to ${RATE_DECIMALS} decimals; 1 for the same currency.`,
      [0.92],
    ),
    result: exactDecimal(
      'The amount times the unrounded cross rate, rounded half-even to the minor units of `to`; every digit ' +
        'exact, even beyond 2^53. The amount itself, unrounded, for the same currency.',
      [92],
    ),
  },
  { additionalProperties: false, title: 'ExchangeResult' },
);

/** A valid query's conversion, with the codes in upper case; 422 for a code not in the table. */
export function exchange({
  from,
  to,
  amount,
}: Static<typeof ExchangeQuery>): Conversion & { from: string; to: string } {
  const source = findCurrency(from);
  const target = findCurrency(to);
  if (source === undefined || target === undefined) {
    const codes = [
      { field: 'from', value: from, known: source !== undefined },
      { field: 'to', value: to, known: target !== undefined },
    ];
    throw unsupportedCurrency(codes.filter((code) => !code.known));
  }
  return { from: source.code, to: target.code, ...convert(amount, source, target) };
}

export const exchangeRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/api/exchange',
    {
      schema: {
        operationId: 'exchange',
        summary: 'Currency conversion',
        description:
          `Converts an amount with the service's fixed table of rates per US dollar, as of ${RATES_AS_OF}; ` +
          'the cross rate is rate(to) / rate(from), in decimal arithmetic. Malformed parameters are a 400; ' +
          'well-formed codes that are not in the table (see `/api/currencies`) a 422.',
        tags: ['exchange'],
        querystring: ExchangeQuery,
        response: { 200: Exchange, ...errorResponses(400, 422) },
      },
    },
    async (request, reply) => {
      // Written here rather than by the response serialiser, which would pass the decimals through doubles.
      const text = exactJson(exchange(request.query));
      return reply.type('application/json; charset=utf-8').send(text as unknown as Static<typeof Exchange>);
    },
  );
};
