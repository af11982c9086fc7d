import { Decimal as DecimalJs } from 'decimal.js';

/**
 * Decimal arithmetic for money: 50 significant digits, far beyond any amount and rate the
 * service handles, so that only the explicit roundings (half-even, to a stated number of
 * decimals) ever change a value. Binary floating point never touches an amount or a rate.
 */
export const Decimal = DecimalJs.clone({ precision: 50, rounding: DecimalJs.ROUND_HALF_EVEN });
export type Decimal = DecimalJs;
