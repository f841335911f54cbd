// NodeMetrics' per-tenant series, as a scrape renders them: fires by tenant and outcome, the
// first-attempt lag, throttled fires, and the scrape-time gauges (queued, in flight, oldest queued,
// DLQ), each with the top --metrics-tenants tenants named and the rest summed under `other`; a
// tenant that drops out of the top loses its series (and starts again at 0 when it comes back).
import t from 'tap';
import type { Clock } from '../../../src/base/clock.js';
import { NodeMetrics, type MetricsSource } from '../../../src/observe/metrics.js';

interface FakeNode {
  queued: Map<string, number>;
  inflight: Map<string, number>;
  agesMs: [string, number][];
  dead: Map<string, number>;
}

function fakeSource(node: FakeNode): MetricsSource {
  const total = (m: Map<string, number>): number => [...m.values()].reduce((a, b) => a + b, 0);
  const source = {
    host: { groups: new Map(), stats: { heartbeatsWhileHeld: 0 } },
    schedulerGroups: () => [],
    deliveryQueued: () => total(node.queued),
    deliveryInflight: () => total(node.inflight),
    workersConnected: () => new Map(),
    workerLeases: () => ({ held: 0, waiting: 0 }),
    workerLeasesLost: () => ({ notRenewed: 0, disconnected: 0 }),
    tenantDeliveries: (tenant: string) => ({
      queued: node.queued.get(tenant) ?? 0,
      inflight: node.inflight.get(tenant) ?? 0,
    }),
    tenantQueueAgesMs: () => node.agesMs,
    deadRunsByTenant: () => node.dead,
  };
  return source as unknown as MetricsSource; // the metrics read only these members of the host
}

function emptyNode(): FakeNode {
  return { queued: new Map(), inflight: new Map(), agesMs: [], dead: new Map() };
}

class FakeClock implements Clock {
  ms = 0;
  nowMs(): number {
    return 1_800_000_000_000 + this.ms;
  }
  monotonicMs(): number {
    return this.ms;
  }
}

/** The samples of one metric (exact name), by their label text without the node label. */
function samples(body: string, name: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of body.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    // No label value in these tests holds a comma; prom-client puts `node` first or last.
    const labels = line
      .slice(name.length + 1, line.lastIndexOf('}'))
      .split(',')
      .filter((pair) => pair !== 'node="n1"')
      .join(',');
    out.set(labels, Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return out;
}

/** The tenant label values a metric has in the scrape. */
function tenantsOf(body: string, name: string): string[] {
  const tenants = new Set<string>();
  for (const labels of samples(body, name).keys()) {
    const m = /tenant="([^"]*)"/.exec(labels);
    if (m) tenants.add(m[1]!);
  }
  return [...tenants].sort();
}

const SLOT = 1_800_000_000_000;

/** `n` attempts of `tenant` handed out (first attempts, 250 ms late) and ended with `outcome`. */
function fire(m: NodeMetrics, tenant: string, n: number, outcome: 'success' | 'fail' = 'success') {
  for (let i = 0; i < n; i++) {
    m.deliveryHandedOut(1, SLOT, SLOT + 250, tenant, 1);
    m.deliveryFinished(1, outcome, SLOT, SLOT + 300, tenant, 1);
  }
}

const PER_TENANT = [
  'tickraft_tenant_fires_total',
  'tickraft_tenant_fire_lag_seconds_count',
  'tickraft_tenant_fires_throttled_total',
  'tickraft_tenant_deliveries_queued',
  'tickraft_tenant_deliveries_inflight',
  'tickraft_tenant_queue_oldest_seconds',
  'tickraft_tenant_dead_runs',
];

