import { Decimal } from 'decimal.js';
import { expectEnvelope, expectKeys, expectObject, expectValidation, fail, show, skip } from '../assert.js';
import type { Check, Context, Currency } from '../context.js';
import { type Exact, isExactObject, parseExact } from '../json.js';

const CLAUSE = 'spec 4.6; contract: Exchange';

/** Enough digits that a division's rounding can never move a result across a rounding boundary. */
const Exactly = Decimal.clone({ precision: 80, rounding: Decimal.ROUND_HALF_EVEN });

/**
 * Amounts that make the roundings matter: whole, halves at the minor unit, ten fraction
 * digits, the largest amount. Each pair gets one, in turn.
 */
const AMOUNTS = [
  '100',
  '0.375',
  '1234567.8912345678',
  '1000000000000',
  '0.0000000001',
  '0.5',
  '999999999999.9999999999',
  '0',
  '12.345',
];

/** Requests of exchange.every-pair under way at once; fewer than the client's rate-limit reserve. */
const PARALLEL = 6;

interface Expected {
  rate: Decimal;
  result: Decimal;
}

/** What the contract says a conversion answers, from the table alone. */
function expectedConversion(amount: string, from: Currency, to: Currency): Expected {
  const value = new Exactly(amount);
  if (from.code === to.code) return { rate: new Exactly(1), result: value };
  return {
    rate: new Exactly(to.rate.toString()).div(from.rate.toString()).toDecimalPlaces(6, Decimal.ROUND_HALF_EVEN),
    result: value
      .times(to.rate.toString())
      .div(from.rate.toString())
      .toDecimalPlaces(to.minor_units, Decimal.ROUND_HALF_EVEN),
  };
}

const text = (value: Exact | undefined) =>
  Decimal.isDecimal(value) ? (value as Decimal).toString() : JSON.stringify(value ?? null);

/** One conversion, checked exactly against the table: from the answer's text, never through doubles. */
async function expectConversion(
  ctx: Context,
  amount: string,
  from: Currency,
  to: Currency,
  sentFrom = from.code,
  sentTo = to.code,
): Promise<void> {
  const path = `/api/exchange?from=${sentFrom}&to=${sentTo}&amount=${amount}`;
  const res = await ctx.get(path);
  expectKeys(expectObject(res, 200), ['from', 'to', 'amount', 'rate', 'result'], `GET ${res.request.path}`);
  const body = parseExact(res.text);
  if (!isExactObject(body)) return fail('an object', show(res.text));
  const get = (key: string) => body.values.get(key);
  const expected = expectedConversion(amount, from, to);
  const same = (value: Exact | undefined, wanted: Decimal) => Decimal.isDecimal(value) && (value as Decimal).eq(wanted);
  if (
    get('from') !== from.code ||
    get('to') !== to.code ||
    !same(get('amount'), new Decimal(amount)) ||
    !same(get('rate'), expected.rate) ||
    !same(get('result'), expected.result)
  ) {
    fail(
      `GET ${res.request.path}: from ${from.code}, to ${to.code}, amount ${amount}, rate ${expected.rate}, result ${expected.result}`,
      `from ${text(get('from'))}, to ${text(get('to'))}, amount ${text(get('amount'))}, rate ${text(get('rate'))}, result ${text(get('result'))}`,
    );
  }
}

/** A positive decimal as a fraction of integers: 150.85 is 15085/100. */
function fraction(value: Decimal): [bigint, bigint] {
  const [whole = '0', digits = ''] = value.toFixed().split('.');
  return [BigInt(whole + digits), 10n ** BigInt(digits.length)];
}

function gcd(a: bigint, b: bigint): bigint {
  let [x, y] = [a, b];
  while (y !== 0n) [x, y] = [y, x % y];
  return x;
}

/** `units / 10^digits` as a plain decimal. */
function decimalText(units: bigint, digits: bigint): string {
  return new Decimal(units.toString()).div(new Decimal(10).pow(digits.toString())).toFixed();
}

