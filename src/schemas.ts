import { Type } from 'typebox';

/** Schemas shared by several routes. */

export const LocalDateTime = Type.String({
  description: 'The server’s local date-time (honours TZ), `YYYY-MM-DDTHH:mm:ss.SSS`, no offset.',
  pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}$',
  examples: ['2026-01-02T03:04:05.678'],
});
