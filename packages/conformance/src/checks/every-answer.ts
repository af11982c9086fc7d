import type { Finding, Rule } from '../answers.js';
import { fail } from '../assert.js';
import type { Check, Context } from '../context.js';

/**
 * The headers every answer must carry, held to every answer the run received (the checks before
 * these ran, whatever they asked): they come last, and send nothing themselves.
 */

/** Distinct routes shown in a failure, the first of each. */
const SHOWN = 4;

function expectNone(ctx: Context, rule: Rule, expected: string): void {
  const findings = ctx.answers.findings[rule];
  if (findings.length === 0) return;
  const first = new Map<string, Finding>();
  for (const finding of findings) {
    const key = `${finding.request.split('?')[0]} ${finding.wrong}`;
    if (!first.has(key)) first.set(key, finding);
  }
  const shown = [...first.values()].slice(0, SHOWN).map((f) => `${f.request} (${f.status}): ${f.wrong}`);
  const more = first.size > SHOWN ? `; and ${first.size - SHOWN} more` : '';
  fail(expected, `${findings.length} of ${ctx.answers.seen} answers broke it: ${shown.join('; ')}${more}`);
}

export const everyAnswerChecks: Check[] = [
  {
    id: 'request-id.every-answer',
    group: 'request-id',
    clause: 'contract: Everywhere',
    title: 'every answer of the run carried X-Request-Id',
    async run(ctx) {
      expectNone(ctx, 'request-id', 'X-Request-Id on every answer, errors included');
    },
  },
  {
    id: 'http.every-answer',
    group: 'http',
    clause: 'contract: Everywhere',
    title:
      'every answer of the run with a body, errors included, was application/json; charset=utf-8 (but /metrics and /docs)',
    async run(ctx) {
      expectNone(
        ctx,
        'json',
        'Content-Type: application/json; charset=utf-8 on every answer with a body but /metrics and /docs',
      );
    },
  },
  {
    id: 'security.every-answer',
    group: 'security',
    clause: 'contract: Rate limiting, versioning, limits (security headers)',
    title: 'every JSON answer of the run carried nosniff, DENY, the API CSP and no-store (no-cache on the profile)',
    async run(ctx) {
      expectNone(
        ctx,
        'security',
        "on every JSON answer: X-Content-Type-Options: nosniff, X-Frame-Options: DENY, Content-Security-Policy: default-src 'none'; frame-ancestors 'none', Cache-Control: no-store (no-cache on the profile)",
      );
    },
  },
  {
    id: 'versioning.every-answer',
    group: 'versioning',
    clause: 'spec 9; contract: Rate limiting, versioning, limits (versioning)',
    title: 'every answer under /api of the run carried API-Version: 1',
    async run(ctx) {
      expectNone(ctx, 'api-version', 'API-Version: 1 on every answer under /api, errors included');
    },
  },
];
