import { boolean, fraction, httpUrl, keyValueList, oneOf, TOKEN } from './parsers.js';
import { concern, type SettingValues, setting } from './setting.js';

/** The exporters OTEL_TRACES_EXPORTER may name: OTLP over HTTP, or none. */
export type TracesExporter = 'otlp' | 'none';
const TRACES_EXPORTERS: readonly TracesExporter[] = ['otlp', 'none'];

export type OtlpProtocol = 'http/protobuf' | 'http/json';
const OTLP_PROTOCOLS: readonly OtlpProtocol[] = ['http/protobuf', 'http/json'];

/** OpenTelemetry's standard samplers, but those that need a remote service (jaeger_remote, xray). */
export const TRACE_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type TraceSampler = (typeof TRACE_SAMPLERS)[number];

/** The export of spans to an OpenTelemetry collector, by OpenTelemetry's standard variables. */
export const TRACING = concern({
  settings: {
    /** OpenTelemetry's standard variable: true turns every part of tracing's export off. */
    otelSdkDisabled: setting({
      env: 'OTEL_SDK_DISABLED',
      help: 'true, false, 1 or 0, in any case; true: no spans are made or exported, whatever the other OTEL_ settings say (traceparent still reaches the log)',
      default: false,
      parse: boolean,
    }),
    /** Null: OTLP when an endpoint is set, else nothing, so that setting the endpoint is enough. */
    otelTracesExporter: setting<TracesExporter | null>({
      env: 'OTEL_TRACES_EXPORTER',
      help: 'otlp (spans sent to an OpenTelemetry collector over OTLP/HTTP) or none; unset: otlp when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, else none',
      default: null,
      parse: oneOf(TRACES_EXPORTERS, ' (console, zipkin and jaeger are not supported)'),
    }),
    otelExporterOtlpEndpoint: setting<string | null>({
      env: 'OTEL_EXPORTER_OTLP_ENDPOINT',
      help: "the collector's OTLP/HTTP base URL, such as http://collector:4318: spans go to its /v1/traces; unset: http://localhost:4318",
      default: null,
      parse: httpUrl,
    }),
    otelExporterOtlpTracesEndpoint: setting<string | null>({
      env: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
      help: 'the full URL spans are posted to, such as http://collector:4318/v1/traces; wins over OTEL_EXPORTER_OTLP_ENDPOINT',
      default: null,
      parse: httpUrl,
    }),
    otelExporterOtlpProtocol: setting<OtlpProtocol>({
      env: 'OTEL_EXPORTER_OTLP_PROTOCOL',
      help: 'http/protobuf or http/json, how spans are encoded',
      default: 'http/protobuf',
      parse: oneOf(OTLP_PROTOCOLS, ' (grpc is not supported)'),
    }),
    /** A secret: collectors of hosted services take their API key in a header. */
    otelExporterOtlpHeaders: setting<readonly (readonly [string, string])[]>({
      env: 'OTEL_EXPORTER_OTLP_HEADERS',
      secret: true,
      help: 'headers sent with every export, such as api-key=secret,x-tenant=a%20b: comma-separated name=value, the values percent-encoded',
      default: [],
      parse: keyValueList((key) => TOKEN.test(key), 'api-key=secret'),
    }),
    /** Null: `service.name` of OTEL_RESOURCE_ATTRIBUTES, else greeting-service. */
    otelServiceName: setting<string | null>({
      env: 'OTEL_SERVICE_NAME',
      help: "the spans' service.name; unset: the service.name of OTEL_RESOURCE_ATTRIBUTES, else greeting-service",
      default: null,
      parse: (raw) => raw,
    }),
    otelResourceAttributes: setting<readonly (readonly [string, string])[]>({
      env: 'OTEL_RESOURCE_ATTRIBUTES',
      help: "attributes of the spans' resource, such as deployment.environment.name=prod,service.namespace=shop: comma-separated key=value, the values percent-encoded",
      default: [],
      parse: keyValueList((key) => /^[^\s=,]+$/.test(key), 'deployment.environment.name=prod'),
    }),
    otelTracesSampler: setting<TraceSampler>({
      env: 'OTEL_TRACES_SAMPLER',
      help: `which requests are traced: ${TRACE_SAMPLERS.join(', ')}; parentbased_ ones follow the caller's traceparent when it sends one`,
      default: 'parentbased_always_on',
      parse: oneOf(TRACE_SAMPLERS, ' (jaeger_remote and xray are not supported)'),
    }),
    otelTracesSamplerArg: setting({
      env: 'OTEL_TRACES_SAMPLER_ARG',
      help: 'the share of traces that traceidratio and parentbased_traceidratio sample, a decimal from 0 to 1 such as 0.1',
      default: 1,
      parse: fraction,
    }),
  },
});

/**
 * Where spans are exported to, as the OTEL_ settings say together: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
 * as it is, else OTEL_EXPORTER_OTLP_ENDPOINT's `/v1/traces`; null when nothing is exported.
 */
export function otlpTracesUrl(config: SettingValues<typeof TRACING.settings>): string | null {
  const { otelSdkDisabled, otelTracesExporter, otelExporterOtlpEndpoint, otelExporterOtlpTracesEndpoint } = config;
  if (otelSdkDisabled || otelTracesExporter === 'none') return null;
  if (otelTracesExporter === null && otelExporterOtlpEndpoint === null && otelExporterOtlpTracesEndpoint === null) {
    return null;
  }
  const base = (otelExporterOtlpEndpoint ?? 'http://localhost:4318').replace(/\/$/, '');
  return otelExporterOtlpTracesEndpoint ?? `${base}/v1/traces`;
}
