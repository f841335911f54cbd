// Fairness between tenants over real HTTP. Goal: tenant A's endpoint that accepts connections
// and never answers, with many deliveries queued (at a higher priority than B's), does not delay
// tenant B: all of B's deliveries complete while every one of A's is still stuck. Method: two
// node:http receivers on 127.0.0.1 (A's hangs, B's answers 200), a small dispatcher loop in this
// file that feeds FairQueue → deliverWebhook → done(), and count-based assertions only (the one
// time bound is a generous deadline for B to finish). A control run with a plain FIFO and the
// same total concurrency shows the scenario is a real test: there, B's deliveries never start.
import { setMaxListeners } from 'node:events';
import t from 'tap';
import { FairQueue } from '../../../src/delivery/fair-queue.js';
import { OriginPools } from '../../../src/delivery/origin-pools.js';
import { compileSigningKeys } from '../../../src/delivery/signing.js';
import {
  deliverWebhook,
  originOf,
  type AttemptReport,
  type WebhookAttempt,
} from '../../../src/delivery/webhook.js';
import { eventually, LOOPBACK_ALLOWED, startSink } from './http-sink.js';

const signing = compileSigningKeys([`whsec_${Buffer.alloc(32, 1).toString('base64')}`]);
const A_COUNT = 50;
const B_COUNT = 20;
const CAP = 4;

interface Delivery {
  readonly tenant: string;
  readonly origin: string;
  readonly priority: number;
  readonly attempt: WebhookAttempt;
}

function delivery(tenant: string, url: string, priority: number, i: number): Delivery {
  const slotMs = 1_700_000_000_000 + i * 1000;
  return {
    tenant,
    origin: originOf(url) ?? '',
    priority,
    attempt: {
      job: {
        id: `${tenant}/job`,
        tenant,
        target: { url, headers: {} },
        payload: `{"i":${i}}`,
        // Far beyond the test: A's requests stay stuck until the test aborts them.
        attemptDeadlineMs: 120_000,
      },
      fireId: `${tenant}/job:${slotMs}`,
      slotMs,
      attempt: 1,
      token: 1,
      signing,
      nowMs: slotMs,
    },
  };
}

t.test('a hanging endpoint of tenant A does not delay tenant B', async (t) => {
  const sinkA = await startSink(() => undefined); // accepts, reads, never answers
  const sinkB = await startSink((_req, res) => res.end('ok'));
  const pools = new OriginPools({ connectionsPerOrigin: CAP, targetPolicy: LOOPBACK_ALLOWED });
  const stop = new AbortController();
  setMaxListeners(0, stop.signal);
  t.teardown(async () => {
    stop.abort();
    await pools.destroy();
    await sinkA.close();
    await sinkB.close();
  });

  const queue = new FairQueue<Delivery>({
    queuedMax: 1000,
    tenantQueuedMax: 500,
    tenantInflightMax: CAP,
    originInflightMax: CAP,
  });
  const reports = new Map<string, AttemptReport[]>([
    ['A', []],
    ['B', []],
  ]);
  const running: Promise<void>[] = [];
  // The dispatcher loop: start whatever the queue allows; each ending frees capacity and pumps.
  const pump = (): void => {
    for (let d = queue.take(); d !== undefined; d = queue.take()) {
      const item = d;
      running.push(
        deliverWebhook(item.attempt, { pools, signal: stop.signal }).then((report) => {
          reports.get(item.tenant)?.push(report);
          queue.done(item);
          pump();
        }),
      );
    }
  };

  // A's deliveries are queued first and at P0; B's after them at P1.
  for (let i = 0; i < A_COUNT; i++) {
    t.equal(queue.push(delivery('A', `${sinkA.origin}/hook`, 0, i)), 'queued');
  }
  for (let i = 0; i < B_COUNT; i++) {
    t.equal(queue.push(delivery('B', `${sinkB.origin}/hook`, 1, i)), 'queued');
  }
  pump();

  await eventually(() => reports.get('B')?.length === B_COUNT, 20_000, 'all of B delivered');
  await eventually(() => sinkA.received.length === CAP, 20_000, 'A’s stuck requests arrived');

  const b = reports.get('B') ?? [];
  t.equal(b.length, B_COUNT, 'every B delivery completed');
  t.ok(
    b.every((r) => r.outcome === 'success' && r.statusCode === 200),
    'and every one succeeded',
  );
  t.equal(sinkB.received.length, B_COUNT, 'B’s receiver saw each delivery once');
  t.equal(reports.get('A')?.length, 0, 'none of A’s deliveries has ended');
  t.strictSame(queue.tenantCounts('A'), { queuedCount: A_COUNT - CAP, inflightCount: CAP });
  t.equal(sinkA.received.length, CAP, 'A holds only its own share of connections');
  t.equal(queue.tenantCounts('B').inflightCount, 0);

  // Shutdown: the stuck attempts end as aborted retries, and the rest are never sent.
  stop.abort();
  await eventually(() => reports.get('A')?.length === A_COUNT, 20_000, 'A drained by abort');
  await Promise.all(running);
  const a = reports.get('A') ?? [];
  t.ok(
    a.every((r) => r.outcome === 'retry' && r.code === 'DELIVERY_ABORTED'),
    'A ends in retries',
  );
  t.equal(a.filter((r) => !r.isProvablyUndelivered).length, CAP, 'only the stuck ones were sent');
  t.equal(sinkA.received.length, CAP);
  t.equal(queue.inflightCount + queue.queuedCount, 0);
});

t.test('control: a plain FIFO with the same total concurrency lets A starve B', async (t) => {
  const sinkA = await startSink(() => undefined);
  const sinkB = await startSink((_req, res) => res.end('ok'));
  const pools = new OriginPools({ connectionsPerOrigin: CAP, targetPolicy: LOOPBACK_ALLOWED });
  const stop = new AbortController();
  setMaxListeners(0, stop.signal);
  t.teardown(async () => {
    stop.abort();
    await pools.destroy();
    await sinkA.close();
    await sinkB.close();
  });
  const fifo: Delivery[] = [];
  for (let i = 0; i < A_COUNT; i++) fifo.push(delivery('A', `${sinkA.origin}/hook`, 0, i));
  for (let i = 0; i < B_COUNT; i++) fifo.push(delivery('B', `${sinkB.origin}/hook`, 1, i));
  const started: string[] = [];
  const running: Promise<AttemptReport>[] = [];
  let inflight = 0;
  const pump = (): void => {
    while (inflight < CAP && fifo.length > 0) {
      const d = fifo.shift() as Delivery;
      inflight++;
      started.push(d.tenant);
      running.push(
        deliverWebhook(d.attempt, { pools, signal: stop.signal }).finally(() => {
          inflight--;
          pump();
        }),
      );
    }
  };
  pump();
  await eventually(() => sinkA.received.length === CAP, 20_000, 'A’s requests arrived');
  // Every slot is held by A and none of A's requests can end: B cannot start, by construction.
  t.strictSame(started, ['A', 'A', 'A', 'A']);
  t.equal(sinkB.received.length, 0, 'B starved');
  stop.abort();
  await eventually(() => inflight === 0 && fifo.length === 0, 20_000, 'the FIFO drained');
  await Promise.all(running);
});
