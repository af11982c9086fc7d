import { accessSync, constants, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { named, shown, withArgumentsShown } from '../../../src/lib/shown.js';
import { type CheckResult, GROUPS, type Report, runConformance, ToolError } from './index.js';
import { junitXml } from './junit.js';

/**
 * `greeting-service-conformance <base-url>` (and the service's `greeting-service conformance`): runs the conformance checks and prints one line per
 * check and a summary; exit code 0 when nothing failed, 1 when a check failed, 2 when the tool
 * itself could not run (bad arguments, a service it cannot reach or that is not this API).
 */

const usage = (command: string): string => `Usage: ${command} <base-url> [options]

Checks, over HTTP only (HTTP/1.1, or HTTP/2 with --http2), that the service at <base-url> keeps
the interface specification and the contract. Read-only unless --write.

Options:
  --write              also check profile writes (the profile found is restored afterwards)
  --rate-limit         also exhaust this client's rate limit to check the 429
  --slow               also play slow clients, waiting for the service's timeouts (up to 65 s each)
  --only <groups>      only these groups or check ids, comma-separated
  --skip <groups>      not these groups or check ids, comma-separated
  --json               print the report as JSON
  --junit <file>       also write the report as JUnit XML to <file>, for CI
  --fail-on-skip       exit 1 when a check was skipped, as when one failed
  --header 'NAME: VALUE'
                       send this header on every request (repeatable): a gateway's credentials
  --max-requests <n>   most requests to send (default 5000)
  --max-time <s>       most seconds to run (default 600)
  --timeout <s>        most seconds a request may take (default 10)
  --body-limit <bytes> the deployment's body limit (default 1048576)
  --origin <origin>    the Origin of the CORS checks (default https://conformance.example)
  --http2              send every request over HTTP/2: with prior knowledge (h2c) for http://,
                       by ALPN for https://; and run the http2 checks
  --grpc               also check the gRPC services: in the Connect protocol with JSON, and with
                       --http2 in gRPC itself (application/grpc) too
  --ca <file>          a PEM file of the CA certificates to trust for https:// (a private CA)
  --insecure           trust any certificate of an https:// base URL
  -h, --help           this text

Groups: ${GROUPS.join(', ')}
`;

function positive(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!/^\d+(\.\d+)?$/.test(text) || value <= 0)
    throw new ToolError(`--${name} takes a positive number, not ${shown(text)}`);
  return value;
}

const list = (text: string | undefined) =>
  text === undefined
    ? undefined
    : text
        .split(',')
        .map((name) => name.trim())
        .filter((name) => name !== '');

