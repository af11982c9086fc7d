import type { Server as TlsServer } from 'node:tls';
import type { ValidatorFactory } from '@fastify/ajv-compiler';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyInstance } from 'fastify';
import { type DestinationStream, destination } from 'pino';
import type { Config } from './config/index.js';
import { otlpTracesUrl } from './config/tracing.js';
import { type FaultSettings, faultsOn } from './domain/faults.js';
import type { ApiError } from './errors.js';
import { GRPC_API_SERVICES } from './grpc/api-services.js';
import { ServerCertificate } from './http/certificates.js';
import { HeldConnections } from './http/held-connections.js';
import { serveInTurn } from './http/pipelining.js';
import { SocketAnswers } from './http/socket-answers.js';
import { WebSocketEcho } from './http/websockets.js';
import { apiPathTest } from './lib/api-path.js';
import { CODINGS } from './lib/content-coding.js';
import { closingUnreadResponses } from './lib/linger.js';
import { MemoryBudget } from './lib/memory-budget.js';
import { SchemaCode } from './lib/schema-code.js';
import { RequestLog, requestLogger } from './logging/request-log.js';
import { contentCodingsPlugin } from './plugins/content-codings.js';
import { errorsPlugin, sendError } from './plugins/errors.js';
import { HTTP_GUARD_SERVER_OPTIONS, httpGuardPlugin } from './plugins/http-guard.js';
import { jsonBodyPlugin } from './plugins/json-body.js';
import { metricsPlugin } from './plugins/metrics.js';
import { openapiPlugin } from './plugins/openapi.js';
import { RateLimiter, rateLimitPlugin } from './plugins/rate-limit.js';
import { API_SECURITY_HEADERS, ResponseHeaders, responseHeadersPlugin } from './plugins/response-headers.js';
import { shutdownPlugin } from './plugins/shutdown.js';
import { tracingPlugin } from './plugins/tracing.js';
import { validationPlugin, validatorCompiler } from './plugins/validation.js';
import { versionedUrlRewriter, versioningPlugin } from './plugins/versioning.js';
import { adminRoutes } from './routes/admin.js';
import { asyncapiRoute } from './routes/asyncapi.js';
import { currencyRoutes } from './routes/currencies.js';
import { docsRoutes } from './routes/docs.js';
import { echoRoutes } from './routes/echo.js';
import { echoWebSocketRoutes } from './routes/echo-websocket.js';
import { eventsRoutes } from './routes/events.js';
import { exchangeRoutes } from './routes/exchange.js';
import { healthRoutes } from './routes/health.js';
import { helloRoutes } from './routes/hello.js';
import { metricsRoute } from './routes/metrics.js';
import { openapiRoute } from './routes/openapi.js';
import { profileRoutes } from './routes/profile.js';
import { searchRoutes } from './routes/search.js';
import { versionRoutes } from './routes/version.js';
import { EventStreams } from './services/event-streams.js';
import { Readiness } from './services/readiness.js';
import type { ProfileStore } from './stores/profile.js';
import type { RateLimitStore } from './stores/rate-limit.js';
import { createStores } from './stores/stores.js';
import { createSpanExport } from './tracing/export.js';

export interface AppOptions {
  /** Where log lines go; standard output by default. */
  logStream?: DestinationStream;
  /** The log lines `logStream` has dropped, for `/metrics`; none by default. */
  droppedLogLines?: () => number;
  /** Where the profile lives; by default per `redisUrl`, in Redis or a new, empty in-memory profile. */
  profileStore?: ProfileStore;
  /** Where the rate limiter counts requests; by default per `redisUrl`, in Redis or a new in-memory store. */
  rateLimitStore?: RateLimitStore;
  /** Where the validators and serializers come from; by default the code compiled with the service. */
  schemaCode?: SchemaCode;
}

/** TRUST_PROXY as Fastify takes it: a hop count as a function, since Fastify reads a number as no trust at all. */
function trustProxyOption(
  trust: Config['trustProxy'],
): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof trust === 'number') return (_address, hop) => hop < trust;
  return typeof trust === 'boolean' ? trust : [...trust];
}

