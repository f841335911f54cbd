// The DeliveryRunner that `tickraft serve` uses, over real HTTP on 127.0.0.1: fairness between
// tenants (a hanging endpoint of one tenant does not delay another's fires), back-pressure when
// the queue is full, an attempt whose leadership lapsed while queued is never sent, an unknown
// tenant fails without a request, and every request is signed with the tenant's secrets.
import t from 'tap';
import { DeliveryRunner, type DeliveryRequest } from '../../../src/delivery/delivery-runner.js';
import { OriginPools } from '../../../src/delivery/origin-pools.js';
import { compileSigningKeys, verifyWebhook } from '../../../src/delivery/signing.js';
import type { AttemptReport } from '../../../src/delivery/webhook.js';
import type { Job } from '../../../src/scheduler/model.js';
import { spec } from '../scheduler/fixtures.js';
import { eventually, startSink } from './http-sink.js';

const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
const OLD_SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;

function job(id: string, tenant: string, url: string, priority = 1): Job {
  return {
    ...spec({ tenant, target: { url, headers: {} }, priority, attemptDeadlineMs: 120_000 }),
    id,
    version: 1,
    paused: false,
    createdAtMs: 0,
    updatedAtMs: 0,
    nextFireAtMs: undefined,
    lastToken: 0,
    remaining: undefined,
    finishedAtMs: undefined,
  };
}

function request(j: Job, i: number): DeliveryRequest {
  const slotMs = 1_800_000_000_000 + i * 1000;
  return { job: j, fireId: `${j.id}:${slotMs}`, slotMs, attempt: 1, token: 2 ** 24 + i };
}

t.test('a hanging endpoint of tenant A does not delay tenant B', async (t) => {
  const sinkA = await startSink(() => undefined); // accepts, never answers
  const sinkB = await startSink((_req, res) => res.end('ok'));
  const pools = new OriginPools({ connectionsPerOrigin: 4 });
  const runner = new DeliveryRunner({
    pools,
    queue: { queuedMax: 1000, tenantInflightMax: 4, originInflightMax: 4 },
    secretsOf: () => [SECRET],
  });
  t.teardown(async () => {
    runner.close();
    await pools.destroy();
    await sinkA.close();
    await sinkB.close();
  });
  const reports = { A: [] as AttemptReport[], B: [] as AttemptReport[] };
  const a = job('a', 'tenant-a', `${sinkA.origin}/hook`, 0);
  const b = job('b', 'tenant-b', `${sinkB.origin}/hook`, 1);
  // A's 50 first and at a higher priority, then B's 20.
  for (let i = 0; i < 50; i++) runner.submit('g/1', request(a, i), (r) => reports.A.push(r));
  for (let i = 0; i < 20; i++) runner.submit('g/1', request(b, i), (r) => reports.B.push(r));
  await eventually(() => reports.B.length === 20, 20_000, 'all of B delivered');
  t.ok(
    reports.B.every((r) => r.outcome === 'success'),
    'every B delivery succeeded',
  );
  t.equal(sinkB.received.length, 20, 'B received each once');
  t.equal(reports.A.length, 0, 'none of A has ended');
  t.equal(sinkA.received.length, 4, 'A holds only its own share (4 in flight)');
  t.equal(runner.queuedCount, 46, "the rest of A waits in A's own lane");
});

t.test('requests are signed with every secret of the tenant (rotation)', async (t) => {
  const sink = await startSink((_req, res) => res.end('ok'));
  const pools = new OriginPools();
  const runner = new DeliveryRunner({
    pools,
    queue: { queuedMax: 10, tenantInflightMax: 4, originInflightMax: 4 },
    secretsOf: () => [SECRET, OLD_SECRET],
  });
  t.teardown(async () => {
    await pools.destroy();
    await sink.close();
  });
  const done: AttemptReport[] = [];
  runner.submit('g/1', request(job('j', 'acme', `${sink.origin}/h`), 1), (r) => done.push(r));
  await eventually(() => done.length === 1, 10_000, 'delivered');
  const got = sink.received[0]!;
  for (const key of [SECRET, OLD_SECRET]) {
    const ok = verifyWebhook(got.headers, got.body, compileSigningKeys([key]), {
      nowMs: Date.now(),
    });
    t.ok(ok.ok, 'a receiver holding either secret verifies it');
  }
  t.equal(String(got.headers['webhook-signature']).split(' ').length, 2, 'two v1 signatures');
});

t.test('back-pressure, lapsed leadership and unknown tenants never send', async (t) => {
  const sink = await startSink(() => undefined);
  const pools = new OriginPools({ connectionsPerOrigin: 1 });
  let mayStart = true;
  const runner = new DeliveryRunner({
    pools,
    queue: { queuedMax: 2, tenantInflightMax: 1, originInflightMax: 1 },
    secretsOf: (tenant) => (tenant === 'acme' ? [SECRET] : undefined),
    mayStart: () => mayStart,
  });
  t.teardown(async () => {
    runner.close();
    await pools.destroy();
    await sink.close();
  });
  const reports: AttemptReport[] = [];
  const j = job('j', 'acme', `${sink.origin}/h`);
  for (let i = 0; i < 4; i++) runner.submit('g/1', request(j, i), (r) => reports.push(r));
  // Attempts start on the next turn: the queue holds two, the other two are refused at once.
  t.equal(reports.length, 2, 'the two beyond the queue are refused at once');
  t.ok(
    reports.every((r) => r.code === 'DELIVERY_QUEUE_FULL' && r.outcome === 'retry'),
    'as retries (back-pressure)',
  );
  t.ok(
    reports.every((r) => r.isProvablyUndelivered),
    'that provably never left',
  );
  await eventually(() => sink.received.length === 1, 10_000, 'first request sent');
  mayStart = false;
  // Free the origin: the queued ones may no longer start (their leadership lapsed).
  runner.close();
  const late: AttemptReport[] = [];
  mayStart = false;
  const pools2 = new OriginPools();
  const runner2 = new DeliveryRunner({
    pools: pools2,
    queue: { queuedMax: 10, tenantInflightMax: 4, originInflightMax: 4 },
    secretsOf: (tenant) => (tenant === 'acme' ? [SECRET] : undefined),
    mayStart: () => mayStart,
  });
  t.teardown(() => pools2.destroy());
  runner2.submit('g/1', request(j, 9), (r) => late.push(r));
  runner2.submit('g/1', request(job('x', 'nobody', `${sink.origin}/h`), 9), (r) => late.push(r));
  await eventually(() => late.length === 2, 10_000, 'both reported');
  t.equal(late[0]?.code, 'DELIVERY_NOT_STARTED', 'lapsed leadership: not started');
  mayStart = true;
  const unknown: AttemptReport[] = [];
  runner2.submit('g/1', request(job('y', 'nobody', `${sink.origin}/h`), 10), (r) =>
    unknown.push(r),
  );
  await eventually(() => unknown.length === 1, 10_000, 'reported');
  t.equal(unknown[0]?.code, 'DELIVERY_TENANT_UNKNOWN');
  t.equal(unknown[0]?.outcome, 'fail');
  t.equal(sink.received.length, 1, 'nothing but the first request was ever sent');
});