const MAX_AMOUNT = 10n ** 12n;

/**
 * Amounts whose exact conversion lies halfway between two neighbours at the target's minor units:
 * `even` where the lower neighbour ends in an even digit (half-even keeps it, half-up and ceiling
 * do not), `odd` where it ends in an odd one (half-even leaves it, half-down and truncation do
 * not). From the table's rates alone: amount × to/from = n / (2·10^minor), n odd, the amount a
 * plain decimal within the contract's bounds; null where the two rates allow none.
 */
export function ties(from: Currency, to: Currency): { even: string; odd: string } | null {
  const [toUnits, toScale] = fraction(to.rate);
  const [fromUnits, fromScale] = fraction(from.rate);
  const num = toUnits * fromScale;
  const den = toScale * fromUnits;
  if (num === 0n || den === 0n) return null;
  const half = 2n * 10n ** BigInt(to.minor_units) * num;
  for (let digits = 0n; digits <= 10n; digits += 1n) {
    const scaled = den * 10n ** digits;
    // amount = n · scaled / half / 10^digits is a decimal of `digits` places when `step` divides n.
    const step = half / gcd(half, scaled);
    if (step % 2n === 0n) continue;
    const found: { even?: string; odd?: string } = {};
    for (let factor = 1n; factor <= 7n; factor += 2n) {
      const n = step * factor;
      const units = (n * scaled) / half;
      if (units === 0n || units > MAX_AMOUNT * 10n ** digits) break;
      found[((n - 1n) / 2n) % 2n === 0n ? 'even' : 'odd'] ??= decimalText(units, digits);
    }
    if (found.even !== undefined && found.odd !== undefined) return { even: found.even, odd: found.odd };
  }
  return null;
}

async function pair(ctx: Context, from: string, to: string): Promise<[Currency, Currency]> {
  const table = await ctx.table();
  const a = table.find((c) => c.code === from);
  const b = table.find((c) => c.code === to);
  if (a === undefined || b === undefined) return fail(`${from} and ${to} in the table`, 'missing');
  return [a, b];
}

