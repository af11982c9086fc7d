import { readAdminToken } from './files.js';
import { boolean, fraction, integer } from './parsers.js';
import { ConfigError, concern, type Given, setting } from './setting.js';

/** The longest delay a fault injects, by setting or by header, in ms. */
export const MAX_FAULT_DELAY_MS = 60_000;

/** How long an injected delay lasts: `min` ms, or a uniform draw from `min` to `max`. */
export interface DelayRange {
  min: number;
  max: number;
}

/** `N` or `MIN-MAX`, milliseconds up to MAX_FAULT_DELAY_MS. */
function delayRange(raw: string): DelayRange {
  const match = /^(\d{1,9})(?:-(\d{1,9}))?$/.exec(raw);
  const min = Number(match?.[1]);
  const max = match?.[2] === undefined ? min : Number(match[2]);
  if (match === null || max > MAX_FAULT_DELAY_MS || min > max) {
    throw new Error(
      `must be milliseconds such as 500, or a range such as 100-2000 (the smaller first), 0 to ${MAX_FAULT_DELAY_MS}`,
    );
  }
  return { min, max };
}

const settings = {
  /** Fault injection: each FAULT_ setting at its default turns nothing on, and costs nothing. */
  faultErrorRate: setting({
    env: 'FAULT_ERROR_RATE',
    help: 'the share of requests to /api answered with an injected error (FAULT_ERROR_STATUS) instead of being served, a decimal from 0 to 1 such as 0.05',
    default: 0,
    parse: fraction,
  }),
  faultErrorStatus: setting({
    env: 'FAULT_ERROR_STATUS',
    help: "the status of the errors FAULT_ERROR_RATE injects, 400 to 599, answered with the contract's envelope (Retry-After: 1 on 503 and 429)",
    default: 503,
    parse: integer(400, 599),
  }),
  faultDelayRate: setting({
    env: 'FAULT_DELAY_RATE',
    help: 'the share of requests to /api held for FAULT_DELAY_MS before they are served, a decimal from 0 to 1 such as 0.1',
    default: 0,
    parse: fraction,
  }),
  faultDelayMs: setting<DelayRange>({
    env: 'FAULT_DELAY_MS',
    help: `how long FAULT_DELAY_RATE holds a request, in ms: N, or MIN-MAX for a uniform draw between the two, 0 to ${MAX_FAULT_DELAY_MS}`,
    default: { min: 1000, max: 1000 },
    defaultText: '1000',
    parse: delayRange,
  }),
  faultHeaders: setting({
    env: 'FAULT_HEADERS',
    help: "true, false, 1 or 0, in any case; true: a request to /api may ask for faults with Envoy's x-envoy-fault-* headers and with x-fault-connection (reset, empty, truncate, malformed)",
    default: false,
    parse: boolean,
  }),
  faultsExpected: setting({
    env: 'FAULTS_EXPECTED',
    help: 'true, false, 1 or 0, in any case; true: this deployment injects faults on purpose (a test or chaos environment), as /metrics says (faults_expected), and the GreetingServiceFaultsInjected alert is silent for it; false: an injected fault here is a mistake, and pages',
    default: false,
    parse: boolean,
  }),
  /** The operator's readiness switch; null: the routes do not exist. */
  adminTokenFile: setting<string | null>({
    env: 'ADMIN_TOKEN_FILE',
    help: 'a file holding the bearer token of POST /readyz/disable and POST /readyz/enable (one trailing newline ignored), read at start and again at each of those requests, so a rotated token is picked up; unset: no such routes',
    default: null,
    parse: (raw) => {
      readAdminToken(raw);
      return raw;
    },
  }),
};

/** The settings of a fault that do nothing without the share of requests it applies to. */
const FAULT_RATES = [
  ['faultErrorStatus', 'faultErrorRate'],
  ['faultDelayMs', 'faultDelayRate'],
] as const;

/** A fault's status or length given without its rate is a mistake: it would inject nothing. */
function checkFaultSettings(given: Given<typeof settings>): void {
  for (const [key, rate] of FAULT_RATES) {
    if (given.has(key) && !given.has(rate)) {
      throw new ConfigError(
        `invalid ${settings[key].env}: applies to the requests ${settings[rate].env} chooses, and it is not set`,
      );
    }
  }
}

/** What an operator turns on in a running service: injected faults, and the readiness switch. */
export const OPERATIONS = concern({ settings, check: (_config, given) => checkFaultSettings(given) });
