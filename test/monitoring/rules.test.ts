import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parse, stringify } from 'yaml';
import { type AlertingRule, type RuleGroup, rules, sliRecord } from '../../scripts/monitoring/rules.js';
import { RUNBOOK_BASE_URL, SLO_WINDOW_SECONDS } from '../../scripts/monitoring/settings.js';
import {
  DASHBOARD_CONFIG_MAP_FILE,
  DASHBOARD_FILE,
  generatedFiles,
  PROMETHEUS_RULE_FILE,
  RULES_FILE,
  rulesFile,
} from '../../scripts/monitoring/write.js';
import { run } from '../run-command.js';
import { ROOT } from '../server-process.js';
import { PROMETHEUS_SKIP_REASON } from './prometheus.js';

/**
 * The rules and the dashboard in deploy/: each file what `npm run monitoring` writes, one source
 * for Prometheus and the Kubernetes component, every runbook link an anchor of docs/operations.md;
 * `promtool check rules` clean, and `promtool test rules` of rules.promtool.yml passing, with every
 * alert in it both firing and silent, and every recording rule's value checked.
 */

const PROMTOOL_TESTS = join(ROOT, 'test', 'monitoring', 'rules.promtool.yml');

const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const shipped = (): RuleGroup[] => (parse(read(RULES_FILE)) as { groups: RuleGroup[] }).groups;
const alerts = (): AlertingRule[] => shipped().flatMap((group) => group.rules.filter((rule) => 'alert' in rule));

