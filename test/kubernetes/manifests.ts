import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ROOT } from '../server-process.js';
import type { TlsFiles } from '../tls-files.js';
import type { KubeObject } from './api-schema.js';

/**
 * deploy/kubernetes as kubectl renders it, and what a pod of a rendered Deployment sees: its
 * environment and the files mounted from Secrets.
 */

export const KUBERNETES_DIR = join(ROOT, 'deploy', 'kubernetes');
export const OVERLAYS = ['dev', 'production'] as const;
export type Overlay = (typeof OVERLAYS)[number];

const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' });
/** Debian's kubernetes-client (1.20) is no substitute: its kustomize predates `patches` and components. */
export const KUBECTL_SKIP_REASON =
  kubectl.status !== 0 &&
  'the Kubernetes manifests are rendered with kubectl kustomize (kubectl 1.27 or later); kubectl is not installed';
if (KUBECTL_SKIP_REASON) process.stdout.write(`SKIPPED: ${KUBECTL_SKIP_REASON}\n`);

export interface Container {
  name: string;
  image: string;
  imagePullPolicy?: string;
  args?: string[];
  ports?: { name?: string; containerPort: number }[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  envFrom?: { configMapRef?: { name: string } }[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  startupProbe?: Probe;
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command: string[] }; sleep?: { seconds: number } } };
  securityContext?: SecurityContext;
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
}

export interface Probe {
  httpGet?: { path: string; port: string | number };
  tcpSocket?: { port: string | number };
  periodSeconds?: number;
  timeoutSeconds?: number;
  failureThreshold?: number;
  successThreshold?: number;
}

export interface SecurityContext {
  runAsNonRoot?: boolean;
  runAsUser?: number;
  runAsGroup?: number;
  fsGroup?: number;
  allowPrivilegeEscalation?: boolean;
  privileged?: boolean;
  readOnlyRootFilesystem?: boolean;
  capabilities?: { drop?: string[]; add?: string[] };
  seccompProfile?: { type: string };
}

export interface Volume {
  name: string;
  secret?: { secretName: string; items?: { key: string; path: string }[]; defaultMode?: number };
  hostPath?: { path: string; type: string };
  emptyDir?: { medium?: string; sizeLimit?: string };
}

export interface PodSpec {
  containers: Container[];
  securityContext?: SecurityContext;
  terminationGracePeriodSeconds?: number;
  volumes?: Volume[];
  hostAliases?: { ip: string; hostnames: string[] }[];
  topologySpreadConstraints?: {
    topologyKey: string;
    maxSkew: number;
    whenUnsatisfiable: string;
    labelSelector?: { matchLabels?: Record<string, string> };
  }[];
  automountServiceAccountToken?: boolean;
  enableServiceLinks?: boolean;
}

export interface Deployment extends KubeObject {
  spec: {
    replicas?: number;
    selector: { matchLabels: Record<string, string> };
    strategy?: { type: string; rollingUpdate?: { maxUnavailable?: number | string; maxSurge?: number | string } };
    template: { metadata: { labels: Record<string, string>; annotations?: Record<string, string> }; spec: PodSpec };
  };
}

/** The objects `kubectl kustomize dir` renders. */
export function render(dir: string): KubeObject[] {
  const result = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
  if (result.status !== 0) throw new Error(`kubectl kustomize ${dir}: ${result.stderr}`);
  return parseAllDocuments(result.stdout).map((document) => document.toJS() as KubeObject);
}

/** The one object of that kind and name (the name without kustomize's hash suffix). */
export function find<T extends KubeObject = KubeObject>(objects: KubeObject[], kind: string, name: string): T {
  const found = objects.filter((o) => o.kind === kind && (o.metadata.name === name || hashed(o, name)));
  if (found.length !== 1) throw new Error(`${found.length} ${kind} named ${name} rendered`);
  return found[0] as T;
}

/** Whether the object is the generated one of that name: kustomize appends `-` and a 10-character hash. */
function hashed(object: KubeObject, name: string): boolean {
  return new RegExp(`^${name}-[a-z0-9]{10}$`).test(object.metadata.name);
}

/**
 * deploy/kubernetes copied to a temporary directory, with the secret files the production
 * overlay takes from its secrets/ filled in: a random cursor secret and Redis password, and the
 * test CA and client certificate of `tls`.
 */
