import { chownSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeObject } from './api-schema.js';
import {
  type Container,
  containerEnvironment,
  type Deployment,
  secretVolumeFiles,
  writeMountedFiles,
} from './manifests.js';

/**
 * Those of the rendered objects that `played` picks, turned into what `podman kube play` (4.3)
 * runs as a cluster would run them (`objects` holds the Secrets and ConfigMaps they refer to).
 * Only for this test: the manifests stay what a cluster takes. Each change makes up for one limit
 * of podman's, as measured on the machines this service is developed on:
 *
 * - Secrets: podman stores a Secret of the file and then refuses it (`is not valid JSON`), so a
 *   secretKeyRef becomes the value it names, and a Secret volume a host directory holding the
 *   files the kubelet would mount, with the Secret's mode, in the group of the pod's fsGroup.
 * - `$(VAR)` in args: the kubelet expands it from the container's environment; podman passes it
 *   as written.
 * - containerPort: podman 4.3 publishes every one on each address of the host (from 4.7, only
 *   with --publish-all), which a cluster never does, and the second replica of a Deployment then
 *   fails on the port the first holds. Nothing refers to them here: podman runs no httpGet probe.
 * - Replicas: podman runs no autoscaler, and a Deployment that leaves the count to one is played
 *   with its minimum, which the autoscaler would set at its first look.
 * - Service names: podman has no Service addresses and no DNS between pods on its network, so
 *   each pod gets a hosts entry for the Services it reaches, pointing at the pod behind each
 *   (`addresses`).
 */
export function forPodman(
  objects: KubeObject[],
  played: (object: KubeObject) => boolean,
  secretFiles: string,
  addresses: Record<string, string>,
): KubeObject[] {
  return objects
    .filter((object) => played(object) && object.kind !== 'Secret')
    .map((object) => {
      if (object.kind !== 'Deployment') return object;
      const deployment = structuredClone(object) as Deployment;
      deployment.spec.replicas = replicasOf(objects, deployment);
      const pod = deployment.spec.template.spec;
      pod.containers = pod.containers.map((container) => asPlayed(objects, container));
      pod.volumes = pod.volumes?.map((volume) => {
        if (volume.secret === undefined) return volume;
        const dir = join(secretFiles, deployment.metadata.name, volume.name);
        const files = secretVolumeFiles(objects, volume);
        writeMountedFiles(dir, files);
        for (const file of files) chownSync(join(dir, file.path), 0, pod.securityContext?.fsGroup ?? 0);
        return { name: volume.name, hostPath: { path: dir, type: 'Directory' } };
      });
      const aliases = Object.entries(addresses).map(([hostname, ip]) => ({ ip, hostnames: [hostname] }));
      if (aliases.length > 0) pod.hostAliases = aliases;
      return deployment;
    });
}

/** How many pods a Deployment runs at first: its autoscaler's minimum, or else its own count. */
export function replicasOf(objects: KubeObject[], deployment: Deployment): number {
  const autoscaler = objects.find(
    (o) =>
      o.kind === 'HorizontalPodAutoscaler' &&
      (o.spec as { scaleTargetRef: { kind: string; name: string } }).scaleTargetRef.name === deployment.metadata.name,
  ) as (KubeObject & { spec: { minReplicas?: number } }) | undefined;
  return autoscaler?.spec.minReplicas ?? deployment.spec.replicas ?? 1;
}

/** A container with its Secret values in place, `$(VAR)` expanded in its args, and no container ports. */
function asPlayed(objects: KubeObject[], container: Container): Container {
  const { ports: _ports, ...played } = structuredClone(container);
  const values = containerEnvironment(objects, container);
  played.env = container.env?.map(({ name }) => ({ name, value: values[name] as string }));
  played.args = container.args?.map((arg) =>
    arg.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (text, name: string) => values[name] ?? text),
  );
  if (played.args === undefined) delete played.args;
  if (played.env === undefined) delete played.env;
  return played;
}