declare module 'fastify' {
  interface FastifyInstance {
    /** With TLS: reads TLS_CERT_FILE and TLS_KEY_FILE again and serves them to new connections (SIGHUP). */
    readonly reloadCertificate?: () => void;
  }
}

/** The whole service as a Fastify instance, not yet listening: what the server and every test build. */
export async function buildApp(config: Config, options: AppOptions = {}): Promise<FastifyInstance> {
  const logStream = options.logStream ?? destination(1);
  const schemaCode = options.schemaCode ?? new SchemaCode();
  const requestLog = new RequestLog(logStream, config.logLevel, config.http2);
  // The services of the API served over gRPC are the API as much as `/api` is: its rules hold for them.
  const isApiPath = apiPathTest(config.contextPath, config.grpc ? GRPC_API_SERVICES : []);
  const headers = new ResponseHeaders(config.corsOrigins, config.contextPath, isApiPath, config.compression);
  const socketAnswers = new SocketAnswers(headers);
  // How often Node looks for requests past their timeouts: often enough for a short one to hold.
  const timeoutCheckMs = Math.ceil(Math.min(1000, config.headersTimeoutMs / 4));
  // What the whole process holds for clients that do not keep up; its sheds are logged by the app's logger.
  const budget = new MemoryBudget(config.memoryBudgetBytes, (holding, heldBytes, limit) =>
    app.log.warn(
      { action: holding.action, bytes: holding.bytes, held_bytes: heldBytes, budget_bytes: limit },
      'memory budget exceeded: shedding what holds the most',
    ),
  );
  // Made once the stores are; a request refused before routing is counted by it too.
  let limiter: RateLimiter | undefined;
  const certificate =
    config.tlsCertFile === null || config.tlsKeyFile === null
      ? null
      : new ServerCertificate(config.tlsCertFile, config.tlsKeyFile);
  // With neither HTTP2 nor TLS, none: Fastify's own node:http server, and the service's HTTP/2
  // and TLS code is never loaded.
  const serverFactory =
    config.http2 || certificate !== null
      ? (await import('./http/protocols.js')).protocolServerFactory({
          http2: config.http2,
          certificate,
          headersTimeoutMs: config.headersTimeoutMs,
          requestTimeoutMs: config.requestTimeoutMs,
          keepAliveTimeoutMs: config.keepAliveTimeoutMs,
          bodyLimit: config.bodyLimit,
          budget,
        })
      : undefined;
  const app = Fastify({
    ...(serverFactory !== undefined && { serverFactory, https: certificate !== null }),
    logger: { level: config.logLevel, stream: logStream },
    logController: requestLog,
    childLoggerFactory: requestLogger,
    schemaController: {
      compilersFactory: {
        // Typed as Ajv's compile; Fastify calls it as the compiler setValidatorCompiler takes.
        buildValidator: (() => validatorCompiler(schemaCode)) as unknown as ValidatorFactory,
        buildSerializer: schemaCode.buildSerializer,
      },
    },
    requestIdHeader: false, // ids are vetted by requestId, not taken as they come
    genReqId: (request) => headers.requestId(request),
    rewriteUrl: versionedUrlRewriter(config.contextPath),
    bodyLimit: config.bodyLimit,
    trustProxy: trustProxyOption(config.trustProxy),
    return503OnClosing: false, // requests still arriving while draining are served
    routerOptions: {
      ignoreTrailingSlash: true,
      // Names are limited by the request line's size only, not by a separate parameter cap.
      maxParamLength: Number.MAX_SAFE_INTEGER,
    },
    frameworkErrors: (error, request, reply) => {
      // Errors raised before routing (a badly encoded path) get no response listeners and run no
      // hooks, so their log line and the hooks' headers are asked for here.
      reply.raw.once('finish', () => requestLog.requestCompleted(null, request, reply));
      headers.forUnrouted(request, reply);
      if (limiter === undefined || !isApiPath(request.url)) sendError(error, request, reply);
      else limiter.count(request, reply, (over) => sendError((over as ApiError | undefined) ?? error, request, reply));
    },
    clientErrorHandler: socketAnswers.clientErrorHandler,
    // Against slow clients: a request must arrive within its timeouts (else 408, from
    // clientErrorHandler), and Node checks them often enough for a short timeout to hold.
    http: {
      ...HTTP_GUARD_SERVER_OPTIONS,
      ServerResponse: closingUnreadResponses(config.requestTimeoutMs),
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      connectionsCheckingInterval: timeoutCheckMs,
    },
    requestTimeout: config.requestTimeoutMs, // Fastify sets it again on the server: the same value
    // A connection on which no byte moves for as long as a whole request may take is dead, e.g. a
    // client that stopped reading its response; it is closed without a word. So it comes after
    // the request timeout has had two checks: a client stalled in mid-request gets its 408 first.
    connectionTimeout: config.requestTimeoutMs + 2 * timeoutCheckMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
  }).withTypeProvider<TypeBoxTypeProvider>();

  serveInTurn(app.server, app.log);
  const heldConnections = new HeldConnections(app.server, budget);
  app.addHook('onClose', () => budget.close());
  socketAnswers.refuseMethods(app);
  if (certificate !== null) {
    certificate.follow(app.server as unknown as TlsServer, app.log);
    app.decorate('reloadCertificate', () => certificate.reload());
    app.addHook('onClose', () => certificate.stop());
  }

  const stores = await createStores(config, app.log);
  // Registered before listening, so it runs after Fastify's own close hook has drained the requests.
  app.addHook('onClose', () => stores.close());

  const readiness = new Readiness(() => app.draining, stores.health);

  const tracesUrl = otlpTracesUrl(config);
  const spanExport = tracesUrl === null ? null : await createSpanExport(config, tracesUrl, app.log);
  // First: the request's span begins before any other hook runs, and sees every route added.
  await app.register(tracingPlugin, { requestLog, spanExport, shutdownTimeoutMs: config.shutdownTimeoutMs });
  await app.register(errorsPlugin);
  await app.register(validationPlugin);
  await app.register(jsonBodyPlugin, { http2: config.http2 });
  // Before fault injection, whose paced or broken answers are then of the coded bytes.
  const codings = { minBytes: config.compression ? config.compressionMinBytes : null };
  await app.register(contentCodingsPlugin, codings);
  // First of the request hooks: it sets every response's headers, and answers CORS preflights.
  await app.register(responseHeadersPlugin, { headers });
  // Before versioning: a request HTTP itself refuses is refused whatever version it asks for.
  await app.register(httpGuardPlugin);
  await app.register(versioningPlugin, { isApiPath });
  await app.register(shutdownPlugin, { requestLog });
  const faults: FaultSettings = {
    errorRate: config.faultErrorRate,
    errorStatus: config.faultErrorStatus,
    delayRate: config.faultDelayRate,
    delayMs: config.faultDelayMs,
    headers: config.faultHeaders,
  };
  await app.register(openapiPlugin, {
    contextPath: config.contextPath,
    isApiPath,
    rateLimited: config.rateLimitMax > 0,
    securityHeaders: API_SECURITY_HEADERS,
    compression: config.compression ? CODINGS : null,
    requestCodings: CODINGS,
    faults: faultsOn(faults)
      ? {
          errorStatus: faults.errorRate > 0 ? faults.errorStatus : null,
          headers: faults.headers,
          delays: faults.delayRate > 0,
        }
      : null,
  });
  const eventStreams = new EventStreams(config.streamsMax, budget);
  requestLog.eventsSentOf((request) => eventStreams.sentTo(request));
  if (config.metricsEnabled) {
    await app.register(metricsPlugin, {
      requestLog,
      droppedLogLines: options.droppedLogLines ?? (() => 0),
      readiness,
      store: stores.kind,
      eventStreams,
    });
    spanExport?.registerMetrics(app.metricsRegistry);
  }
  const prefix = config.contextPath === '/' ? '' : config.contextPath;
  if (config.rateLimitMax > 0) {
    limiter = new RateLimiter({
      max: config.rateLimitMax,
      windowMs: config.rateLimitWindowMs,
      store: options.rateLimitStore ?? stores.rateLimit,
    });
    await app.register(rateLimitPlugin, { limiter, isApiPath });
  }
  // Off, nothing of it is registered. After the rate limiter: an injected answer is counted, and carries its headers.
  if (faultsOn(faults)) {
    const { faultsPlugin } = await import('./plugins/faults.js');
    await app.register(faultsPlugin, {
      settings: faults,
      isApiPath,
      requestLog,
      registry: config.metricsEnabled ? app.metricsRegistry : null,
      expected: config.faultsExpected,
      shutdownTimeoutMs: config.shutdownTimeoutMs,
    });
  }
  const echo = new WebSocketEcho(
    {
      maxConnections: config.wsMaxConnections,
      maxMessageBytes: config.wsMaxMessageBytes,
      maxBufferedBytes: config.wsMaxBufferedBytes,
      pingIntervalMs: config.wsPingIntervalMs,
      permessageDeflate: config.wsPermessageDeflate,
    },
    app.log,
    requestLog,
    { budget, connections: heldConnections },
  );
  if (config.metricsEnabled) {
    echo.registerMetrics(app.metricsRegistry);
    budget.registerMetrics(app.metricsRegistry);
  }
  // Half the shutdown's time for clients to answer the close, so that the process still exits 0;
  // the app is closed once every connection has ended and been logged.
  let echoEnded: Promise<void> = Promise.resolve();
  app.addHook('preClose', (done) => {
    echoEnded = echo.close(config.shutdownTimeoutMs / 2);
    done();
  });
  app.addHook('onClose', () => echoEnded);

  // Each route's schema says what that route itself answers; the answers and headers common to
  // every route (errors, versioning, rate limiting) are added to the document in plugins/openapi.ts.

  await app.register(
    async (service) => {
      await service.register(helloRoutes);
      await service.register(searchRoutes);
      await service.register(echoRoutes);
      await service.register(echoWebSocketRoutes, {
        echo,
        originAllowed: (origin) => headers.allowsOrigin(origin),
      });
      await service.register(eventsRoutes, {
        streams: eventStreams,
        requestLog,
        shutdownTimeoutMs: config.shutdownTimeoutMs,
      });
      await service.register(profileRoutes, { store: options.profileStore ?? stores.profile });
      await service.register(exchangeRoutes);
      await service.register(currencyRoutes, { cursorSecret: config.cursorSecret });
      await service.register(healthRoutes, { readiness });
      await service.register(versionRoutes);
      if (config.adminTokenFile !== null) {
        await service.register(adminRoutes, { tokenFile: config.adminTokenFile, readiness });
      }
      await service.register(openapiRoute);
      await service.register(asyncapiRoute, {
        contextPath: config.contextPath,
        maxMessageBytes: config.wsMaxMessageBytes,
      });
      await service.register(docsRoutes, { contextPath: config.contextPath, errors: errorsPlugin, codings });
      if (config.metricsEnabled) await service.register(metricsRoute);
    },
    { prefix },
  );
  if (config.grpc) {
    // At the root, whatever the context path: gRPC clients call /<package>.<Service>/<Method>.
    const { grpcServices } = await import('./grpc/serve.js');
    await app.register(grpcServices, {
      schemaCode,
      cursorSecret: config.cursorSecret,
      profileStore: options.profileStore ?? stores.profile,
      streams: eventStreams,
      readiness,
      requestLog,
      registry: config.metricsEnabled ? app.metricsRegistry : null,
      bodyLimit: config.bodyLimit,
      requestTimeoutMs: config.requestTimeoutMs,
    });
  }
  return app;
}