export const exchangeChecks: Check[] = [
  {
    id: 'exchange.example',
    group: 'exchange',
    clause: CLAUSE,
    title: 'USD to EUR answers {from, to, amount, rate, result} from the table',
    async run(ctx) {
      const [usd, eur] = await pair(ctx, 'USD', 'EUR');
      await expectConversion(ctx, '100', usd, eur);
    },
  },
  {
    id: 'exchange.every-pair',
    group: 'exchange',
    clause: CLAUSE,
    title: 'every ordered pair of the table converts exactly: rate to 6 decimals, result to minor units, half-even',
    async run(ctx) {
      const table = await ctx.table();
      const pairs = table.flatMap((from) => table.map((to) => [from, to] as const));
      // A few at a time, as a client would: over a network, one after the other takes long.
      let next = 0;
      const worker = async (): Promise<void> => {
        for (let n = next++; n < pairs.length; n = next++) {
          const [from, to] = pairs[n] as (typeof pairs)[number];
          await expectConversion(ctx, AMOUNTS[n % AMOUNTS.length] as string, from, to);
        }
      };
      await Promise.all(Array.from({ length: PARALLEL }, worker));
    },
  },
  {
    id: 'exchange.half-even',
    group: 'exchange',
    clause: CLAUSE,
    title:
      'into every currency of the table, two amounts whose results are ties at its minor units round half-even: not half-up, half-down, truncation or ceiling',
    async run(ctx) {
      const table = await ctx.table();
      // From the currency with the simplest rate first: its ties are the easiest to reach.
      const sources = [...table].sort((a, b) => a.rate.toFixed().length - b.rate.toFixed().length);
      const untold: string[] = [];
      for (const to of table) {
        let found = false;
        for (const from of sources) {
          const amounts = from.code === to.code ? null : ties(from, to);
          if (amounts === null) continue;
          await expectConversion(ctx, amounts.even, from, to);
          await expectConversion(ctx, amounts.odd, from, to);
          found = true;
          break;
        }
        if (!found) untold.push(to.code);
      }
      if (untold.length === table.length) skip('the rates of the table allow no amount whose result is a tie');
    },
  },
  {
    id: 'exchange.case',
    group: 'exchange',
    clause: CLAUSE,
    title: 'codes are read in any case and answered in upper case',
    async run(ctx) {
      const [usd, jpy] = await pair(ctx, 'USD', 'JPY');
      await expectConversion(ctx, '100.5', usd, jpy, 'usd', 'jPy');
    },
  },
  {
    id: 'exchange.same-currency',
    group: 'exchange',
    clause: CLAUSE,
    title: 'a currency to itself is rate 1 and the amount unchanged',
    async run(ctx) {
      const [eur] = await pair(ctx, 'EUR', 'EUR');
      await expectConversion(ctx, '12.345', eur, eur);
    },
  },
  {
    id: 'exchange.unsupported',
    group: 'exchange',
    clause: CLAUSE,
    title: 'a well-formed code not in the table is a 422 UNSUPPORTED_CURRENCY, one entry per such field',
    async run(ctx) {
      const table = await ctx.table();
      const [a = 'QQQ', b = 'ZZZ'] = ['QQQ', 'ZZZ', 'XYZ', 'QZQ'].filter((code) => !table.some((c) => c.code === code));
      const error = expectEnvelope(
        await ctx.get(`/api/exchange?from=${a}&to=${b}&amount=1`),
        422,
        'UNSUPPORTED_CURRENCY',
      );
      const fields = error.details.map((detail) => `${detail.field}=${String(detail.value)}`).sort();
      if (fields.join() !== `from=${a},to=${b}`) fail(`details for from=${a} and to=${b}`, show(error.details));
      const one = expectEnvelope(await ctx.get(`/api/exchange?from=USD&to=${b}&amount=1`), 422, 'UNSUPPORTED_CURRENCY');
      if (one.details.length !== 1 || one.details[0]?.field !== 'to')
        fail('one details entry, for to', show(one.details));
    },
  },
  {
    id: 'exchange.malformed-code',
    group: 'exchange',
    clause: CLAUSE,
    title: 'a code that is not three letters is a 400 VALIDATION_ERROR naming it',
    async run(ctx) {
      for (const [from, to, field, value] of [
        ['US', 'EUR', 'from', 'US'],
        ['USD', 'EURO', 'to', 'EURO'],
        ['U5D', 'EUR', 'from', 'U5D'],
      ]) {
        expectValidation(await ctx.get(`/api/exchange?from=${from}&to=${to}&amount=1`), field as string, value);
      }
      expectValidation(await ctx.get('/api/exchange?to=EUR&amount=1'), 'from', null);
    },
  },
  {
    id: 'exchange.amount-invalid',
    group: 'exchange',
    clause: CLAUSE,
    title: 'an amount that is not a plain decimal from 0 to 10^12 with at most 10 fraction digits is a 400',
    async run(ctx) {
      for (const amount of [
        '1e3',
        '-1',
        '1000000000000.01',
        '0.12345678901',
        'abc',
        '',
        '0x10',
        'NaN',
        'Infinity',
        '+5',
        '1,5',
      ]) {
        const res = await ctx.get(`/api/exchange?from=USD&to=EUR&amount=${encodeURIComponent(amount)}`);
        expectValidation(res, 'amount', amount);
      }
      expectValidation(await ctx.get('/api/exchange?from=USD&to=EUR'), 'amount', null);
    },
  },
  {
    id: 'exchange.amount-bounds',
    group: 'exchange',
    clause: CLAUSE,
    title: '0, 10^12 and ten fraction digits are accepted',
    async run(ctx) {
      const [usd, kwd] = await pair(ctx, 'USD', 'KWD');
      for (const amount of ['0', '1000000000000', '0.0000000001', '1000000000000.0000000000']) {
        await expectConversion(ctx, amount, usd, kwd);
      }
    },
  },
];
