// The DeliveryRunner that `tickraft serve` uses, over real HTTP on 127.0.0.1: fairness between
// tenants (a hanging endpoint of one tenant does not delay another's fires), back-pressure when
// the queue is full, an attempt whose leadership lapsed while queued is never sent, an unknown
// tenant fails without a request, and every request is signed with the tenant's secrets.
import t from 'tap';
import {
  DeliveryRunner,
  type DeliveryRequest,
  type StartVerdict,
} from '../../../src/delivery/delivery-runner.js';
import { OriginPools } from '../../../src/delivery/origin-pools.js';
import { compileSigningKeys, verifyWebhook } from '../../../src/delivery/signing.js';
import type { AttemptReport } from '../../../src/delivery/webhook.js';
import type { Job } from '../../../src/scheduler/model.js';
import { spec } from '../scheduler/fixtures.js';
import { eventually, LOOPBACK_ALLOWED, startSink } from './http-sink.js';

const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
const OLD_SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;

function job(id: string, tenant: string, url: string, priority = 1): Job {
  return {
    ...spec({ tenant, target: { url, headers: {} }, priority, attemptDeadlineMs: 120_000 }),
    id: `${tenant}/${id}`, // the job's key; the body names it `id`
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
  const pools = new OriginPools({ connectionsPerOrigin: 4, targetPolicy: LOOPBACK_ALLOWED });
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
  t.equal(runner.waitingCount, 46, 'waiting to be sent: the queued ones (A has its 4 sockets)');
});

t.test('tenant weights share one connection to a shared origin 3 : 1', async (t) => {
  const sink = await startSink((_req, res) => res.end('ok'));
  const pools = new OriginPools({ connectionsPerOrigin: 1, targetPolicy: LOOPBACK_ALLOWED });
  const runner = new DeliveryRunner({
    pools,
    queue: { queuedMax: 1000, tenantInflightMax: 100, originInflightMax: 1 },
    secretsOf: () => [SECRET],
    weightOf: (tenant) => (tenant === 'heavy' ? 3 : 1),
  });
  t.teardown(async () => {
    runner.close();
    await pools.destroy();
    await sink.close();
  });
  const heavy = job('h', 'heavy', `${sink.origin}/hook`);
  const light = job('l', 'light', `${sink.origin}/hook`);
  let reports = 0;
  for (let i = 0; i < 20; i++) {
    runner.submit('g/1', request(light, i), () => reports++);
    runner.submit('g/1', request(heavy, i), () => reports++);
  }
  await eventually(() => reports === 40, 10_000, 'all 40 delivered');
  const first16 = sink.received.slice(0, 16).map((r) => JSON.parse(r.body) as { jobId: string });
  const heavyCount = first16.filter((b) => b.jobId === 'h').length;
  t.equal(heavyCount, 12, 'the first 16 requests: 12 of weight 3, 4 of weight 1');
});

