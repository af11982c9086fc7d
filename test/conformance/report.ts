import type { Report } from '../../src/conformance/index.js';

/** The failures and skips of a report, one line each, for an assertion message. */
export function notPassed(report: Report): string[] {
  return report.results
    .filter((result) => result.outcome !== 'pass')
    .map((result) => `${result.outcome} ${result.id}: ${result.expected ?? result.reason} | ${result.actual ?? ''}`);
}
