import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { type DescMessage, fromBinary, type JsonValue, toJson } from '@bufbuild/protobuf';
import { FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import {
  BadRequestSchema,
  ErrorInfoSchema,
  RequestInfoSchema,
  RetryInfoSchema,
} from '../../src/grpc/generated/google/rpc/error_details_pb.js';
import { StatusSchema } from '../../src/grpc/generated/google/rpc/status_pb.js';
import { type Run, run } from '../run-command.js';
import { ROOT } from '../server-process.js';

/**
 * The gRPC clients of other makers the gRPC tests drive: the gRPC project's C core (Debian's
 * python3-grpcio, through test/grpc/grpcio_client.py), `buf curl` (the @bufbuild/buf package's
 * binary, Connect's Go client) and curl. Without one, its tests skip, saying so once.
 */

/** The python3 that imports Debian's grpc and protobuf: the one on PATH, or Debian's own. */
export const PYTHON = ['python3', '/usr/bin/python3'].find(
  (python) => spawnSync(python, ['-c', 'import grpc, google.protobuf']).status === 0,
);
export const GRPCIO_SKIP =
  PYTHON === undefined
    ? 'grpcio tests need python3 with grpc and protobuf (apt-get install python3-grpcio python3-protobuf; .ci/run installs them)'
    : undefined;

export const BUF = `${ROOT}node_modules/.bin/buf`;
export const BUF_SKIP =
  spawnSync(BUF, ['--version']).error === undefined
    ? undefined
    : `buf curl tests need ${BUF} (npm ci installs @bufbuild/buf)`;

export const CURL_SKIP =
  spawnSync('curl', ['--version']).error === undefined ? undefined : 'gRPC-Web and Connect tests with curl need curl';

for (const reason of [GRPCIO_SKIP, BUF_SKIP, CURL_SKIP])
  if (reason !== undefined) process.stdout.write(`SKIPPED: ${reason}\n`);

const GRPCIO_CLIENT = `${ROOT}test/grpc/grpcio_client.py`;

/** The repository's .proto files as a FileDescriptorSet, built by buf into a directory of its own: its path. */
export async function buildDescriptorSet(): Promise<string> {
  const file = join(await mkdtemp(join(tmpdir(), 'grpc-set-')), 'set.binpb');
  const built = await run(BUF, ['build', ROOT, '-o', file]);
  if (built.code !== 0) throw new Error(`buf build failed: ${built.stderr}`);
  return file;
}

/** Every service of a descriptor set, and every method as `package.Service/Method`. */
export async function servicesOf(descriptorSet: string): Promise<{ services: string[]; methods: string[] }> {
  const set = fromBinary(FileDescriptorSetSchema, await readFile(descriptorSet));
  const services = set.file.flatMap((file) =>
    file.service.map((service) => ({ name: `${file.package}.${service.name}`, methods: service.method })),
  );
  return {
    services: services.map(({ name }) => name).sort(),
    methods: services.flatMap(({ name, methods }) => methods.map((method) => `${name}/${method.name}`)).sort(),
  };
}

export interface GrpcioCall {
  method: string;
  messages?: JsonValue[];
  metadata?: [string, string][];
  /** Seconds: the call's deadline, sent as grpc-timeout. */
  timeout?: number;
  /** Cancels the call once this many responses have come. */
  take?: number;
}

export interface GrpcioResult {
  /** The status code's name, as grpc.StatusCode has it: OK, INVALID_ARGUMENT, … */
  code: string;
  message: string;
  elapsed_ms: number;
  /** Each response, proto3 JSON, and when it came, in ms after the call began. */
  responses: { at_ms: number; message: JsonValue }[];
  initial_metadata: Record<string, string>;
  trailing_metadata: Record<string, string>;
  /** grpc-status-details-bin as google.rpc.Status, in proto3 JSON; null without it. */
  status_details: {
    code?: number;
    message?: string;
    details?: ({ '@type': string } & Record<string, JsonValue>)[];
  } | null;
}

const grpcioArgs = (descriptorSet: string, port: number, call: GrpcioCall) => [
  GRPCIO_CLIENT,
  'call',
  descriptorSet,
  `127.0.0.1:${port}`,
  JSON.stringify(call),
];

function resultOf(command: Run): GrpcioResult {
  if (command.code !== 0) throw new Error(`grpcio_client.py exited with ${command.code}: ${command.stderr}`);
  return JSON.parse(command.stdout) as GrpcioResult;
}

/** One call by grpcio over h2c. */
export async function grpcio(descriptorSet: string, port: number, call: GrpcioCall): Promise<GrpcioResult> {
  return resultOf(await run(PYTHON as string, grpcioArgs(descriptorSet, port, call)));
}

/**
 * A streaming call by grpcio over h2c, `afterFirst` run once its first response has come: the call's
 * result once it ends.
 */
export function grpcioStreaming(
  descriptorSet: string,
  port: number,
  call: GrpcioCall,
  afterFirst: () => Promise<void>,
): Promise<GrpcioResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON as string, grpcioArgs(descriptorSet, port, call), {
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 60_000,
    });
    let stdout = '';
    let stderr = '';
    let first: Promise<void> | undefined;
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    createInterface({ input: child.stderr }).on('line', (line) => {
      stderr += `${line}\n`;
      // A response's line, not whatever else the C core may log.
      if (line.startsWith('{"at_ms": ')) first ??= afterFirst();
    });
    child.on('error', reject);
    child.on('close', (code) => {
      Promise.resolve(first)
        .then(() => resolve(resultOf({ code, stdout, stderr })))
        .catch(reject);
    });
  });
}