/** The CA file of --ca, or a ToolError saying why it cannot be used. */
function readCa(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ToolError(`--ca ${named(path)} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  if (!text.includes('-----BEGIN CERTIFICATE-----'))
    throw new ToolError(`--ca ${named(path)} is not a PEM file of certificates`);
  return text;
}

/** A field name: an RFC 9110 token. */
const FIELD_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** A field value the kit writes as it is: visible ASCII, spaces and tabs. */
const FIELD_VALUE = /^[\t\x20-\x7e]*$/;
/** Fields the kit sets on each request itself, the framing and the connection's: not --header's to set. */
const OWN_FIELDS = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'proxy-connection',
  'upgrade',
  'te',
  'trailer',
]);

/** `NAME: VALUE` of --header as a field, or a ToolError saying what it takes. */
function field(text: string): [string, string] {
  const colon = text.indexOf(':');
  const name = text.slice(0, Math.max(colon, 0));
  const value = text.slice(colon + 1).trim();
  if (colon < 1 || !FIELD_NAME.test(name) || !FIELD_VALUE.test(value)) {
    throw new ToolError(`--header takes 'NAME: VALUE' (a field name, a colon, then visible ASCII), not ${shown(text)}`);
  }
  if (OWN_FIELDS.has(name.toLowerCase())) {
    throw new ToolError(`--header cannot set ${name}: the kit sets it on each request itself`);
  }
  return [name, value];
}

/** The file of --junit, once its directory is known to be writable: a run is not made to be lost. */
function junitFile(path: string): string {
  try {
    accessSync(dirname(path), constants.W_OK);
  } catch (error) {
    throw new ToolError(
      `--junit ${named(path)}: its directory cannot be written (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  return path;
}

function line(result: CheckResult): string {
  const head = `${result.outcome.padEnd(4)}  ${result.id}  [${result.clause}]  ${result.title}`;
  if (result.outcome === 'fail') return `${head}: expected ${result.expected}, actual ${result.actual}`;
  if (result.outcome === 'skip') return `${head}: ${result.reason}`;
  return head;
}

export function summary(report: Report): string {
  return `${report.passed} passed, ${report.failed} failed, ${report.skipped} skipped`;
}

/** What a run says of a deployment that injects faults; null when no answer named one. */
export function faultsNote(report: Report): string | null {
  if (report.injected === 0) return null;
  return `the deployment injects faults: ${report.injected} of ${report.requests} answers named one (X-Fault-Injected); a check failed by an injected error is skipped, saying so`;
}

/** Runs the command line `args`, `command` being what runs it (for its help and errors); resolves with the exit code. */
export async function conformanceMain(args: readonly string[], command: string): Promise<number> {
  const out = process.stdout;
  const err = process.stderr;
  try {
    const { values, positionals } = parseArgs({
      args: [...args],
      allowPositionals: true,
      options: {
        write: { type: 'boolean' },
        'rate-limit': { type: 'boolean' },
        slow: { type: 'boolean' },
        only: { type: 'string' },
        skip: { type: 'string' },
        json: { type: 'boolean' },
        junit: { type: 'string' },
        'fail-on-skip': { type: 'boolean' },
        header: { type: 'string', multiple: true },
        'max-requests': { type: 'string' },
        'max-time': { type: 'string' },
        timeout: { type: 'string' },
        'body-limit': { type: 'string' },
        origin: { type: 'string' },
        http2: { type: 'boolean' },
        grpc: { type: 'boolean' },
        ca: { type: 'string' },
        insecure: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help) {
      out.write(usage(command));
      return 0;
    }
    if (positionals.length !== 1)
      throw new ToolError('takes one base URL, such as http://localhost:8080 (--help for more)');
    const progress = !values.json && err.isTTY === true;
    const clear = () => progress && err.write('\r\x1b[K');
    const maxTime = positive('max-time', values['max-time']);
    const timeout = positive('timeout', values.timeout);
    const headers = values.header?.map(field);
    const junit = values.junit === undefined ? undefined : junitFile(values.junit);
    const report = await runConformance({
      baseUrl: positionals[0] as string,
      write: values.write ?? false,
      rateLimit: values['rate-limit'] ?? false,
      slow: values.slow ?? false,
      ...(values.only !== undefined && { only: list(values.only) }),
      ...(values.skip !== undefined && { skip: list(values.skip) }),
      ...(values['max-requests'] !== undefined && { maxRequests: positive('max-requests', values['max-requests']) }),
      ...(maxTime !== undefined && { maxTimeMs: maxTime * 1000 }),
      ...(timeout !== undefined && { requestTimeoutMs: timeout * 1000 }),
      ...(values['body-limit'] !== undefined && { bodyLimit: positive('body-limit', values['body-limit']) }),
      ...(values.origin !== undefined && { origin: values.origin }),
      ...(values.http2 === true && { http2: true }),
      ...(values.grpc === true && { grpc: true }),
      ...(values.ca !== undefined && { ca: readCa(values.ca) }),
      ...(values.insecure === true && { insecure: true }),
      ...(headers !== undefined && { headers }),
      onCheckStart(check, index, total) {
        if (progress) err.write(`\r\x1b[K[${index + 1}/${total}] ${check.id}`);
      },
      onWait(seconds) {
        if (progress) err.write(`\r\x1b[Kwaiting ${seconds} s for the rate-limit window`);
      },
      onResult(result) {
        clear();
        if (!values.json) out.write(`${line(result)}\n`);
      },
    });
    clear();
    const note = faultsNote(report);
    const skipFails = values['fail-on-skip'] === true && report.skipped > 0;
    if (junit !== undefined) {
      try {
        writeFileSync(junit, junitXml(report));
      } catch (error) {
        throw new ToolError(
          `--junit ${named(junit)} cannot be written (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
        );
      }
    }
    if (values.json) out.write(`${JSON.stringify(report, null, 2)}\n`);
    else {
      const failOnSkip = skipFails ? ' (--fail-on-skip: a skipped check fails the run)' : '';
      out.write(`${note === null ? '' : `${note}\n`}${summary(report)}${failOnSkip}\n`);
    }
    return report.failed === 0 && !skipFails ? 0 : 1;
  } catch (error) {
    const message =
      error instanceof ToolError
        ? error.message
        : (error as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS')
          ? withArgumentsShown((error as Error).message)
          : `unexpected error: ${(error as Error).message}`;
    err.write(`${command}: ${message.split('\n')[0]}\n`);
    return 2;
  }
}
