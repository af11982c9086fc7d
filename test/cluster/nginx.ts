import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT } from '../server-process.js';

/** The load balancer's configuration as shipped: the cluster test runs this very file. */
export const NGINX_CONF = join(ROOT, 'deploy', 'nginx.conf');

/**
 * What a deployment fills in: where nginx listens, the name server that finds the instances, the
 * three instances, a directory it may write, its access log.
 */
export const PLACEHOLDERS = [
  'NGINX_LISTEN',
  'NGINX_RESOLVER',
  'INSTANCE_1',
  'INSTANCE_2',
  'INSTANCE_3',
  'NGINX_RUN_DIR',
  'ACCESS_LOG',
] as const;
export type Placeholder = (typeof PLACEHOLDERS)[number];

/** A placeholder: an environment variable's name in braces, upper case; nginx's own variables are lower case. */
const PLACEHOLDER = /\$\{([A-Z_][A-Z0-9_]*)\}/g;

/** The names of the `${NAME}` placeholders in a configuration, each once, in order of appearance. */
export function placeholdersIn(text: string): string[] {
  return [...new Set([...text.matchAll(PLACEHOLDER)].map((match) => match[1] as string))];
}

/** The configuration with each placeholder replaced, as envsubst does; a placeholder left over is an error. */
export function render(text: string, values: Record<Placeholder, string>): string {
  const rendered = text.replace(PLACEHOLDER, (whole, name: string) => {
    const value = values[name as Placeholder];
    if (value === undefined) throw new Error(`deploy/nginx.conf has a placeholder no value is given for: ${whole}`);
    return value;
  });
  return rendered;
}

/** The first name server of /etc/resolv.conf, as deploy/nginx-resolver.envsh gives it in a container. */
async function firstNameServer(): Promise<string> {
  const address = /^nameserver\s+(\S+)/m.exec(await readFile('/etc/resolv.conf', 'utf8').catch(() => ''))?.[1];
  if (address === undefined) return '127.0.0.1';
  return address.includes(':') ? `[${address}]` : address;
}

/** nginx's binary: on PATH, or where Debian's package puts it (/usr/sbin is not on every user's PATH). */
export const NGINX_BIN = ['nginx', '/usr/sbin/nginx'].find(
  (bin) => (bin.includes('/') ? existsSync(bin) : true) && spawnSync(bin, ['-v']).error === undefined,
);

export interface AccessLog {
  requests: number;
  /** Requests nginx passed on to another instance after the first failed them. */
  retried: number;
  /** Requests nginx answered with a status of its own (502, 504) since no instance could. */
  fromNginx: number;
  /** The log lines of the first few retried requests. */
  retriedLines: string[];
  /** The log lines of the first few requests that took nginx over half a second. */
  slowLines: string[];
}

/** nginx's access log (the `balancer` format of deploy/nginx.conf), tallied; other lines are passed over. */
export function tallyAccessLog(text: string): AccessLog {
  const tally: AccessLog = { requests: 0, retried: 0, fromNginx: 0, retriedLines: [], slowLines: [] };
  for (const line of text.split('\n')) {
    const upstream = / upstream=(\S.*?) upstream_status=/.exec(line)?.[1];
    if (upstream === undefined) continue;
    tally.requests++;
    if (upstream.includes(',') && tally.retried++ < 5) tally.retriedLines.push(line);
    if (Number(/ ([\d.]+) upstream=/.exec(line)?.[1]) > 0.5 && tally.slowLines.length < 5) tally.slowLines.push(line);
    // The service answers neither: a 502 or 504 is nginx's own, after every try failed.
    if (/" (502|504) /.test(line)) tally.fromNginx++;
  }
  return tally;
}

/** Why nginx failed to get an answer from an instance, as its error log says, with how often. */
export function upstreamErrors(text: string): Record<string, number> {
  const kinds: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const kind = /\[error\] [\d#]+: \*\d+ (.*?)(?: while [^,]*)?, client:/.exec(line)?.[1];
    if (kind !== undefined) kinds[kind] = (kinds[kind] ?? 0) + 1;
  }
  return kinds;
}

/**
 * nginx running deploy/nginx.conf as the current user, in the foreground, with a prefix in a
 * temporary directory: `-p DIR -c FILE -e stderr`, `daemon off` and `master_process off`, so a
 * single process that needs no other user; its access log goes to a file in that directory.
 */
export class Nginx {
  #stderr = '';

  private constructor(
    readonly child: ChildProcess,
    readonly port: number,
    readonly accessLogFile: string,
  ) {}

  /** Renders the shipped configuration into `dir` and checks it with `nginx -t`; returns its path. */
  static async configure(
    dir: string,
    values: Omit<Record<Placeholder, string>, 'NGINX_RUN_DIR' | 'ACCESS_LOG' | 'NGINX_RESOLVER'>,
  ): Promise<string> {
    const file = join(dir, 'nginx.conf');
    const rendered = render(await readFile(NGINX_CONF, 'utf8'), {
      ...values,
      NGINX_RESOLVER: await firstNameServer(),
      NGINX_RUN_DIR: dir,
      ACCESS_LOG: join(dir, 'access.log'),
    });
    await writeFile(file, rendered);
    const check = spawnSync(NGINX_BIN as string, [...Nginx.#args(dir, file), '-t'], { encoding: 'utf8' });
    if (check.status !== 0) throw new Error(`nginx -t refused deploy/nginx.conf:\n${check.stderr}`);
    return file;
  }

  static #args(dir: string, file: string): string[] {
    return ['-p', dir, '-c', file, '-e', 'stderr', '-g', 'daemon off; master_process off;'];
  }

  static async start(dir: string, file: string, port: number): Promise<Nginx> {
    // In UTC, as deploy/nginx.conf needs for the timestamps of its own answers.
    const child = spawn(NGINX_BIN as string, Nginx.#args(dir, file), {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, TZ: 'UTC' },
    });
    const nginx = new Nginx(child, port, join(dir, 'access.log'));
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      nginx.#stderr += chunk;
    });
    return nginx;
  }

  /** The access log so far, tallied. */
  async accessLog(): Promise<AccessLog> {
    return tallyAccessLog(await readFile(this.accessLogFile, 'utf8'));
  }

  stderr(): string {
    return this.#stderr;
  }

  /** Why nginx failed to get an answer from an instance, as its error log says, with how often. */
  upstreamErrors(): Record<string, number> {
    return upstreamErrors(this.#stderr);
  }

  /** Stops it (SIGTERM: a fast shutdown), SIGKILL if it lingers. */
  async stop(): Promise<void> {
    const { child } = this;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(timer);
  }

  /** SIGKILL at once, for a test's last `after` and the process's exit. */
  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}