t.test('every per-tenant series, with the tenant and other labels', async (t) => {
  const node: FakeNode = {
    queued: new Map([
      ['acme', 4],
      ['tiny', 6],
    ]),
    inflight: new Map([
      ['acme', 2],
      ['tiny', 1],
    ]),
    agesMs: [
      ['acme', 1500],
      ['tiny', 9000],
      ['idle', 3000],
    ],
    dead: new Map([
      ['acme', 2],
      ['tiny', 5],
      ['', 1],
    ]),
  };
  const m = new NodeMetrics(fakeSource(node), 'n1', { tenantLabels: 1, clock: new FakeClock() });
  fire(m, 'acme', 3);
  fire(m, 'acme', 1, 'fail');
  m.deliveryHandedOut(2, SLOT, SLOT + 5000, 'acme', 1); // a retry: no lag observed
  m.deliveryFinished(2, 'retry', SLOT, SLOT + 5100, 'acme', 1);
  fire(m, 'tiny', 1);
  m.fireThrottled('acme', 3);
  m.fireThrottled('tiny');
  const { body } = await m.render();
  t.same(
    samples(body, 'tickraft_tenant_fires_total'),
    new Map([
      ['tenant="acme",outcome="success"', 3],
      ['tenant="acme",outcome="retry"', 1],
      ['tenant="acme",outcome="fail"', 1],
      ['tenant="acme",outcome="not_started"', 0],
      ['tenant="other",outcome="success"', 1],
      ['tenant="other",outcome="retry"', 0],
      ['tenant="other",outcome="fail"', 0],
      ['tenant="other",outcome="not_started"', 0],
    ]),
    'every outcome of every tenant value, from 0',
  );
  const lag = samples(body, 'tickraft_tenant_fire_lag_seconds_count');
  t.equal(lag.get('tenant="acme"'), 4, "acme's four first attempts");
  t.equal(lag.get('tenant="other"'), 1);
  t.equal(samples(body, 'tickraft_tenant_fire_lag_seconds_sum').get('tenant="acme"'), 1);
  t.equal(
    samples(body, 'tickraft_tenant_fire_lag_seconds_bucket').get('le="0.25",tenant="acme"'),
    4,
    'in the bucket of 250 ms',
  );
  t.same(
    samples(body, 'tickraft_tenant_fires_throttled_total'),
    new Map([
      ['tenant="acme"', 3],
      ['tenant="other"', 1],
    ]),
  );
  t.same(
    samples(body, 'tickraft_tenant_deliveries_queued'),
    new Map([
      ['tenant="acme"', 4],
      ['tenant="other"', 6],
    ]),
  );
  t.same(
    samples(body, 'tickraft_tenant_deliveries_inflight'),
    new Map([
      ['tenant="acme"', 2],
      ['tenant="other"', 1],
    ]),
  );
  t.same(
    samples(body, 'tickraft_tenant_queue_oldest_seconds'),
    new Map([
      ['tenant="acme"', 1.5],
      ['tenant="other"', 9],
    ]),
    'other: the oldest of the rest',
  );
  t.same(
    samples(body, 'tickraft_tenant_dead_runs'),
    new Map([
      ['tenant="acme"', 2],
      ['tenant="other"', 6],
    ]),
    'other: the rest summed (a fire id without a tenant among them)',
  );
  t.match(body, /# HELP tickraft_tenant_dead_runs .*sum by \(tenant\)/);
  // The per-tenant fires add up to the node's.
  for (const outcome of ['success', 'retry', 'fail'])
    t.equal(
      samples(body, 'tickraft_fires_total').get(`outcome="${outcome}"`),
      [...samples(body, 'tickraft_tenant_fires_total')]
        .filter(([k]) => k.endsWith(`outcome="${outcome}"`))
        .reduce((a, [, v]) => a + v, 0),
      `${outcome}: tenants sum to tickraft_fires_total`,
    );
  const again = (await m.render()).body;
  t.equal(
    samples(again, 'tickraft_tenant_fires_total').get('tenant="acme",outcome="success"'),
    3,
    'nothing counted twice',
  );
});

t.test('more tenants than N: exactly N named, and other, on every metric', async (t) => {
  const node = emptyNode();
  const m = new NodeMetrics(fakeSource(node), 'n1', { tenantLabels: 3, clock: new FakeClock() });
  for (let i = 1; i <= 10; i++) {
    const tenant = `t${String(i).padStart(2, '0')}`;
    fire(m, tenant, i);
    m.fireThrottled(tenant, 1);
    node.queued.set(tenant, 1);
    node.inflight.set(tenant, 1);
    node.agesMs.push([tenant, i * 1000]);
    node.dead.set(tenant, 1);
  }
  const { body } = await m.render();
  for (const name of PER_TENANT)
    t.same(tenantsOf(body, name), ['other', 't08', 't09', 't10'], `${name}: the 3 busiest + other`);
  t.equal(samples(body, 'tickraft_tenant_deliveries_queued').get('tenant="other"'), 7);
  t.equal(samples(body, 'tickraft_tenant_dead_runs').get('tenant="other"'), 7);
  t.equal(samples(body, 'tickraft_tenant_queue_oldest_seconds').get('tenant="other"'), 7);
  t.equal(
    samples(body, 'tickraft_tenant_fires_total').get('tenant="other",outcome="success"'),
    28,
    'other: 1 + 2 + … + 7',
  );
});

t.test('--metrics-tenants 0: every tenant under other', async (t) => {
  const m = new NodeMetrics(fakeSource(emptyNode()), 'n1', {
    tenantLabels: 0,
    clock: new FakeClock(),
  });
  fire(m, 'acme', 2);
  fire(m, 'globex', 1);
  const { body } = await m.render();
  for (const name of PER_TENANT) t.same(tenantsOf(body, name), ['other'], name);
  t.equal(samples(body, 'tickraft_tenant_fires_total').get('tenant="other",outcome="success"'), 3);
});

t.test('a tenant that drops out of the top N loses its series', async (t) => {
  const clock = new FakeClock();
  const node = emptyNode();
  const m = new NodeMetrics(fakeSource(node), 'n1', { tenantLabels: 1, clock });
  fire(m, 'early', 5);
  m.fireThrottled('early', 2);
  node.dead.set('early', 4);
  let body = (await m.render()).body;
  t.same(tenantsOf(body, 'tickraft_tenant_fires_total'), ['early', 'other']);

  // A busier tenant arrives; the ranking waits its few seconds, meanwhile nothing moves.
  fire(m, 'late', 500);
  clock.ms += 1000;
  body = (await m.render()).body;
  t.same(tenantsOf(body, 'tickraft_tenant_fires_total'), ['early', 'other'], 'not re-ranked yet');
  t.equal(
    samples(body, 'tickraft_tenant_fires_total').get('tenant="other",outcome="success"'),
    500,
  );

  clock.ms += 5000;
  fire(m, 'late', 10);
  fire(m, 'early', 1);
  body = (await m.render()).body;
  for (const name of PER_TENANT)
    t.same(tenantsOf(body, name), ['late', 'other'], `${name}: early's series removed`);
  t.equal(
    samples(body, 'tickraft_tenant_fires_total').get('tenant="other",outcome="success"'),
    501,
    "early's fire since the last scrape went to other",
  );
  t.equal(samples(body, 'tickraft_tenant_dead_runs').get('tenant="other"'), 4);

  // early becomes the busiest again: its counter restarts from 0 (rate() sees a reset).
  clock.ms += 5000;
  fire(m, 'early', 5000);
  clock.ms += 5000;
  body = (await m.render()).body;
  t.same(tenantsOf(body, 'tickraft_tenant_fires_total'), ['early', 'other']);
  t.equal(
    samples(body, 'tickraft_tenant_fires_total').get('tenant="early",outcome="success"'),
    5000,
    'only what it did since it came back',
  );
  t.equal(samples(body, 'tickraft_tenant_fires_throttled_total').get('tenant="early"'), 0);
});

t.test('fireThrottled counts one by default', async (t) => {
  const m = new NodeMetrics(fakeSource(emptyNode()), 'n1', { clock: new FakeClock() });
  m.fireThrottled('acme');
  m.fireThrottled('acme');
  m.fireThrottled('acme', 5);
  const { body } = await m.render();
  t.equal(samples(body, 'tickraft_tenant_fires_throttled_total').get('tenant="acme"'), 7);
  t.match(body, /^tickraft_tenant_fires_throttled_total\{tenant="acme",node="n1"\} 7$/m);
});