t.test('requests are signed with every secret of the tenant (rotation)', async (t) => {
  const sink = await startSink((_req, res) => res.end('ok'));
  const pools = new OriginPools({ targetPolicy: LOOPBACK_ALLOWED });
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
  const hang = await startSink(() => undefined);
  const ok = await startSink((_req, res) => res.end('ok'));
  const pools = new OriginPools({ connectionsPerOrigin: 1, targetPolicy: LOOPBACK_ALLOWED });
  let verdict: StartVerdict = 'start';
  const runner = new DeliveryRunner({
    pools,
    queue: { queuedMax: 2, tenantInflightMax: 4, originInflightMax: 1 },
    secretsOf: (tenant) => (tenant === 'acme' ? [SECRET] : undefined),
    mayStart: () => verdict,
  });
  t.teardown(async () => {
    runner.close();
    await pools.destroy();
    await hang.close();
    await ok.close();
  });
  const reports: AttemptReport[] = [];
  const j = job('j', 'acme', `${hang.origin}/h`);
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
  await eventually(() => hang.received.length === 1, 10_000, 'first request sent (it hangs)');

  // The lease is momentarily not fresh: an attempt waits, keeps its place, and goes once it is.
  const fine = job('k', 'acme', `${ok.origin}/h`);
  const waited: AttemptReport[] = [];
  verdict = 'wait';
  runner.submit('g/1', request(fine, 20), (r) => waited.push(r));
  await new Promise((r) => setTimeout(r, 50));
  t.equal(ok.received.length, 0, 'nothing sent while told to wait');
  t.equal(waited.length, 0, 'and nothing reported');
  verdict = 'start';
  await eventually(() => waited.length === 1, 10_000, 'sent once allowed');
  t.equal(waited[0]?.outcome, 'success');

  // The leadership ended while it waited: reported as never started, nothing sent.
  verdict = 'drop';
  const dropped: AttemptReport[] = [];
  runner.submit('g/1', request(fine, 21), (r) => dropped.push(r));
  await eventually(() => dropped.length === 1, 10_000, 'reported');
  t.equal(dropped[0]?.code, 'DELIVERY_NOT_STARTED', 'lapsed leadership: not started');
  t.ok(dropped[0]?.isProvablyUndelivered);

  // An owner whose term ended drops its waiting attempts without sending them.
  verdict = 'wait';
  const forgotten: AttemptReport[] = [];
  runner.submit('g/2', request(fine, 22), (r) => forgotten.push(r));
  await new Promise((r) => setTimeout(r, 20));
  t.equal(runner.dropQueued('g/2'), 1, 'the waiting attempt is dropped with its owner');
  verdict = 'start';
  await new Promise((r) => setTimeout(r, 30));
  t.equal(forgotten.length, 0, 'never reported: its term is over');

  const unknown: AttemptReport[] = [];
  runner.submit('g/1', request(job('y', 'nobody', `${ok.origin}/h`), 10), (r) => unknown.push(r));
  await eventually(() => unknown.length === 1, 10_000, 'reported');
  t.equal(unknown[0]?.code, 'DELIVERY_TENANT_UNKNOWN');
  t.equal(unknown[0]?.outcome, 'fail');
  t.equal(ok.received.length, 1, 'only the allowed attempt reached the good receiver');
  t.equal(hang.received.length, 1, 'and only the first reached the hanging one');
});

t.test(
  "per tenant, for the metrics: queued, in flight, and the oldest queued one's age",
  async (t) => {
    const hang = await startSink(() => undefined);
    const pools = new OriginPools({ connectionsPerOrigin: 1, targetPolicy: LOOPBACK_ALLOWED });
    let monotonicMs = 1000;
    const runner = new DeliveryRunner({
      pools,
      queue: { queuedMax: 100, tenantInflightMax: 4, originInflightMax: 1 },
      secretsOf: () => [SECRET],
      clock: { nowMs: () => Date.now(), monotonicMs: () => monotonicMs },
    });
    t.teardown(async () => {
      runner.close();
      await pools.destroy();
      await hang.close();
    });
    const a = job('a', 'acme', `${hang.origin}/h`);
    const g = job('g', 'globex', `${hang.origin}/h`);
    runner.submit('g/1', request(a, 0), () => undefined);
    monotonicMs = 2000;
    runner.submit('g/1', request(a, 1), () => undefined);
    runner.submit('g/2', request(g, 2), () => undefined);
    monotonicMs = 3000;
    runner.submit('g/1', request(a, 3), () => undefined);
    await eventually(() => hang.received.length === 1, 10_000, 'the first one is sent (it hangs)');
    t.same(runner.tenantCounts('acme'), { queuedCount: 2, inflightCount: 1 });
    t.same(runner.tenantCounts('globex'), { queuedCount: 1, inflightCount: 0 });
    monotonicMs = 5000;
    t.same(
      [...runner.oldestQueuedAgeMs()],
      [
        ['acme', 3000],
        ['globex', 3000],
      ],
      'acme: the second, queued at 2000 (the first is in flight)',
    );
    runner.dropQueued('g/2');
    t.same([...runner.oldestQueuedAgeMs()], [['acme', 3000]], "globex's dropped with its owner");
    runner.close();
    t.same([...runner.oldestQueuedAgeMs()], [], 'nothing after close');
  },
);

