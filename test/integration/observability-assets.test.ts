// The Grafana dashboard (deploy/grafana/tickraft.json) and the Prometheus alert rules
// (deploy/prometheus/alerts.yml) against what they depend on:
//
// - promtool (Debian's prometheus package) accepts the rules (`promtool check rules`, which also
//   parses the annotation templates), and the unit tests of alerts.test.yml pass
//   (`promtool test rules`: each alert fires on the series it is meant for and not on a healthy
//   neighbour);
// - every rule carries what on-call needs (`for`, a severity, a summary and a runbook
//   description), has a promtool unit test, and is listed in docs/OPERATIONS.md;
// - the dashboard is well formed for Grafana (panel ids, grid, the datasource variable on every
//   query, every `$variable` defined);
// - one real node started with --metrics-listen exports every metric the dashboard and the rules
//   name (a family in the `# TYPE` lines counts; `_bucket`, `_sum` and `_count` are resolved to
//   their histogram), and every label an expression filters, groups or titles its series by is
//   carried by a metric it reads. A renamed metric or a dropped label would otherwise leave an
//   empty panel or an alert that can never fire, and nothing would say so.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { Worker } from '../../src/api/worker-client.js';
import { createTenantCarefully } from '../helpers/api-cluster.js';
import { retryUnavailable } from '../helpers/api-retry.js';
import { eventually, ProcCluster, TEST_ADMIN_TOKEN } from '../helpers/cluster.js';
import { TEST_SECRET, WebhookSink } from '../helpers/webhook-sink.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const RULES = join(ROOT, 'deploy/prometheus/alerts.yml');
const RULE_TESTS = join(ROOT, 'deploy/prometheus/alerts.test.yml');
const DASHBOARD = join(ROOT, 'deploy/grafana/tickraft.json');
const OPERATIONS = join(ROOT, 'docs/OPERATIONS.md');
const ENSURE = join(ROOT, 'scripts/ensure-package.sh');

/** Series Prometheus makes itself rather than scraping them from a node. */
const PROMETHEUS_OWN = new Set(['up', 'scrape_duration_seconds', 'ALERTS', 'ALERTS_FOR_STATE']);
/** Labels Prometheus attaches to every scraped series (the scrape job and target). */
const TARGET_LABELS = new Set(['job', 'instance']);

type Obj = Record<string, unknown>;

// ---------------------------------------------------------------------------------------------
// What a PromQL expression reads: metric names, label names, Grafana variables

/** Words of PromQL that look like metric names but are operators or modifiers. */
const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'atan2',
  'inf',
  'nan',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
]);
/** A label list after a grouping or vector-matching keyword: `by (group, le)`. */
const LABEL_LIST = /\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)/g;

interface PromqlRefs {
  readonly metrics: Set<string>;
  readonly labels: Set<string>;
  /** Grafana variables (`$job`, `${group}`), Grafana's own `$__…` left out. */
  readonly variables: Set<string>;
}

/**
 * A lexical reading of the expression, enough for the queries of this repository (no grammar):
 * strings, matchers, label lists and ranges are taken out first, so what is left of each
 * identifier is a metric name unless it is a keyword, or a function (followed by a parenthesis).
 */
function promqlRefs(expr: string): PromqlRefs {
  const variables = new Set<string>();
  for (const m of expr.matchAll(/\$(?:\{(\w+)(?::\w+)?\}|(\w+))/g)) {
    const name = m[1] ?? m[2]!;
    if (!name.startsWith('__')) variables.add(name);
  }
  const labels = new Set<string>();
  let rest = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""');
  rest = rest.replace(/\{([^}]*)\}/g, (_, body: string) => {
    for (const m of body.matchAll(/([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)/g)) labels.add(m[1]!);
    return ' ';
  });
  rest = rest.replace(LABEL_LIST, (_, list: string) => {
    for (const l of list.split(',')) if (l.trim() !== '') labels.add(l.trim());
    return ' ';
  });
  rest = rest.replace(/\[[^\]]*\]/g, ' ');
  labels.delete('__name__');
  const metrics = new Set<string>();
  // Numbers and durations (0.99, 1e3, 30m) first, so that their letters are not read as names.
  for (const m of rest.matchAll(/\d[\w.]*|([A-Za-z_:][\w:]*)(\s*\()?/g)) {
    const name = m[1];
    if (name === undefined || m[2] !== undefined || KEYWORDS.has(name.toLowerCase())) continue;
    metrics.add(name);
  }
  return { metrics, labels, variables };
}

