import { type SpawnOptions, type SpawnSyncOptions, type SpawnSyncReturns, spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * podman as the container tests call it, through a containers.conf that replaces the system's
 * (CONTAINERS_CONF). runc, since crun refuses a machine whose cgroups are in hybrid mode; and
 * containers cannot raise their resource limits here ("error setting rlimit"), so every container,
 * compose's included, gets limits at the caller's hard ones.
 */

function containersConf(): string {
  const file = join(tmpdir(), 'greeting-service-containers.conf');
  const hardNofile = spawnSync('sh', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).stdout.trim() || '1024';
  const system = readFileSync('/usr/share/containers/containers.conf', 'utf8');
  const limits = `default_ulimits = ["nofile=${hardNofile}:${hardNofile}", "nproc=16384:16384"]`;
  writeFileSync(
    file,
    system
      .replace(/^\[containers\]$/m, `[containers]\n${limits}`)
      .replace(/^\[engine\]$/m, '[engine]\nruntime = "runc"'),
  );
  return file;
}

let conf: string | undefined;

/** The environment of every podman and podman-compose command. */
export function podmanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  conf ??= containersConf();
  return { ...process.env, CONTAINERS_CONF: conf, ...extra };
}

/** podman with these arguments; its result, whatever its exit status. */
export function podman(args: string[], options: SpawnSyncOptions = {}): SpawnSyncReturns<string> {
  return spawnSync('podman', args, {
    encoding: 'utf8',
    env: podmanEnv(),
    maxBuffer: 64 * 1024 * 1024,
    ...options,
  }) as SpawnSyncReturns<string>;
}

/**
 * A command that must succeed: its standard output, or an error with the end of its standard
 * error, `secret` blotted out (podman-compose prints the environment it passes on).
 */
export function run(command: string, args: string[], options: SpawnSyncOptions & { secret?: string } = {}): string {
  const { secret, ...spawnOptions } = options;
  const result = spawnSync(command, args, {
    encoding: 'utf8',
    env: podmanEnv(),
    maxBuffer: 64 * 1024 * 1024,
    ...spawnOptions,
  }) as SpawnSyncReturns<string>;
  if (result.status !== 0) {
    let tail = String(result.stderr).slice(-4000);
    if (secret) tail = tail.replaceAll(secret, '[secret]');
    throw new Error(
      `${command} ${args.join(' ').slice(0, 200)} failed (${result.error ?? `exit ${result.status}`})\n${tail}`,
    );
  }
  return String(result.stdout);
}

/**
 * `run` without blocking: for the commands sent while a load is running, whose clients must keep
 * sending (and timing) meanwhile. Resolves with the exit status and the output.
 */
export function runAsync(
  command: string,
  args: string[],
  options: SpawnOptions & { secret?: string } = {},
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const { secret, ...spawnOptions } = options;
  const child = spawn(command, args, { env: podmanEnv(), stdio: ['ignore', 'pipe', 'pipe'], ...spawnOptions });
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  return new Promise((resolve) => {
    child.once('close', (status) => {
      resolve({ status, stdout, stderr: secret ? stderr.replaceAll(secret, '[secret]') : stderr });
    });
  });
}
