import { Decimal } from '../lib/decimal.js';
import type { Currency } from './currencies.js';

export const MAX_AMOUNT = '1000000000000';
export const AMOUNT_FRACTION_DIGITS = 10;

/**
 * An amount as the service accepts it: decimal digits with an optional point followed by 1
 * to 10 digits, no sign, no exponent, leading zeros allowed, from 0 to 10^12 inclusive.
 * The range is part of the pattern, so that an amount is judged exactly, as text, never as a
 * double: below 10^12 means at most 12 integer digits once leading zeros are dropped, and
 * 10^12 itself may only be followed by zeros. (This works because the maximum is a power of
 * ten; the tests check the pattern against decimal comparisons.)
 */
export const AMOUNT_PATTERN = `^0*(?:\\d{1,${MAX_AMOUNT.length - 1}}(?:\\.\\d{1,${AMOUNT_FRACTION_DIGITS}})?|${MAX_AMOUNT}(?:\\.0{1,${AMOUNT_FRACTION_DIGITS}})?)$`;

/** Decimals of the quoted `rate`. */
export const RATE_DECIMALS = 6;

export interface Conversion {
  /** The amount converted, its exact value. */
  readonly amount: Decimal;
  /** Units of the target per unit of the source, rounded half-even to RATE_DECIMALS. */
  readonly rate: Decimal;
  /** The amount in the target currency, rounded half-even to the target's minor units. */
  readonly result: Decimal;
}

/**
 * Converts an amount (text matching AMOUNT_PATTERN) between two currencies of the table. The
 * cross rate is rate(to) / rate(from); `result` is the amount times the unrounded cross
 * rate, computed as amount × rate(to) / rate(from): the product is exact and the one division
 * is correct to 50 digits, so a result that lies exactly halfway between two minor units is
 * seen as the tie it is and goes to the even neighbour. (Dividing first would give a 50-digit
 * cross rate whose error can push such a tie either way.)
 *
 * Converting a currency to itself is no conversion: rate 1 and the amount unchanged, not
 * rounded to minor units.
 */
export function convert(amount: string, from: Currency, to: Currency): Conversion {
  const value = new Decimal(amount);
  if (from.code === to.code) return { amount: value, rate: new Decimal(1), result: value };
  return {
    amount: value,
    rate: new Decimal(to.rate).div(from.rate).toDecimalPlaces(RATE_DECIMALS, Decimal.ROUND_HALF_EVEN),
    result: value.times(to.rate).div(from.rate).toDecimalPlaces(to.minor_units, Decimal.ROUND_HALF_EVEN),
  };
}
