// Delivery observations are buffered and reach prom-client at scrape time: a scrape must see
// every value observed before it, once, in the right buckets, and a full buffer flushes itself.
import t from 'tap';
import { Histogram, Registry } from 'prom-client';
import { NodeMetrics, type MetricsSource } from '../../../src/observe/metrics.js';
import { CountBuffer, ObservationBuffer } from '../../../src/observe/observation-buffer.js';

t.test('ObservationBuffer hands every value over once, at flush or when full', (t) => {
  const seen: number[] = [];
  const b = new ObservationBuffer((v) => seen.push(v), 4);
  for (const v of [1, 2, 3]) b.add(v);
  t.same(seen, [], 'nothing before a flush');
  b.add(4);
  t.same(seen, [1, 2, 3, 4], 'a full buffer flushes itself');
  b.add(5);
  b.flush();
  b.flush();
  t.same(seen, [1, 2, 3, 4, 5], 'flushed once');
  t.end();
});

t.test('ObservationBuffer hands each value back with its key', (t) => {
  const seen: [number, number][] = [];
  const b = new ObservationBuffer((v, k) => seen.push([v, k]), 4);
  b.add(0.5, 7);
  b.add(1.5);
  b.flush();
  t.same(seen, [
    [0.5, 7],
    [1.5, 0],
  ]);
  t.end();
});

t.test('CountBuffer adds the counts per key', (t) => {
  const got: [string, number][] = [];
  const c = new CountBuffer<'a' | 'b'>((k, n) => got.push([k, n]));
  c.add('a');
  c.add('b');
  c.add('a');
  c.flush();
  c.flush();
  t.same(got, [
    ['a', 2],
    ['b', 1],
  ]);
  t.end();
});

t.test('a histogram scrape sees the buffered values', async (t) => {
  const registry = new Registry();
  const pending: ObservationBuffer[] = [];
  const h = new Histogram({
    name: 'x_seconds',
    help: 'x',
    buckets: [1, 10],
    registers: [registry],
    collect: () => pending[0]?.flush(),
  });
  pending.push(new ObservationBuffer((v) => h.observe(v)));
  for (const v of [0.5, 5, 50]) pending[0]!.add(v);
  const text = await registry.metrics();
  t.match(text, /x_seconds_bucket\{le="1"\} 1\n/);
  t.match(text, /x_seconds_bucket\{le="10"\} 2\n/);
  t.match(text, /x_seconds_count 3\n/);
  t.match(await registry.metrics(), /x_seconds_count 3\n/, 'a second scrape counts nothing twice');
});

t.test("NodeMetrics' delivery hooks show at the next scrape", async (t) => {
  // A node with no groups: only the delivery hooks feed these series.
  const lost = { notRenewed: 2, disconnected: 0 };
  const source = {
    host: { groups: new Map(), stats: { heartbeatsWhileHeld: 0 } },
    schedulerGroups: () => [],
    deliveryQueued: () => 0,
    deliveryInflight: () => 0,
    workersConnected: () => new Map([['reports', 2]]),
    workerLeases: () => ({ held: 3, waiting: 1 }),
    workerLeasesLost: () => lost,
    tenantDeliveries: () => ({ queued: 0, inflight: 0 }),
    tenantQueueAgesMs: () => [],
    deadRunsByTenant: () => new Map(),
  } as unknown as MetricsSource; // the metrics read only these members
  const m = new NodeMetrics(source, 'n1');
  m.deliveryHandedOut(1, 1_000, 2_500, 'acme', 3);
  m.deliveryHandedOut(2, 1_000, 9_000, 'acme', 3);
  m.deliveryFinished(1, 'success', 1_000, 3_000, 'acme', 3);
  m.deliveryFinished(2, 'retry', 1_000, 9_500, 'acme', 3);
  const { body } = await m.render();
  t.match(body, /tickraft_fire_lag_start_seconds_count\{node="n1",group="3"\} 1\n/);
  t.match(body, /tickraft_fire_lag_start_seconds_sum\{node="n1",group="3"\} 1.5\n/);
  t.match(body, /tickraft_fire_lag_response_seconds_sum\{node="n1",group="3"\} 2\n/);
  t.match(body, /tickraft_retries_total\{node="n1"\} 1\n/);
  t.match(body, /tickraft_fires_total\{outcome="success",node="n1"\} 1\n/);
  t.match(body, /tickraft_fires_total\{outcome="retry",node="n1"\} 1\n/);
  t.match(body, /tickraft_workers_connected\{pool="reports",node="n1"\} 2\n/);
  t.match(body, /tickraft_worker_leases\{state="held",node="n1"\} 3\n/);
  t.match(body, /tickraft_worker_leases\{state="waiting",node="n1"\} 1\n/);
  t.match(body, /tickraft_fires_total\{outcome="fail",node="n1"\} 0\n/);
  t.match(body, /tickraft_worker_leases_expired_total\{cause="not_renewed",node="n1"\} 2\n/);
  t.match(body, /tickraft_worker_leases_expired_total\{cause="disconnected",node="n1"\} 0\n/);
  lost.notRenewed = 5;
  lost.disconnected = 1;
  const again = (await m.render()).body;
  t.match(again, /tickraft_worker_leases_expired_total\{cause="not_renewed",node="n1"\} 5\n/);
  t.match(again, /tickraft_worker_leases_expired_total\{cause="disconnected",node="n1"\} 1\n/);
  t.match(again, /tickraft_retries_total\{node="n1"\} 1\n/, 'nothing counted twice');
  t.match(again, /tickraft_fires_total\{outcome="success",node="n1"\} 1\n/);
});
