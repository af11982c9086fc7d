import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { otlpTracesUrl } from '../../src/config/tracing.js';

describe('the OTEL_ settings', () => {
  it('default to no export: parent-based sampling of everything, protobuf, no headers or attributes', () => {
    const config = loadConfig([], {});
    assert.deepEqual(Object.fromEntries(Object.entries(config).filter(([key]) => key.startsWith('otel'))), {
      otelSdkDisabled: false,
      otelTracesExporter: null,
      otelExporterOtlpEndpoint: null,
      otelExporterOtlpTracesEndpoint: null,
      otelExporterOtlpProtocol: 'http/protobuf',
      otelExporterOtlpHeaders: [],
      otelServiceName: null,
      otelResourceAttributes: [],
      otelTracesSampler: 'parentbased_always_on',
      otelTracesSamplerArg: 1,
    });
    assert.equal(otlpTracesUrl(config), null);
  });

  it('reads every variable, headers and attributes percent-decoded', () => {
    const config = loadConfig([], {
      OTEL_SDK_DISABLED: 'FALSE',
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/v1/traces',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'api-key=s%3Dcret, x-tenant = a%20b',
      OTEL_SERVICE_NAME: 'greeter',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod,service.namespace=a%2Cb',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
    });
    assert.deepEqual(Object.fromEntries(Object.entries(config).filter(([key]) => key.startsWith('otel'))), {
      otelSdkDisabled: false,
      otelTracesExporter: 'otlp',
      otelExporterOtlpEndpoint: 'http://collector:4318/',
      otelExporterOtlpTracesEndpoint: 'https://traces.example/v1/traces',
      otelExporterOtlpProtocol: 'http/json',
      otelExporterOtlpHeaders: [
        ['api-key', 's=cret'],
        ['x-tenant', 'a b'],
      ],
      otelServiceName: 'greeter',
      otelResourceAttributes: [
        ['deployment.environment.name', 'prod'],
        ['service.namespace', 'a,b'],
      ],
      otelTracesSampler: 'parentbased_traceidratio',
      otelTracesSamplerArg: 0.25,
    });
  });

  it('export where an endpoint or OTEL_TRACES_EXPORTER=otlp says, unless disabled or none', () => {
    const url = (env: Record<string, string>) => otlpTracesUrl(loadConfig([], env));
    assert.equal(url({ OTEL_TRACES_EXPORTER: 'otlp' }), 'http://localhost:4318/v1/traces');
    assert.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), 'http://c:4318/v1/traces');
    assert.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/base/' }), 'http://c:4318/base/v1/traces');
    assert.equal(url({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:9/x' }), 'http://c:9/x');
    assert.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }), null);
    assert.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }), null);
  });

  const bad: [Record<string, string>, string][] = [
    [{ OTEL_SDK_DISABLED: 'yes' }, 'invalid OTEL_SDK_DISABLED "yes": must be true, false, 1 or 0'],
    [
      { OTEL_TRACES_EXPORTER: 'console' },
      'invalid OTEL_TRACES_EXPORTER "console": must be one of otlp, none (console, zipkin and jaeger are not supported)',
    ],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
      'invalid OTEL_EXPORTER_OTLP_ENDPOINT "collector:4318": must be an http:// or https:// URL such as http://collector:4318',
    ],
    [
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'grpc://c:4317' },
      'invalid OTEL_EXPORTER_OTLP_TRACES_ENDPOINT "grpc://c:4317": must be an http:// or https:// URL such as http://collector:4318',
    ],
    [
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      'invalid OTEL_EXPORTER_OTLP_PROTOCOL "grpc": must be one of http/protobuf, http/json (grpc is not supported)',
    ],
    // A secret: its value is not repeated.
    [
      { OTEL_EXPORTER_OTLP_HEADERS: 'api-key' },
      'invalid OTEL_EXPORTER_OTLP_HEADERS: must be a comma-separated list of key=value such as api-key=secret, the values percent-encoded',
    ],
    [
      { OTEL_EXPORTER_OTLP_HEADERS: 'bad key=1' },
      'invalid OTEL_EXPORTER_OTLP_HEADERS: must be a comma-separated list of key=value such as api-key=secret, the values percent-encoded',
    ],
    [
      { OTEL_EXPORTER_OTLP_HEADERS: 'k=%0D%0Ax' },
      'invalid OTEL_EXPORTER_OTLP_HEADERS: must be a comma-separated list of key=value such as api-key=secret, the values percent-encoded, with no line breaks or NUL',
    ],
    [
      { OTEL_RESOURCE_ATTRIBUTES: 'a=%ZZ' },
      'invalid OTEL_RESOURCE_ATTRIBUTES "a=%ZZ": must be a comma-separated list of key=value such as deployment.environment.name=prod, the values percent-encoded',
    ],
    [
      { OTEL_TRACES_SAMPLER: 'xray' },
      'invalid OTEL_TRACES_SAMPLER "xray": must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio (jaeger_remote and xray are not supported)',
    ],
    ...['1.5', '-0.1', 'half', '.', '1e-1'].map((value): [Record<string, string>, string] => [
      { OTEL_TRACES_SAMPLER_ARG: value },
      `invalid OTEL_TRACES_SAMPLER_ARG ${JSON.stringify(value)}: must be a decimal number from 0 to 1, such as 0.25`,
    ]),
  ];
  for (const [env, message] of bad) {
    it(`rejects ${JSON.stringify(env)} naming it`, () => {
      assert.throws(() => loadConfig([], env), new ConfigError(message));
    });
  }
});
