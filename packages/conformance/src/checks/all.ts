import type { Check } from '../context.js';
import { codingChecks } from './codings.js';
import { currencyChecks } from './currencies.js';
import { echoChecks } from './echo.js';
import { errorChecks, httpChecks, requestIdChecks } from './errors.js';
import { eventChecks } from './events.js';
import { everyAnswerChecks } from './every-answer.js';
import { exchangeChecks } from './exchange.js';
import { grpcChecks } from './grpc.js';
import { corsChecks, securityChecks } from './headers.js';
import { helloChecks } from './hello.js';
import { http2Checks } from './http2.js';
import { rateLimitChecks, timeoutChecks } from './limits.js';
import { healthChecks, openapiChecks } from './operations.js';
import { profileChecks } from './profile.js';
import { searchChecks } from './search.js';
import { traceContextChecks } from './trace-context.js';
import { versioningChecks } from './versioning.js';
import { websocketChecks } from './websocket.js';

/**
 * Every check, in the order they run: the profile writes before the rate limit is spent, the gRPC
 * ones after the REST ones have put the profile back; last, the headers of every answer the run
 * received.
 */
export const ALL_CHECKS: readonly Check[] = [
  ...helloChecks,
  ...searchChecks,
  ...echoChecks,
  ...eventChecks,
  ...websocketChecks,
  ...errorChecks,
  ...requestIdChecks,
  ...traceContextChecks,
  ...httpChecks,
  ...http2Checks,
  ...versioningChecks,
  ...corsChecks,
  ...securityChecks,
  ...healthChecks,
  ...openapiChecks,
  ...currencyChecks,
  ...exchangeChecks,
  ...profileChecks,
  ...codingChecks,
  ...grpcChecks,
  ...timeoutChecks,
  ...rateLimitChecks,
  ...everyAnswerChecks,
];