/** A heading's anchor as GitHub makes it. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

interface PromtoolTests {
  tests: {
    alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[];
    promql_expr_test?: { expr: string }[];
  }[];
}

describe('deploy/prometheus and deploy/grafana', () => {
  it('are what npm run monitoring writes from scripts/monitoring/', () => {
    for (const [path, text] of generatedFiles()) {
      assert.equal(read(path), text, `${path} is stale: run npm run monitoring`);
    }
  });

  it('the PrometheusRule of the podmonitor component carries the rules file, and its ConfigMap the dashboard', () => {
    const rule = parse(read(PROMETHEUS_RULE_FILE)) as { kind: string; spec: { groups: unknown } };
    assert.equal(rule.kind, 'PrometheusRule');
    assert.deepEqual(rule.spec.groups, shipped());
    const map = parse(read(DASHBOARD_CONFIG_MAP_FILE)) as {
      metadata: { labels: Record<string, string> };
      data: Record<string, string>;
    };
    assert.equal(map.metadata.labels.grafana_dashboard, '1');
    assert.deepEqual(Object.values(map.data), [read(DASHBOARD_FILE)]);
  });

  it('has at least the alerts the service needs, each with a summary, a description, a severity and a runbook anchor in docs/operations.md', () => {
    const anchors = new Set(
      [...read('docs/operations.md').matchAll(/^#{2,6} (.+)$/gm)].map(([, heading]) => slug(heading as string)),
    );
    const names = alerts().map((rule) => rule.alert);
    for (const wanted of [
      'FastBurn',
      'SlowBurn',
      'NotReady',
      'RedisUnreachable',
      'RateLimitRefusing',
      'EventLoop',
      'Restarting',
      'Unavailable',
      'FaultsInjected',
    ]) {
      assert.ok(
        names.some((name) => name.includes(wanted)),
        `an alert on ${wanted}`,
      );
    }
    for (const rule of alerts()) {
      assert.ok(['critical', 'warning'].includes(rule.labels.severity), rule.alert);
      assert.ok(rule.annotations.summary.length > 0, rule.alert);
      assert.match(rule.annotations.description, /\{\{ \$(value|labels)/, `${rule.alert}: a description with values`);
      // Absolute, so that a notification can open it.
      const [page, anchor] = rule.annotations.runbook_url.split('#');
      assert.equal(page, RUNBOOK_BASE_URL, rule.alert);
      assert.match(page as string, /^https:\/\/[^/]+\/.+docs\/operations\.md$/, rule.alert);
      assert.ok(anchors.has(anchor as string), `${rule.alert}: docs/operations.md has no #${anchor}`);
    }
  });

  it("the SLI over the SLO's whole window is evaluated in a slower group of its own, and alone there with the budget left", () => {
    const [own, ...others] = shipped().filter((group) =>
      group.rules.some((rule) => 'record' in rule && rule.record === sliRecord(SLO_WINDOW_SECONDS)),
    );
    assert.equal(others.length, 0);
    assert.ok(own?.interval !== undefined, 'an interval of its own');
    assert.deepEqual(
      new Set(own?.rules.map((rule) => ('record' in rule ? rule.record : rule.alert))),
      new Set([sliRecord(SLO_WINDOW_SECONDS), 'slo:error_budget:remaining_ratio']),
    );
  });

  it("the dashboard: the page's burn rates drawn as lines, the budget red once spent, rates per second, namespace and instance variables", () => {
    interface Panel {
      title: string;
      fieldConfig?: {
        defaults: {
          unit?: string;
          thresholds?: { steps: { color: string; value: number | null }[] };
          custom?: { thresholdsStyle?: { mode: string } };
        };
      };
      targets?: { expr: string }[];
    }
    const model = JSON.parse(read(DASHBOARD_FILE)) as { panels: Panel[]; templating: { list: { name: string }[] } };
    const panels = model.panels.filter((panel) => panel.targets !== undefined);
    const burns = panels.filter((panel) => panel.title.endsWith('burn rate'));
    assert.equal(burns.length, 2);
    for (const panel of burns) {
      const { thresholds, custom } = panel.fieldConfig?.defaults ?? {};
      assert.deepEqual(
        thresholds?.steps.map((step) => step.value),
        [null, 6, 14.4],
        panel.title,
      );
      assert.equal(custom?.thresholdsStyle?.mode, 'line', panel.title);
    }
    const budgets = panels.filter((panel) => panel.title.endsWith('error budget left'));
    assert.equal(budgets.length, 2);
    for (const panel of budgets) {
      assert.deepEqual(panel.fieldConfig?.defaults.thresholds?.steps, [
        { color: 'red', value: null },
        { color: 'green', value: 0 },
      ]);
    }
    for (const panel of panels) {
      if (panel.targets?.some((target) => /\brate\(/.test(target.expr))) {
        assert.notEqual(panel.fieldConfig?.defaults.unit, 'short', `${panel.title}: a rate's unit`);
      }
    }
    assert.deepEqual(
      model.templating.list.map((variable) => variable.name),
      ['datasource', 'namespace', 'instance'],
    );
  });

  it('rules.promtool.yml makes every alert fire and stay silent, and checks every recording rule', () => {
    const { tests } = parse(readFileSync(PROMTOOL_TESTS, 'utf8')) as PromtoolTests;
    const cases = tests.flatMap((test) => test.alert_rule_test ?? []);
    for (const { alert } of alerts()) {
      const own = cases.filter((c) => c.alertname === alert);
      assert.ok(
        own.some((c) => c.exp_alerts.length > 0),
        `${alert} fires in a test`,
      );
      assert.ok(
        own.some((c) => c.exp_alerts.length === 0),
        `${alert} stays silent in a test`,
      );
    }
    const exprs = tests.flatMap((test) => test.promql_expr_test ?? []).map((test) => test.expr);
    for (const group of shipped()) {
      for (const rule of group.rules) {
        if ('record' in rule)
          assert.ok(
            exprs.some((expr) => expr.startsWith(rule.record)),
            `${rule.record} checked`,
          );
      }
    }
  });

  describe('with promtool', { skip: PROMETHEUS_SKIP_REASON }, () => {
    it('promtool check rules: the rules file and its render for the live test are clean', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'greeting-rules-'));
      try {
        const scaled = join(dir, 'scaled.rules.yml');
        writeFileSync(scaled, rulesFile({ timeScale: 60, injectedFaultsSpendBudget: true }));
        const checked = await run('promtool', ['check', 'rules', join(ROOT, RULES_FILE), scaled]);
        assert.equal(checked.code, 0, checked.stdout + checked.stderr);
        const count = rules().reduce((sum, group) => sum + group.rules.length, 0);
        assert.equal(checked.stdout.match(new RegExp(`SUCCESS: ${count} rules found`, 'g'))?.length, 2, checked.stdout);
        assert.doesNotMatch(checked.stdout + checked.stderr, /WARN|FAILED/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a whole-number latency threshold reads its bucket as Prometheus 3 writes it (le="1.0") and as 2 does (le="1")', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'greeting-rules-'));
      try {
        writeFileSync(join(dir, 'rules.yml'), rulesFile({ latencyThresholdSeconds: 1 }));
        const sli = (job: string, value: number) => ({
          labels: `slo:errors:ratio_rate1h{job="${job}",service="greeting-service",slo="latency"}`,
          value,
        });
        const input = (job: string, le: string) => {
          const labels = `job="${job}",instance="a:8080",method="GET",route="/api/hello",status="200"`;
          return [
            { series: `service_ready{job="${job}",instance="a:8080"}`, values: '1x70' },
            { series: `http_request_duration_seconds_bucket{${labels},le="${le}"}`, values: '0+420x70' },
            { series: `http_request_duration_seconds_count{${labels}}`, values: '0+600x70' },
          ];
        };
        writeFileSync(
          join(dir, 'test.yml'),
          stringify({
            rule_files: ['rules.yml'],
            evaluation_interval: '1m',
            tests: [
              {
                interval: '1m',
                input_series: [...input('three', '1.0'), ...input('two', '1')],
                promql_expr_test: [
                  {
                    expr: 'slo:errors:ratio_rate1h{slo="latency"}',
                    eval_time: '1h',
                    exp_samples: [sli('three', 0.3), sli('two', 0.3)],
                  },
                ],
              },
            ],
          }),
        );
        const tested = await run('promtool', ['test', 'rules', join(dir, 'test.yml')]);
        assert.equal(tested.code, 0, tested.stdout + tested.stderr);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('promtool test rules rules.promtool.yml: SUCCESS', async () => {
      const tested = await run('promtool', ['test', 'rules', PROMTOOL_TESTS]);
      assert.equal(tested.code, 0, tested.stdout + tested.stderr);
      assert.match(tested.stdout, /SUCCESS/);
    });
  });
});