/** Labels a Grafana legend names: `{{group}} {{outcome}}`. */
function legendLabels(legend: string): string[] {
  return [...legend.matchAll(/\{\{\s*(\w+)\s*\}\}/g)].map((m) => m[1]!);
}

// ---------------------------------------------------------------------------------------------
// What a node exports

interface Exposition {
  /** Metric family → its type, from the `# TYPE` lines. */
  readonly types: Map<string, string>;
  /** Metric family → every label name its samples carry. */
  readonly labels: Map<string, Set<string>>;
}

/** The family a sample or query name belongs to: a histogram's `_bucket` is the histogram. */
function familyOf(name: string, types: ReadonlyMap<string, string>): string | undefined {
  if (types.has(name)) return name;
  const suffixes: [string, readonly string[]][] = [
    ['_bucket', ['histogram']],
    ['_sum', ['histogram', 'summary']],
    ['_count', ['histogram', 'summary']],
  ];
  for (const [suffix, kinds] of suffixes) {
    if (!name.endsWith(suffix)) continue;
    const base = name.slice(0, -suffix.length);
    if (kinds.includes(types.get(base) ?? '')) return base;
  }
  return undefined;
}

function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(m[1]!, m[2]!);
  const labels = new Map<string, Set<string>>();
  for (const m of text.matchAll(/^([A-Za-z_:][\w:]*)(?:\{(.*)\})? \S+$/gm)) {
    const family = familyOf(m[1]!, types);
    if (family === undefined) continue;
    let set = labels.get(family);
    if (set === undefined) labels.set(family, (set = new Set()));
    for (const l of (m[2] ?? '').matchAll(/([A-Za-z_]\w*)="(?:[^"\\]|\\.)*"/g)) set.add(l[1]!);
  }
  return { types, labels };
}

// ---------------------------------------------------------------------------------------------
// The assets

interface Rule {
  readonly alert: string;
  readonly expr: string;
  readonly for?: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
}

function readRules(): Rule[] {
  const doc = parse(readFileSync(RULES, 'utf8')) as { groups: { rules: Rule[] }[] };
  return doc.groups.flatMap((g) => g.rules);
}

/** A PromQL query of the dashboard, with where it is (for messages) and its legend. */
interface Query {
  readonly where: string;
  readonly expr: string;
  readonly legend: string;
}

interface Target {
  readonly refId: string;
  readonly expr: string;
  readonly legendFormat?: string;
  readonly datasource?: unknown;
}

interface Panel {
  readonly id: number;
  readonly type: string;
  readonly title: string;
  readonly description?: string;
  readonly gridPos: { x: number; y: number; w: number; h: number };
  readonly datasource?: unknown;
  readonly targets?: Target[];
}

interface Dashboard {
  readonly doc: Obj;
  readonly panels: Panel[];
  readonly variables: Obj[];
  readonly queries: Query[];
}

function readDashboard(): Dashboard {
  const doc = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Obj;
  const panels = doc['panels'] as Panel[];
  const variables = (doc['templating'] as { list: Obj[] }).list;
  const queries: Query[] = [];
  for (const p of panels) {
    for (const target of p.targets ?? []) {
      queries.push({
        where: `panel "${p.title}" ${target.refId}`,
        expr: target.expr,
        legend: target.legendFormat ?? '',
      });
    }
  }
  for (const v of variables) {
    if (v['type'] !== 'query') continue;
    // label_values(<selector>, <label>): the selector is PromQL, the label must be on it.
    const definition = String(v['definition']);
    const m = /^label_values\((.*),\s*(\w+)\)$/.exec(definition);
    if (m === null)
      throw new Error(`variable ${String(v['name'])}: not label_values(): ${definition}`);
    queries.push({ where: `variable ${String(v['name'])}`, expr: m[1]!, legend: `{{${m[2]!}}}` });
  }
  return { doc, panels, variables, queries };
}

// ---------------------------------------------------------------------------------------------
// promtool

