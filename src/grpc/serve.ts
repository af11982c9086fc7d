import type { FastifyPluginAsync } from 'fastify';
import type { Registry } from 'prom-client';
import { Collection } from '../domain/collection.js';
import { CURRENCY_COLLECTION } from '../domain/currencies.js';
import type { SchemaCode } from '../lib/schema-code.js';
import type { RequestLog } from '../logging/request-log.js';
import type { EventStreams } from '../services/event-streams.js';
import type { Readiness } from '../services/readiness.js';
import type { ProfileStore } from '../stores/profile.js';
import { GreetingService } from './generated/greeting/v1/greeting_pb.js';
import { Health } from './generated/grpc/health/v1/health_pb.js';
import { ServerReflection as ReflectionV1 } from './generated/grpc/reflection/v1/reflection_pb.js';
import { ServerReflection as ReflectionV1Alpha } from './generated/grpc/reflection/v1alpha/reflection_pb.js';
import { Greeter } from './generated/helloworld/helloworld_pb.js';
import { GrpcMetrics } from './metrics.js';
import { reflectionService } from './reflection.js';
import { grpcRoutes } from './routes.js';
import { greeterService, greetingService, healthService } from './services.js';

export interface GrpcServicesOptions {
  schemaCode: SchemaCode;
  cursorSecret: string;
  profileStore: ProfileStore;
  streams: EventStreams;
  readiness: Readiness;
  requestLog: RequestLog;
  /** Where the calls are counted; null without metrics. */
  registry: Registry | null;
  bodyLimit: number;
  requestTimeoutMs: number;
}

/** The services reflection lists: those of the API, and health. */
const LISTED = [Greeter, GreetingService, Health];

/** Every gRPC service of the service, made from what the app made, and served by `grpcRoutes`. */
export const grpcServices: FastifyPluginAsync<GrpcServicesOptions> = async (app, options) => {
  const greeting = greetingService({
    schemaCode: options.schemaCode,
    currencies: new Collection(CURRENCY_COLLECTION, options.cursorSecret),
    profileStore: options.profileStore,
    streams: options.streams,
  });
  const health = healthService(options.readiness);
  const reflection = reflectionService(LISTED);
  await app.register(grpcRoutes, {
    services: (router) => {
      router.service(Greeter, greeterService);
      router.service(GreetingService, greeting);
      router.service(Health, health);
      router.service(ReflectionV1, reflection);
      router.service(ReflectionV1Alpha, reflection);
    },
    known: [...LISTED, ReflectionV1, ReflectionV1Alpha],
    bodyLimit: options.bodyLimit,
    requestTimeoutMs: options.requestTimeoutMs,
    requestLog: options.requestLog,
    metrics: options.registry === null ? null : new GrpcMetrics(options.registry),
  });
};
