import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { freePort } from '../ports.js';

/** Whether Debian's `prometheus` package is installed; without it the monitoring suites skip, saying so once. */
const missing = ['prometheus', 'promtool'].filter((tool) => spawnSync(tool, ['--version']).error !== undefined);
export const PROMETHEUS_SKIP_REASON =
  missing.length === 0 ? undefined : `monitoring tests need ${missing.join(' and ')} (.ci/run installs prometheus)`;
if (PROMETHEUS_SKIP_REASON !== undefined) process.stdout.write(`SKIPPED: ${PROMETHEUS_SKIP_REASON}\n`);

/** A sample of a query's answer. */
export interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

export interface RuleState {
  name: string;
  type: 'recording' | 'alerting';
  health: string;
  lastError?: string;
  state?: string;
  alerts?: { labels: Record<string, string>; state: string; value: string }[];
}

/**
 * A throw-away Prometheus on a free loopback port, scraping the targets of each job (by its name)
 * every second with `rules` loaded, its data in a temporary directory.
 */
export interface Prometheus {
  url: string;
  query(expr: string): Promise<Sample[]>;
  rules(): Promise<RuleState[]>;
  stop(): Promise<void>;
  log(): string;
}

export async function startPrometheus(jobs: Record<string, string[]>, rules: string): Promise<Prometheus> {
  const dir = mkdtempSync(join(tmpdir(), 'greeting-prometheus-'));
  writeFileSync(join(dir, 'rules.yml'), rules);
  writeFileSync(
    join(dir, 'prometheus.yml'),
    stringify({
      global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
      rule_files: [join(dir, 'rules.yml')],
      scrape_configs: Object.entries(jobs).map(([job, targets]) => ({ job_name: job, static_configs: [{ targets }] })),
    }),
  );
  const port = await freePort();
  const child: ChildProcess = spawn(
    'prometheus',
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    log += chunk;
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${url}/api/v1/${path}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`${path}: ${body.error}`);
    return body.data;
  };
  const prometheus: Prometheus = {
    url,
    query: async (expr) => (await api<{ result: Sample[] }>(`query?query=${encodeURIComponent(expr)}`)).result,
    rules: async () =>
      (await api<{ groups: { rules: RuleState[] }[] }>('rules')).groups.flatMap((group) => group.rules),
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
    log: () => log,
  };
  const deadline = performance.now() + 20_000;
  for (;;) {
    try {
      if ((await fetch(`${url}/-/ready`)).status === 200) return prometheus;
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null || performance.now() > deadline) {
      await prometheus.stop();
      throw new Error(`prometheus did not start:\n${log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