t.test('a request rendered ahead is sent as rendered, and only while it still fits', async (t) => {
  const sink = await startSink((_req, res) => res.end('ok'));
  const pools = new OriginPools({ connectionsPerOrigin: 2, targetPolicy: LOOPBACK_ALLOWED });
  let secrets = [SECRET];
  let wallMs = 1_800_000_000_000;
  const runner = new DeliveryRunner({
    pools,
    queue: { queuedMax: 100, tenantInflightMax: 4, originInflightMax: 4 },
    secretsOf: () => secrets,
    clock: { nowMs: () => wallMs, monotonicMs: () => performance.now() },
  });
  t.teardown(async () => {
    runner.close();
    await pools.destroy();
    await sink.close();
  });
  const j = job('j', 'acme', `${sink.origin}/hook`);
  const slotMs = wallMs + 1_500;
  const at = (i: number, token: number): DeliveryRequest => {
    const s = slotMs + i * 60_000;
    return { job: j, fireId: `${j.id}:${s}`, slotMs: s, attempt: 1, token };
  };
  const rendered = [at(0, 100), at(1, 101), at(2, 102), at(3, 103)];
  for (const r of rendered) t.ok(runner.prerender(r), `rendered ${r.fireId}`);
  t.notOk(runner.prerender(rendered[0]!), 'the same attempt is not rendered twice');
  t.equal(runner.renderedCount, 4);

  const reports: AttemptReport[] = [];
  const send = async (r: DeliveryRequest): Promise<void> => {
    const before = sink.received.length;
    runner.submit('g/1', r, (rep) => reports.push(rep));
    await eventually(() => sink.received.length > before, 5000, `${r.fireId} received`);
  };
  wallMs = slotMs + 40; // the slot came
  await send(rendered[0]!);
  wallMs += 10;
  await send({ ...rendered[1]!, token: 999 }); // another token than foreseen
  secrets = [OLD_SECRET, SECRET]; // a rotation began after the render
  await send(rendered[2]!);
  secrets = [SECRET];
  wallMs += 31_000; // past RENDERED_MAX_AGE_MS
  await send(rendered[3]!);
  await eventually(() => reports.length === 4, 5000, 'four reports');
  t.equal(runner.stats.prerendered, 4);
  t.equal(runner.stats.sentPrerendered, 1, 'only the first still fitted');
  t.equal(runner.renderedCount, 0, 'every rendered request is forgotten once its attempt went');

  const [first, second, third, fourth] = sink.received;
  const keys = compileSigningKeys([SECRET]);
  const verify = (r: typeof first, nowMs: number): boolean =>
    r !== undefined && verifyWebhook(r.headers, r.body, keys, { nowMs }).ok;
  t.equal(
    first?.headers['webhook-timestamp'],
    String(Math.floor(slotMs / 1000)),
    'a request rendered before its slot carries the slot second as its timestamp',
  );
  t.ok(verify(first, wallMs), 'and its signature verifies');
  t.equal(
    (JSON.parse(second?.body ?? '{}') as { fencingToken?: number }).fencingToken,
    999,
    'another token: rendered again',
  );
  t.ok(verify(second, wallMs), 'and signed');
  t.equal(
    String(third?.headers['webhook-signature']).split(' ').length,
    2,
    'secrets rotated since the render: signed again with both',
  );
  t.equal(
    fourth?.headers['webhook-timestamp'],
    String(Math.floor(wallMs / 1000)),
    'too old to send: rendered again with the time of the send',
  );
  t.ok(reports.every((r) => r.outcome === 'success'));

  // A run that never goes (cancelled, or the leadership ended): its render is dropped once old.
  t.ok(runner.prerender(at(4, 104)));
  runner.sweepRendered();
  t.equal(runner.renderedCount, 1, 'kept while it may still be sent');
  wallMs = slotMs + 4 * 60_000 + 31_000;
  runner.sweepRendered();
  t.equal(runner.renderedCount, 0, 'dropped once too old to be sent');
});