export function manifestTree(tls: TlsFiles): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'greeting-kubernetes-'));
  cpSync(KUBERNETES_DIR, dir, { recursive: true });
  const secrets = join(dir, 'overlays', 'production', 'secrets');
  writeFileSync(join(secrets, 'cursor-secret'), randomBytes(32).toString('base64'));
  writeFileSync(join(secrets, 'redis-password'), randomBytes(24).toString('base64url'));
  copyFileSync(tls.ca, join(secrets, 'ca.crt'));
  copyFileSync(tls.clientCert, join(secrets, 'tls.crt'));
  copyFileSync(tls.clientKey, join(secrets, 'tls.key'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A Secret's keys and values, decoded. */
export function secretData(objects: KubeObject[], name: string): Record<string, string> {
  const secret = objects.find((o) => o.kind === 'Secret' && o.metadata.name === name) as
    | (KubeObject & { data?: Record<string, string> })
    | undefined;
  if (secret === undefined) throw new Error(`no Secret ${name} rendered`);
  return Object.fromEntries(
    Object.entries(secret.data ?? {}).map(([key, value]) => [key, Buffer.from(value, 'base64').toString('utf8')]),
  );
}

/** A mounted file: its path in the container, content and mode. */
export interface MountedFile {
  path: string;
  content: string;
  mode: number;
}

/** The files of a Secret volume, by their path within it. */
export function secretVolumeFiles(objects: KubeObject[], volume: Volume): MountedFile[] {
  if (volume.secret === undefined) return [];
  const { secretName, items, defaultMode } = volume.secret;
  const data = secretData(objects, secretName);
  // A Secret volume's files are 0644 unless defaultMode says otherwise.
  const mode = defaultMode ?? 0o644;
  return (items ?? Object.keys(data).map((key) => ({ key, path: key }))).map(({ key, path }) => {
    const content = data[key];
    if (content === undefined) throw new Error(`Secret ${secretName} has no key ${key}`);
    return { path, content, mode };
  });
}

/** The files the container finds where the Secrets of its pod are mounted. */
export function mountedFiles(objects: KubeObject[], pod: PodSpec, container: Container): MountedFile[] {
  return (container.volumeMounts ?? []).flatMap((mount) => {
    const volume = pod.volumes?.find((v) => v.name === mount.name);
    if (volume === undefined) return [];
    return secretVolumeFiles(objects, volume).map((file) => ({ ...file, path: join(mount.mountPath, file.path) }));
  });
}

/** Writes mounted files under `root`, as the container would find them there. */
export function writeMountedFiles(root: string, files: MountedFile[]): void {
  for (const file of files) {
    const path = join(root, file.path);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, file.content);
    chmodSync(path, file.mode);
  }
}

/** The container's environment from its ConfigMaps, values and Secrets, in Kubernetes's order: env after envFrom. */
export function containerEnvironment(objects: KubeObject[], container: Container): Record<string, string> {
  const env: Record<string, string> = {};
  for (const source of container.envFrom ?? []) {
    const name = source.configMapRef?.name;
    const configMap = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === name) as
      | (KubeObject & { data?: Record<string, string> })
      | undefined;
    if (configMap === undefined) throw new Error(`no ConfigMap ${name} rendered`);
    Object.assign(env, configMap.data);
  }
  for (const { name, value, valueFrom } of container.env ?? []) {
    const ref = valueFrom?.secretKeyRef;
    const resolved = ref === undefined ? value : secretData(objects, ref.name)[ref.key];
    if (resolved === undefined) throw new Error(`${name} has no value`);
    env[name] = resolved;
  }
  return env;
}

/** The seconds a container's preStop hook takes: its sleep action, or an exec of `sleep N`. */
export function preStopSeconds(container: Container): number {
  const preStop = container.lifecycle?.preStop;
  if (preStop?.sleep !== undefined) return preStop.sleep.seconds;
  const [command, seconds, ...rest] = preStop?.exec?.command ?? [];
  if (command !== 'sleep' || rest.length > 0 || !/^\d+$/.test(String(seconds))) return 0;
  return Number(seconds);
}

/** A quantity of memory in bytes (`128Mi`, `1G`, `268435456`). */
export function bytes(quantity: string): number {
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|k|M|G)?$/.exec(quantity);
  if (match === null) throw new Error(`not a memory quantity: ${quantity}`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, k: 1e3, M: 1e6, G: 1e9 }[match[2] ?? ''] ?? 1;
  return Number(match[1]) * unit;
}

/** A quantity of CPU in cores (`250m`, `1`). */
export function cores(quantity: string): number {
  const match = /^(\d+(?:\.\d+)?)(m)?$/.exec(quantity);
  if (match === null) throw new Error(`not a CPU quantity: ${quantity}`);
  return Number(match[1]) / (match[2] === 'm' ? 1000 : 1);
}
