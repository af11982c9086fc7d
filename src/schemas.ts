import { Type } from 'typebox';
import { CURRENCY_CODE_PATTERN } from './domain/currencies.js';

/** Schemas shared by several routes. */

export const LocalDateTime = Type.String({
  description: 'The server’s local date-time (honours TZ), `YYYY-MM-DDTHH:mm:ss.SSS`, no offset.',
  pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}$',
  examples: ['2026-01-02T03:04:05.678'],
});

/** A currency code parameter: three ASCII letters in any case; whether it is in the table is the route's business. */
export function currencyCode(description: string, example: string) {
  return Type.String({
    description,
    pattern: `^${CURRENCY_CODE_PATTERN}$`,
    errorMessage: 'must be a three-letter currency code',
    examples: [example],
  });
}
