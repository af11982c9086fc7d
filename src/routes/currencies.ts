import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { Collection } from '../domain/collection.js';
import { CURRENCIES, CURRENCY_COLLECTION, type Currency, RATES_AS_OF } from '../domain/currencies.js';
import { apiError, errorResponses, validationError } from '../errors.js';
import { collectionPage, collectionQuery, currencyCode, exactDecimal, fieldSelection } from '../schemas.js';

export interface CurrencyRoutesOptions {
  /** Key that signs the list's pagination cursors. */
  cursorSecret: string;
}

export const CurrencyItem = Type.Object(
  {
    code: Type.Optional(Type.String({ description: 'ISO 4217 code.', examples: ['EUR'] })),
    name: Type.Optional(Type.String({ examples: ['Euro'] })),
    minor_units: Type.Optional(
      Type.Integer({ description: 'Digits after the point of the smallest unit (JPY 0, KWD 3).', examples: [2] }),
    ),
    rate: Type.Optional(exactDecimal(`Units per 1 US dollar, as of ${RATES_AS_OF}.`, [0.92])),
  },
  {
    additionalProperties: false,
    title: 'Currency',
    description: 'A currency of the exchange table; only the selected fields when `fields` is given.',
    examples: [{ code: 'EUR', name: 'Euro', minor_units: 2, rate: 0.92 }],
  },
);

/**
 * The table's rates are decimal text; as JSON numbers they go through doubles, which is exact
 * for them: they have few digits (a test checks every one).
 */
function toJson({ rate, ...rest }: Partial<Currency>) {
  return rate === undefined ? rest : { ...rest, rate: Number(rate) };
}

/** Each whole currency of the fixed table as JSON, made once: what most answers list. */
const WHOLE = new Map(CURRENCIES.map((currency) => [currency, toJson(currency)]));

const asJson = (currency: Partial<Currency>) => WHOLE.get(currency as Currency) ?? toJson(currency);

export const CurrencyListQuery = collectionQuery(CURRENCY_COLLECTION);

export const CurrencyParams = Type.Object({ code: currencyCode('ISO 4217 code, any case.', 'EUR') });

export const currencyRoutes: FastifyPluginAsyncTypebox<CurrencyRoutesOptions> = async (app, { cursorSecret }) => {
  const currencies = new Collection(CURRENCY_COLLECTION, cursorSecret);

  app.get(
    '/api/currencies',
    {
      schema: {
        operationId: 'listCurrencies',
        summary: 'Currencies of the exchange table',
        description:
          `The currencies \`/api/exchange\` converts between, with their rates per US dollar as of ${RATES_AS_OF}. ` +
          'Offset pagination by default (`page`, `per_page`); cursor pagination when `cursor` or `limit` is ' +
          'given. Filters, search, sorting and field selection apply to both.',
        tags: ['currencies'],
        querystring: CurrencyListQuery,
        response: { 200: collectionPage(CurrencyItem, 'Currency'), ...errorResponses(400) },
      },
    },
    async (request) => {
      const result = currencies.query(request.query);
      if (!result.ok) throw validationError(result.issues);
      return { ...result.page, data: result.page.data.map(asJson) };
    },
  );

  app.get(
    '/api/currencies/:code',
    {
      schema: {
        operationId: 'getCurrency',
        summary: 'One currency',
        description: 'The currency with this code, in any case; 404 when it is not in the table.',
        tags: ['currencies'],
        params: CurrencyParams,
        querystring: Type.Object({ fields: fieldSelection(CURRENCY_COLLECTION) }),
        response: { 200: CurrencyItem, ...errorResponses(400, 404) },
      },
    },
    async (request) => {
      const { code } = request.params;
      const currency = currencies.find(code, request.query.fields);
      if (currency === undefined) throw apiError(404, `No currency ${code.toUpperCase()} in the table.`);
      return asJson(currency);
    },
  );
};
