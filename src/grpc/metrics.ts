import { Code } from '@connectrpc/connect';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Counter, Histogram, type Registry } from 'prom-client';
import { DURATION_BUCKETS } from '../plugins/metrics.js';
import type { CallType } from './routes.js';
import { type GrpcCode, OK } from './status.js';

/** Go's names of the codes, as the gRPC ecosystem's Prometheus interceptors label them. */
const CODE_NAMES: Readonly<Record<GrpcCode, string>> = {
  [OK]: 'OK',
  [Code.Canceled]: 'Canceled',
  [Code.Unknown]: 'Unknown',
  [Code.InvalidArgument]: 'InvalidArgument',
  [Code.DeadlineExceeded]: 'DeadlineExceeded',
  [Code.NotFound]: 'NotFound',
  [Code.AlreadyExists]: 'AlreadyExists',
  [Code.PermissionDenied]: 'PermissionDenied',
  [Code.ResourceExhausted]: 'ResourceExhausted',
  [Code.FailedPrecondition]: 'FailedPrecondition',
  [Code.Aborted]: 'Aborted',
  [Code.OutOfRange]: 'OutOfRange',
  [Code.Unimplemented]: 'Unimplemented',
  [Code.Internal]: 'Internal',
  [Code.Unavailable]: 'Unavailable',
  [Code.DataLoss]: 'DataLoss',
  [Code.Unauthenticated]: 'Unauthenticated',
};

function codeName(code: GrpcCode): string {
  return CODE_NAMES[code] ?? 'Unknown';
}

/**
 * The gRPC calls in `/metrics`, under the names and labels of the gRPC ecosystem's Prometheus
 * interceptors (go-grpc-prometheus): started, handled with their code, and their handling time;
 * `fault` on the handled and timed calls as on the HTTP requests' series, so that the SLIs leave
 * out the calls a fault touched. A call is counted here, not among the HTTP requests.
 */
export class GrpcMetrics {
  readonly #started: Counter<'grpc_service' | 'grpc_method' | 'grpc_type'>;
  readonly #handled: Counter<'grpc_service' | 'grpc_method' | 'grpc_type' | 'grpc_code' | 'fault'>;
  readonly #seconds: Histogram<'grpc_service' | 'grpc_method' | 'grpc_type' | 'fault'>;

  constructor(registry: Registry) {
    this.#started = new Counter({
      name: 'grpc_server_started_total',
      help: 'gRPC calls started on the server, by service, method and type.',
      labelNames: ['grpc_service', 'grpc_method', 'grpc_type'],
      registers: [registry],
    });
    this.#handled = new Counter({
      name: 'grpc_server_handled_total',
      help: 'gRPC calls completed on the server, whatever their status, by service, method, type, code and the faults injected.',
      labelNames: ['grpc_service', 'grpc_method', 'grpc_type', 'grpc_code', 'fault'],
      registers: [registry],
    });
    this.#seconds = new Histogram({
      name: 'grpc_server_handling_seconds',
      help: 'Time from the start of a gRPC call to its end, in seconds, by service, method, type and the faults injected.',
      labelNames: ['grpc_service', 'grpc_method', 'grpc_type', 'fault'],
      buckets: DURATION_BUCKETS,
      registers: [registry],
    });
  }

  started(service: string, method: string, type: CallType): void {
    this.#started.inc({ grpc_service: service, grpc_method: method, grpc_type: type });
  }

  handled(request: FastifyRequest, service: string, method: string, type: CallType, reply: FastifyReply): void {
    const labels = { grpc_service: service, grpc_method: method, grpc_type: type };
    const injected = request.faults?.injected;
    const fault = injected === undefined || injected.length === 0 ? '' : injected.join(',');
    const code = codeName(request.grpcCode ?? Code.Unknown);
    this.#handled.inc({ ...labels, grpc_code: code, fault });
    this.#seconds.observe({ ...labels, fault }, reply.elapsedTime / 1000);
  }
}