function hasPromtool(): boolean {
  return spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** Installs Debian's prometheus package (which ships promtool) when missing, as npm test does. */
function ensurePromtool(): void {
  if (hasPromtool()) return;
  const what = 'the alert rules check (test/integration/observability-assets.test.ts)';
  spawnSync('sh', [ENSURE, 'prometheus', 'command -v promtool', what], { stdio: 'inherit' });
  if (!hasPromtool())
    throw new Error('the alert rules check needs promtool (apt-get install prometheus)');
}

function promtool(args: string[], cwd?: string): { status: number | null; output: string } {
  const r = spawnSync('promtool', args, {
    encoding: 'utf8',
    ...(cwd === undefined ? {} : { cwd }),
  });
  return { status: r.status, output: `${r.stdout}${r.stderr}`.trim() };
}

// ---------------------------------------------------------------------------------------------

t.test('the PromQL reader finds metrics, labels and variables', (t) => {
  const r = promqlRefs(
    'histogram_quantile(0.99, sum by (group, le) (rate(x_seconds_bucket{job="$job", a=~"b,c"}[$__rate_interval]))) > 1e3 ' +
      'or on (node) max(y_total offset 30m) - z{group=~"${group}"} or vector(0)',
  );
  t.same([...r.metrics].sort(), ['x_seconds_bucket', 'y_total', 'z']);
  t.same([...r.labels].sort(), ['a', 'group', 'job', 'le', 'node']);
  t.same([...r.variables].sort(), ['group', 'job']);
  t.end();
});

t.test('promtool accepts the rules and their unit tests pass', (t) => {
  ensurePromtool();
  const rules = readRules();
  const check = promtool(['check', 'rules', RULES]);
  t.comment(check.output);
  t.equal(check.status, 0, 'promtool check rules');
  t.match(check.output, `SUCCESS: ${rules.length} rules found`);

  // promtool test rules compares annotations as well; the runbook prose is left out of the copy
  // it runs on (alerts.test.yml says why).
  const dir = mkdtempSync(join(tmpdir(), 'tickraft-rules-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const doc = parse(readFileSync(RULES, 'utf8')) as { groups: { rules: Obj[] }[] };
  for (const g of doc.groups) for (const r of g.rules) delete r['annotations'];
  writeFileSync(join(dir, 'alerts.yml'), stringify(doc));
  copyFileSync(RULE_TESTS, join(dir, 'alerts.test.yml'));
  const unit = promtool(['test', 'rules', 'alerts.test.yml'], dir);
  t.comment(unit.output);
  t.equal(unit.status, 0, 'promtool test rules');
  t.end();
});

t.test('every rule tells on-call what it is, how bad, and what to do', (t) => {
  const rules = readRules();
  const names = rules.map((r) => r.alert);
  t.equal(new Set(names).size, names.length, 'alert names are unique');
  for (const want of [
    'TickraftFireLagHigh',
    'TickraftGroupWithoutLeader',
    'TickraftDLQGrowing',
    'TickraftWorkerLeasesExpiring',
    'TickraftNodeDown',
    'TickraftFsyncSlow',
  ])
    t.ok(names.includes(want), `${want} is defined`);
  const tested = new Set(
    (parse(readFileSync(RULE_TESTS, 'utf8')) as { tests: { alert_rule_test: Obj[] }[] }).tests
      .flatMap((c) => c.alert_rule_test)
      .map((a) => String(a['alertname'])),
  );
  const operations = readFileSync(OPERATIONS, 'utf8');
  for (const r of rules) {
    t.match(r.for ?? '', /^\d+[smh]$/, `${r.alert}: for`);
    t.ok(['warning', 'critical'].includes(r.labels?.['severity'] ?? ''), `${r.alert}: severity`);
    t.ok((r.annotations?.['summary'] ?? '').length > 10, `${r.alert}: summary`);
    t.ok((r.annotations?.['description'] ?? '').length > 100, `${r.alert}: runbook description`);
    t.ok(tested.has(r.alert), `${r.alert}: has a promtool unit test`);
    t.ok(operations.includes(`\`${r.alert}\``), `${r.alert}: listed in docs/OPERATIONS.md`);
  }
  t.end();
});

t.test('the dashboard is well formed for Grafana', (t) => {
  const { doc, panels, variables, queries } = readDashboard();
  t.ok(Number(doc['schemaVersion']) >= 36, 'schemaVersion');
  t.equal(doc['uid'], 'tickraft');
  const ds = variables.find((v) => v['type'] === 'datasource');
  t.equal(ds?.['name'], 'datasource', 'a datasource variable');
  t.equal(ds?.['query'], 'prometheus', 'of Prometheus data sources');
  const ids = panels.map((p) => p.id);
  t.equal(new Set(ids).size, ids.length, 'panel ids are unique');
  for (const p of panels) {
    const title = p.title;
    t.ok(title.length > 0, 'a title');
    const pos = p.gridPos;
    t.ok(pos.x >= 0 && pos.w > 0 && pos.x + pos.w <= 24 && pos.h > 0, `${title}: on the grid`);
    if (p.type === 'row') continue;
    t.ok((p.description ?? '').length > 0, `${title}: says what it shows`);
    const targets = p.targets ?? [];
    t.ok(targets.length > 0, `${title}: queries something`);
    // Every query through the datasource variable, so the dashboard imports into any Grafana.
    for (const target of [p, ...targets])
      t.same(target.datasource, { type: 'prometheus', uid: '${datasource}' }, `${title}: ds`);
  }
  const defined = new Set(variables.map((v) => String(v['name'])));
  for (const q of queries)
    for (const v of promqlRefs(q.expr).variables)
      t.ok(defined.has(v), `${q.where}: $${v} is a dashboard variable`);
  t.end();
});

t.test(
  'every metric and label the dashboard and the rules name is exported by a node',
  async (t) => {
    const started = Date.now();
    const cluster = await ProcCluster.create({
      nodes: 1,
      groups: 2,
      metrics: true,
      extraArgs: ['--tick-ms', '20'],
    });
    const node = cluster.node('n1');
    const client = cluster.client(node);
    const sink = new WebhookSink([TEST_SECRET]);
    // A pull-based worker, so that the per-pool worker series have samples to read labels from.
    const worker = new Worker({
      token: TEST_ADMIN_TOKEN,
      endpoints: [`${node.host}:${node.apiPort}`],
      workerId: 'assets-worker',
      pool: 'assets',
      capacity: 1,
      handle: () => Promise.resolve({ output: 'ok' }),
    });
    t.teardown(async () => {
      await worker.stop(1000);
      client.close();
      cluster.cleanup();
      await sink.close();
    });
    await sink.start();
    cluster.startAll();
    await cluster.waitReady(30_000);
    await worker.start();
    await createTenantCarefully(client, { tenantId: 'acme', signingSecret: TEST_SECRET });
    // A job firing every second: the per-group and per-tenant series exist once something fired.
    await retryUnavailable(() =>
      client.call('JobService', 'CreateJob', {
        jobId: 'assets-every-second',
        spec: { tenant: 'acme', schedule: '* * * * * *', target: { url: `${sink.url}/hook` } },
      }),
    );
    const scrape = async (): Promise<string> =>
      (await fetch(`http://${node.host}:${node.metricsPort}/metrics`)).text();
    const text = await eventually(async () => {
      const body = await scrape();
      for (const want of [
        /^tickraft_fires_total\{outcome="success",node="n1"\} [1-9]/m,
        /^tickraft_fire_lag_start_seconds_count\{node="n1",group="\d+"\} [1-9]/m,
        /^tickraft_tenant_fires_total\{tenant="acme",outcome="success",node="n1"\} [1-9]/m,
        /^tickraft_workers_connected\{pool="assets",node="n1"\} 1/m,
      ])
        if (!want.test(body)) throw new Error(`not yet: ${String(want)}`);
      return body;
    }, 20_000);
    const exported = parseExposition(text);

    const { queries } = readDashboard();
    const all: Query[] = [
      ...queries,
      ...readRules().map((r) => ({ where: `alert ${r.alert}`, expr: r.expr, legend: '' })),
    ];
    const named = new Set<string>();
    for (const q of all) {
      const refs = promqlRefs(q.expr);
      t.ok(refs.metrics.size > 0, `${q.where}: reads a metric`);
      const carried = new Set(TARGET_LABELS);
      for (const name of refs.metrics) {
        named.add(name);
        if (PROMETHEUS_OWN.has(name)) continue;
        const family = familyOf(name, exported.types);
        t.ok(family !== undefined, `${q.where}: ${name} is exported`);
        if (family === undefined) continue;
        for (const l of exported.labels.get(family) ?? []) carried.add(l);
      }
      for (const l of [...refs.labels, ...legendLabels(q.legend)])
        t.ok(carried.has(l), `${q.where}: label ${l} is on a metric it reads`);
    }
    t.comment(`${named.size} metric names in ${all.length} queries, in ${Date.now() - started} ms`);
  },
);
