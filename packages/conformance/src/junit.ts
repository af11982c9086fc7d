import type { CheckResult, Report } from './index.js';

/**
 * A report as JUnit XML, the form CI systems read (Jenkins, GitLab, GitHub Actions' reporters):
 * a `testsuite` per group, a `testcase` per check (`classname` the group, `name` the check's id),
 * `failure` with what was expected and what came, `skipped` with why.
 */

const ENTITIES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&apos;',
};

/**
 * Text as XML 1.0 character data or an attribute value. What XML cannot hold even as a reference (a
 * control character, a lone surrogate, U+FFFE, U+FFFF) is written as the `\uXXXX` that names it;
 * in an attribute, tabs and line ends are references, which its normalisation keeps.
 */
export function xmlEscaped(text: string, attribute = false): string {
  let out = '';
  for (const char of text) {
    const code = char.codePointAt(0) as number;
    const entity = ENTITIES[char];
    if (entity !== undefined) out += entity;
    else if (char === '\t' || char === '\n' || char === '\r') {
      out += attribute || char === '\r' ? `&#${code};` : char;
    } else if (code < 0x20 || (code >= 0xd800 && code <= 0xdfff) || code === 0xfffe || code === 0xffff) {
      out += `\\u${code.toString(16).padStart(4, '0')}`;
    } else out += char;
  }
  return out;
}

const seconds = (ms: number) => (ms / 1000).toFixed(3);

function testcase(result: CheckResult): string {
  const head = `    <testcase classname="${xmlEscaped(result.group)}" name="${xmlEscaped(result.id)}" time="${seconds(result.durationMs)}"`;
  const about = `${result.id} [${result.clause}] ${result.title}`;
  if (result.outcome === 'fail') {
    const message = `expected ${result.expected}, actual ${result.actual}`;
    return (
      `${head}>\n      <failure message="${xmlEscaped(message, true)}" type="conformance">` +
      `${xmlEscaped(`${about}\nexpected: ${result.expected}\nactual: ${result.actual}`)}</failure>\n    </testcase>`
    );
  }
  if (result.outcome === 'skip') {
    return `${head}>\n      <skipped message="${xmlEscaped(result.reason ?? '', true)}"/>\n    </testcase>`;
  }
  return `${head}/>`;
}

export function junitXml(report: Report): string {
  const groups = new Map<string, CheckResult[]>();
  for (const result of report.results) groups.set(result.group, [...(groups.get(result.group) ?? []), result]);
  const suites = [...groups].map(([group, results]) => {
    const count = (outcome: CheckResult['outcome']) => results.filter((result) => result.outcome === outcome).length;
    const time = results.reduce((sum, result) => sum + result.durationMs, 0);
    return (
      `  <testsuite name="${xmlEscaped(`conformance.${group}`)}" tests="${results.length}" failures="${count('fail')}"` +
      ` errors="0" skipped="${count('skip')}" time="${seconds(time)}">\n${results.map(testcase).join('\n')}\n  </testsuite>`
    );
  });
  return (
    '<?xml version="1.0" encoding="UTF-8"?>\n' +
    `<testsuites name="${xmlEscaped(`conformance ${report.target}`)}" tests="${report.results.length}"` +
    ` failures="${report.failed}" errors="0" skipped="${report.skipped}" time="${seconds(report.durationMs)}">\n` +
    `${suites.map((suite) => `${suite}\n`).join('')}</testsuites>\n`
  );
}