/** The response metadata of a call, headers and trailers together: a trailers-only answer has no headers. */
export const metadataOf = (result: GrpcioResult): Record<string, string> => ({
  ...result.initial_metadata,
  ...result.trailing_metadata,
});

/** An error detail, as every client here is read: its type's full name and its proto3 JSON. */
export interface Detail {
  type: string;
  value: JsonValue;
}

/** The error details the service sends. */
const DETAIL_SCHEMAS: Readonly<Record<string, DescMessage>> = Object.fromEntries(
  [ErrorInfoSchema, BadRequestSchema, RequestInfoSchema, RetryInfoSchema].map((schema) => [schema.typeName, schema]),
);

const byType = (a: Detail, b: Detail) => a.type.localeCompare(b.type);

/** The details of grpcio's google.rpc.Status, in type order. */
export function grpcioDetails(result: GrpcioResult): Detail[] {
  return (result.status_details?.details ?? [])
    .map(({ '@type': url, ...value }) => ({ type: url.replace(/^type\.googleapis\.com\//, ''), value }))
    .sort(byType);
}

/**
 * Details as Connect's clients show them, each `{type, value}` with its bytes in base64 (buf curl's
 * error, the Connect protocol's JSON error body), decoded: in type order.
 */
export function connectDetails(details: readonly { type: string; value: string }[]): Detail[] {
  return details
    .map(({ type, value }) => {
      const schema = DETAIL_SCHEMAS[type];
      if (schema === undefined) throw new Error(`a detail of type ${type}, which the service does not send`);
      return { type, value: toJson(schema, fromBinary(schema, Buffer.from(value, 'base64'))) };
    })
    .sort(byType);
}

/** grpc-status-details-bin, as a gRPC-Web answer carries it (base64), read as google.rpc.Status: its code, message and details. */
export function statusOf(bin: string): { code: number; message: string; details: Detail[] } {
  const status = fromBinary(StatusSchema, Buffer.from(bin, 'base64'));
  const details = status.details.map(({ typeUrl, value }) => ({
    type: typeUrl.replace(/^type\.googleapis\.com\//, ''),
    value: Buffer.from(value).toString('base64'),
  }));
  return { code: status.code, message: status.message, details: connectDetails(details) };
}

/** The details the contract gives an error: ErrorInfo, BadRequest (when it has violations), RequestInfo, RetryInfo (with a delay), in type order. */
export function expectedDetails(
  reason: string,
  requestId: string,
  {
    violations = [],
    retrySeconds,
  }: { violations?: { field: string; description: string }[]; retrySeconds?: number } = {},
): Detail[] {
  const details: Detail[] = [{ type: 'google.rpc.ErrorInfo', value: { reason, domain: 'greeting-service' } }];
  if (violations.length > 0) details.push({ type: 'google.rpc.BadRequest', value: { fieldViolations: violations } });
  details.push({ type: 'google.rpc.RequestInfo', value: { requestId } });
  if (retrySeconds !== undefined) {
    details.push({ type: 'google.rpc.RetryInfo', value: { retryDelay: `${retrySeconds}s` } });
  }
  return details.sort(byType);
}

/** `buf curl` with `args`. */
export function bufCurl(args: string[]): Promise<Run> {
  return run(BUF, ['curl', ...args]);
}

/** What buf curl printed on stdout: one pretty-printed JSON document per response. */
export function bufResponses(stdout: string): JsonValue[] {
  return stdout
    .split(/\n(?=\{)/)
    .filter((text) => text.trim() !== '')
    .map((text) => JSON.parse(text) as JsonValue);
}

/** buf curl's error, from its stderr (the lines of -v left out). */
export function bufError(stderr: string): { code: string; message: string; details: Detail[] } {
  const json = stderr
    .split('\n')
    .filter((line) => !line.startsWith('buf: '))
    .join('\n');
  const error = JSON.parse(json) as { code: string; message: string; details?: { type: string; value: string }[] };
  return { code: error.code, message: error.message, details: connectDetails(error.details ?? []) };
}

/** The response headers buf curl -v printed (the last call's, where reflection made others before it), lower case. */
export function bufResponseHeaders(stderr: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [, name = '', value = ''] of stderr.matchAll(/^buf: < \(#\d+\) ([\w-]+): (.*)$/gm)) {
    headers[name.toLowerCase()] = value;
  }
  return headers;
}
