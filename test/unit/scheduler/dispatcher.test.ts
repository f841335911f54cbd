import t, { type Test } from 'tap';
import type { SchedulerCommand } from '../../../src/scheduler/commands.js';
import {
  GroupDispatcher,
  termOfToken,
  type DeliveryOrder,
  type DispatchStep,
  type ProposalFate,
} from '../../../src/scheduler/dispatcher.js';
import type { JobSpec } from '../../../src/scheduler/model.js';
import { SchedulerStateMachine } from '../../../src/scheduler/state-machine.js';
import { viewStatus } from '../../../src/scheduler/run-view.js';
import { answerUpstream, latestSlotAtOrBefore } from '../../../src/scheduler/upstream.js';
import { parseSchedule } from '../../../src/schedule/parse.js';
import { MIN, T0, spec } from './fixtures.js';

/** One replica whose proposals commit at once (or not, as a test says). */
class Harness {
  readonly sm = new SchedulerStateMachine();
  d: GroupDispatcher;
  term = 1;
  leader = true;
  lease = true;
  /** What proposals become; 'committed' applies them. */
  fate: ProposalFate = 'committed';
  readonly proposed: SchedulerCommand[] = [];
  readonly delivered: DeliveryOrder[] = [];
  /** The runtime's ResultRelease: deliveries wait to be sent; results per step. */
  holdResults = false;
  resultMax = Number.POSITIVE_INFINITY;

  constructor(
    private readonly extra: {
      resultHoldMs?: number;
      resultsPerEntry?: number;
      heldResultsMax?: number;
    } = {},
  ) {
    this.d = this.newDispatcher();
  }

  newDispatcher(): GroupDispatcher {
    return new GroupDispatcher(this.sm, {
      ...this.extra,
      startMs: T0,
      lookAheadMs: 3000,
      misfireThresholdMs: 5000,
      retryAt: (job, attempt, _slot, now) =>
        attempt >= job.retry.maxAttempts ? undefined : now + 1000 * attempt,
    });
  }

  apply(c: SchedulerCommand): void {
    this.sm.applyCommand(c);
    this.d.afterApply();
  }

  create(jobId: string, nextFireAtMs: number, over: Partial<JobSpec> = {}): void {
    this.apply({
      op: 'create-job',
      atMs: T0,
      jobId,
      spec: spec(over),
      nextFireAtMs,
      requestId: undefined,
    });
  }

  step(nowMs: number, maxDeliveries?: number): DispatchStep {
    const s = this.d.step(
      nowMs,
      this.leader ? { term: this.term, leaseValid: this.lease, caughtUp: true } : undefined,
      maxDeliveries,
      { hold: this.holdResults, max: this.resultMax },
    );
    for (const p of s.proposals) {
      this.proposed.push(p);
      if (this.fate === 'committed') this.apply(p);
      this.d.proposalSettled(p, this.fate, this.term);
    }
    this.delivered.push(...s.deliveries);
    // Upstreams live in this one group: read them from its applied state, as their leader would.
    for (const q of s.upstreamQueries)
      this.d.upstreamAnswered(
        q,
        q.jobs.map((job) => ({
          ...answerUpstream(this.sm, job, q.slotMs),
          job,
        })),
        nowMs,
      );
    return s;
  }

  succeed(o: DeliveryOrder, nowMs: number): void {
    this.d.attemptDone(
      o,
      { outcome: 'success', statusCode: 200, durationMs: 5, isProvablyUndelivered: false },
      nowMs,
    );
  }

  ops(): string[] {
    return this.proposed.map((p) => p.op);
  }
}

const SLOT = T0 + MIN; // '* * * * *' fires at every whole minute

t.test('at-least-once: intent ahead of the slot, delivery at the slot, result committed', (t) => {
  const h = new Harness();
  h.create('j1', SLOT);
  t.same(h.step(SLOT - 10_000).proposals, [], 'nothing before the look-ahead');
  h.step(SLOT - 2_000);
  t.same(h.ops(), ['fire-intents'], 'intent proposed inside the look-ahead');
  const run = h.sm.runs.get(`j1:${SLOT}`);
  t.equal(run?.status, 'SCHEDULED');
  t.equal(h.sm.jobs.get('j1')?.nextFireAtMs, SLOT + MIN, 'leader computed the next slot');
  t.same(h.step(SLOT - 1).deliveries, [], 'not before the slot');
  const s = h.step(SLOT + 3);
  t.equal(s.deliveries.length, 1, 'delivered at the slot');
  const o = s.deliveries[0]!;
  t.equal(o.fireId, `j1:${SLOT}`);
  t.equal(o.attempt, 1);
  t.equal(termOfToken(o.token), 1, 'token from this term');
  t.same(h.step(SLOT + 10).deliveries, [], 'not delivered twice while in flight');
  h.succeed(o, SLOT + 20);
  h.step(SLOT + 20);
  t.equal(h.sm.runs.get(o.fireId)?.status, 'SUCCEEDED');
  t.equal(h.sm.jobs.get('j1')?.lastToken, o.token, 'the result records the token');
  t.equal(h.d.inFlightCount, 0);
  t.end();
});

t.test('at-most-once: attempt-started commits before the send', (t) => {
  const h = new Harness();
  h.create('j1', SLOT, { delivery: 'at_most_once' });
  h.step(SLOT - 2_000);
  h.fate = 'unknown'; // the start entry does not apply yet
  const s = h.step(SLOT);
  t.same(s.deliveries, [], 'no send before attempt-started applies');
  t.equal(h.ops().at(-1), 'attempt-started');
  h.fate = 'committed';
  h.apply(h.proposed.at(-1)!);
  const s2 = h.step(SLOT + 1);
  t.equal(s2.deliveries.length, 1, 'sent once the start applied');
  t.equal(s2.deliveries[0]!.token, h.sm.runs.get(`j1:${SLOT}`)!.attempts[0]!.token);
  t.equal(h.sm.runs.get(`j1:${SLOT}`)?.status, 'DISPATCHED');
  // A 503 after a possible delivery is not retried at most once.
  h.d.attemptDone(
    s2.deliveries[0]!,
    { outcome: 'retry', statusCode: 503, durationMs: 3, isProvablyUndelivered: false },
    SLOT + 5,
  );
  h.step(SLOT + 5);
  const run = h.sm.runs.get(`j1:${SLOT}`)!;
  t.equal(run.status, 'DEAD');
  t.match(run.reason, /non-retryable/);
  t.end();
});

t.test('at-most-once: a connection refused (provably undelivered) is retried', (t) => {
  const h = new Harness();
  h.create('j1', SLOT, { delivery: 'at_most_once' });
  h.step(SLOT - 2_000);
  h.step(SLOT);
  const o = h.step(SLOT + 1).deliveries[0]!;
  h.d.attemptDone(
    o,
    { outcome: 'retry', durationMs: 1, error: 'ECONNREFUSED', isProvablyUndelivered: true },
    SLOT + 2,
  );
  h.step(SLOT + 2);
  const run = h.sm.runs.get(o.fireId)!;
  t.equal(run.status, 'SCHEDULED');
  t.equal(run.dueAtMs, SLOT + 2 + 1000);
  h.step(SLOT + 1500);
  t.equal(h.delivered.length, 1, 'not before the retry time');
  h.step(SLOT + 3002);
  h.step(SLOT + 3003);
  t.equal(h.delivered.length, 2, 'retried');
  t.equal(h.delivered[1]!.attempt, 2);
  t.ok(h.delivered[1]!.token > o.token, 'higher token');
  t.end();
});

t.test('retries go back into the wheel; exhausted runs go to the DLQ', (t) => {
  const h = new Harness();
  h.create('j1', SLOT, { retry: { ...spec().retry, maxAttempts: 2 } });
  h.step(SLOT - 2_000);
  let now = SLOT;
  for (let i = 0; i < 2; i++) {
    h.step(now);
    const o = h.delivered.at(-1)!;
    t.equal(o.attempt, i + 1);
    h.d.attemptDone(
      o,
      { outcome: 'retry', statusCode: 500, durationMs: 2, isProvablyUndelivered: false },
      now + 2,
    );
    h.step(now + 2);
    now += 2 + 1000 * (i + 1);
  }
  const run = h.sm.runs.get(`j1:${SLOT}`)!;
  t.equal(run.status, 'DEAD');
  t.ok(h.sm.dead.has(run.fireId), 'in the DLQ');
  t.equal(run.attempts.length, 2);
  t.end();
});

t.test('a pause committed before the slot wins: no delivery, the slot is recorded', (t) => {
  const h = new Harness();
  h.create('j1', SLOT);
  h.step(SLOT - 2_000);
  h.apply({ op: 'pause-job', atMs: SLOT - 1000, jobId: 'j1' });
  h.step(SLOT + 1);
  t.equal(h.delivered.length, 0);
  t.equal(h.sm.runs.get(`j1:${SLOT}`)?.status, 'SKIPPED');
  // Next slot, still paused: planned as SKIPPED ('paused'), never delivered.
  h.step(SLOT + MIN - 2000);
  h.step(SLOT + MIN + 1);
  t.equal(h.delivered.length, 0);
  t.equal(h.sm.runs.get(`j1:${SLOT + MIN}`)?.reason, 'paused');
  t.end();
});

t.test('a delete committed before the slot wins', (t) => {
  const h = new Harness();
  h.create('j1', SLOT);
  h.step(SLOT - 2_000);
  h.apply({ op: 'delete-job', atMs: SLOT - 1000, jobId: 'j1' });
  h.step(SLOT + 1);
  t.equal(h.delivered.length, 0);
  t.equal(h.sm.runs.get(`j1:${SLOT}`)?.status, 'CANCELLED');
  t.end();
});

t.test(
  'an order waiting in the delivery queue may not be sent after a bulk pause or delete',
  (t) => {
    const h = new Harness();
    h.create('j1', SLOT);
    h.create('j2', SLOT);
    h.create('b1', SLOT, { tenant: 'beta' });
    h.step(SLOT - 2_000);
    h.step(SLOT + 1);
    const byJob = new Map(h.delivered.map((o) => [o.jobId, o]));
    t.equal(byJob.size, 3, 'three orders handed to delivery');
    t.ok(
      [...byJob.values()].every((o) => h.d.maySend(o)),
      'each may be sent while nothing changed',
    );
    h.apply({ op: 'tenant-jobs', atMs: SLOT + 2, tenant: 'acme', action: 'pause', resumes: [] });
    t.notOk(h.d.maySend(byJob.get('j1')!), "the paused tenant's order is refused at the send");
    t.ok(h.d.maySend(byJob.get('b1')!), "another tenant's order still goes");
    h.apply({ op: 'tenant-jobs', atMs: SLOT + 3, tenant: 'beta', action: 'delete', resumes: [] });
    t.notOk(h.d.maySend(byJob.get('b1')!), 'a deleted job’s order is refused too');
    t.end();
  },
);

t.test('no delivery without the lease; it goes out when the lease is back', (t) => {
  const h = new Harness();
  h.create('j1', SLOT);
  h.step(SLOT - 2_000);
  h.lease = false;
  h.step(SLOT + 1);
  t.equal(h.delivered.length, 0);
  h.lease = true;
  h.step(SLOT + 50);
  t.equal(h.delivered.length, 1);
  t.end();
});

t.test('at-most-once: a start that applied while the lease lapsed waits for the lease', (t) => {
  const h = new Harness();
  h.create('j1', SLOT, { delivery: 'at_most_once' });
  h.step(SLOT - 2_000);
  h.fate = 'unknown'; // the start is proposed now and applies a moment later
  h.step(SLOT);
  t.equal(h.ops().at(-1), 'attempt-started');
  h.fate = 'committed';
  h.apply(h.proposed.at(-1)!);
  h.lease = false;
  t.same(h.step(SLOT + 1).deliveries, [], 'the committed start does not go out without the lease');
  t.same(h.step(SLOT + 2).deliveries, [], 'nor at the next step');
  h.lease = true;
  const s = h.step(SLOT + 3);
  t.equal(s.deliveries.length, 1, 'it goes out once the lease is back');
  t.equal(s.deliveries[0]!.fireId, `j1:${SLOT}`);
  t.end();
});

t.test('not caught up: a new leader does nothing until its term applied', (t) => {
  const h = new Harness();
  h.create('j1', SLOT);
  const s = h.d.step(SLOT, { term: 1, leaseValid: true, caughtUp: false });
  t.same(s, { proposals: [], deliveries: [], upstreamQueries: [] });
  t.end();
});

/** An at-most-once and an at-least-once job due at SLOT, both handed out by the term-1 leader. */
function bothSentInTerm1(t: Test, h: Harness): Harness {
  h.create('most', SLOT, { delivery: 'at_most_once' });
  h.create('least', SLOT);
  h.step(SLOT - 2_000);
  h.step(SLOT);
  h.step(SLOT + 1);
  t.equal(h.delivered.length, 2, 'both sent in term 1');
  return h;
}

t.test(
  'a new leader: at-most-once runs left DISPATCHED become UNKNOWN, at-least-once runs go out again with a higher token and the next attempt number',
  (t) => {
    const h = bothSentInTerm1(t, new Harness());
    const first = h.delivered.find((o) => o.jobId === 'least')!;
    t.equal(first.attempt, 1);
    // The leader dies with both attempts unreported. Another replica (same applied state) leads.
    h.term = 3;
    h.d = h.newDispatcher();
    h.proposed.length = 0;
    h.step(SLOT + 2_000);
    t.same(h.ops(), ['mark-unknown', 'lost-attempts']);
    t.equal(h.sm.runs.get(`most:${SLOT}`)?.status, 'UNKNOWN', 'never re-sent');
    t.equal(h.delivered.filter((o) => o.jobId === 'least').length, 1, 'nothing sent before');
    const lost = h.sm.runs.get(first.fireId)!.attempts;
    t.equal(lost.length, 1, 'term 1’s send is recorded as an attempt');
    t.equal(lost[0]!.attempt, 1);
    t.equal(lost[0]!.token, 0, 'no token known');
    t.equal(lost[0]!.outcome, undefined, 'its fate unknown');
    t.match(lost[0]!.error, /^LEADER_LOST/);
    h.step(SLOT + 2_001);
    const again = h.delivered.filter((o) => o.jobId === 'least');
    t.equal(again.length, 2, 'at-least-once re-delivered');
    t.equal(again[1]!.fireId, first.fireId, 'same fire id');
    t.equal(again[1]!.attempt, 2, 'as the next attempt');
    t.ok(again[1]!.token > first.token, 'higher token');
    t.equal(termOfToken(again[1]!.token), 3);
    t.equal(h.delivered.filter((o) => o.jobId === 'most').length, 1);
    // Its failure leaves one retry of the three: the lost attempt does not count.
    h.d.attemptDone(
      again[1]!,
      { outcome: 'retry', statusCode: 503, durationMs: 5, isProvablyUndelivered: false },
      SLOT + 2_010,
    );
    h.step(SLOT + 2_010);
    const run = h.sm.runs.get(first.fireId)!;
    t.equal(run.status, 'SCHEDULED', 'retried: one attempt made of three');
    t.same(
      run.attempts.map((a) => [a.attempt, a.outcome]),
      [
        [1, undefined],
        [2, 'retry'],
      ],
    );
    t.end();
  },
);

t.test('after a hand-over the new leader records no lost attempt: its predecessor drained', (t) => {
  const h = new Harness();
  h.create('least', SLOT);
  h.step(SLOT - 2_000);
  h.lease = false; // the old leader had stopped sending (drained) when its run came due
  h.step(SLOT + 1);
  t.equal(h.delivered.length, 0);
  h.term = 2;
  h.lease = true;
  h.d = h.newDispatcher();
  h.proposed.length = 0;
  const s = h.d.step(SLOT + 5, { term: 2, leaseValid: true, caughtUp: true, handedOver: true });
  t.same(s.proposals, [], 'nothing to record');
  t.equal(s.deliveries.length, 1, 'sent at the first step');
  t.equal(s.deliveries[0]!.attempt, 1, 'as attempt 1');
  t.same(h.sm.runs.get(`least:${SLOT}`)!.attempts, [], 'nothing recorded');
  t.end();
});

t.test('a result from an earlier term is discarded', (t) => {
  const h = new Harness();
  h.create('j1', SLOT);
  h.step(SLOT - 2_000);
  h.step(SLOT);
  const o = h.delivered[0]!;
  h.term = 2;
  h.step(SLOT + 10); // same replica, new term: re-delivers
  h.succeed(o, SLOT + 20);
  h.step(SLOT + 20);
  t.equal(h.sm.runs.get(o.fireId)?.status, 'SCHEDULED', 'stale result not proposed');
  h.succeed(h.delivered[1]!, SLOT + 30);
  h.step(SLOT + 30);
  t.equal(h.sm.runs.get(o.fireId)?.status, 'SUCCEEDED');
  t.end();
});

t.test('an intent that does not commit is planned again; a double commit is a no-op', (t) => {
  const h = new Harness();
  h.create('j1', SLOT);
  h.fate = 'dropped';
  h.step(SLOT - 2_000);
  t.notOk(h.sm.runs.has(`j1:${SLOT}`));
  h.fate = 'committed';
  h.step(SLOT - 1_900);
  t.equal(h.sm.runs.get(`j1:${SLOT}`)?.status, 'SCHEDULED');
  h.apply(h.proposed[0]!); // the "dropped" one commits after all
  t.equal(h.sm.jobs.get('j1')?.nextFireAtMs, SLOT + MIN, 'not advanced twice');
  t.equal(h.sm.runsOf('j1').length, 1);
  t.end();
});

t.test('leadership lost and regained: nothing popped is forgotten', (t) => {
  const h = new Harness();
  h.create('j1', SLOT);
  h.fate = 'unknown';
  h.step(SLOT - 2_000); // popped and proposed, fate unknown
  h.leader = false;
  h.step(SLOT - 1_500);
  h.leader = true;
  h.term = 2;
  h.fate = 'committed';
  h.step(SLOT - 1_000);
  t.equal(h.sm.runs.get(`j1:${SLOT}`)?.status, 'SCHEDULED', 'planned again by the new term');
  h.step(SLOT);
  t.equal(h.delivered.length, 1);
  t.end();
});

t.test('buffer_one holds the next slot while a run is in flight, then releases it', (t) => {
  const h = new Harness();
  h.create('j1', SLOT, { overlap: { policy: 'buffer_one', bufferCap: 0 } });
  h.step(SLOT - 2_000);
  h.step(SLOT);
  const first = h.delivered[0]!;
  h.step(SLOT + MIN - 2_000);
  h.step(SLOT + MIN + 1);
  t.equal(h.delivered.length, 1, 'second slot held while the first is in flight');
  t.equal(h.sm.runs.get(`j1:${SLOT + MIN}`)?.status, 'SCHEDULED');
  // A third slot: buffer_one already holds one, so it is skipped.
  h.step(SLOT + 2 * MIN - 2_000);
  t.equal(h.sm.runs.get(`j1:${SLOT + 2 * MIN}`)?.status, 'SKIPPED');
  h.succeed(first, SLOT + 2 * MIN);
  h.step(SLOT + 2 * MIN);
  h.step(SLOT + 2 * MIN + 1);
  t.equal(h.delivered.length, 2, 'released after the first finished');
  t.equal(h.delivered[1]!.slotMs, SLOT + MIN);
  t.end();
});

t.test('overlap skip: a slot due while a run is in flight is SKIPPED with a reason', (t) => {
  const h = new Harness();
  h.create('j1', SLOT, { overlap: { policy: 'skip', bufferCap: 0 } });
  h.step(SLOT - 2_000);
  h.step(SLOT);
  h.step(SLOT + MIN - 2_000);
  const run = h.sm.runs.get(`j1:${SLOT + MIN}`);
  t.equal(run?.status, 'SKIPPED');
  t.match(run?.reason, /run_in_flight/);
  t.end();
});

t.test(
  'maxConcurrency 2, skip: two runs in flight, the third slot SKIPPED (run_in_flight)',
  (t) => {
    const h = new Harness();
    h.create('j1', SLOT, { overlap: { policy: 'skip', bufferCap: 10, maxConcurrency: 2 } });
    for (const k of [0, 1]) {
      h.step(SLOT + k * MIN - 2_000);
      h.step(SLOT + k * MIN);
    }
    t.same(
      h.delivered.map((o) => o.slotMs),
      [SLOT, SLOT + MIN],
      'the second slot fires with one run in flight',
    );
    h.step(SLOT + 2 * MIN - 2_000);
    const third = h.sm.runs.get(`j1:${SLOT + 2 * MIN}`);
    t.equal(third?.status, 'SKIPPED', 'the third slot finds two in flight');
    t.equal(third?.reason, 'run_in_flight');
    h.succeed(h.delivered[0]!, SLOT + 2 * MIN + 10);
    h.step(SLOT + 2 * MIN + 10);
    h.step(SLOT + 3 * MIN - 2_000);
    h.step(SLOT + 3 * MIN);
    t.equal(h.delivered.at(-1)?.slotMs, SLOT + 3 * MIN, 'one finished: the next slot fires');
    t.equal(h.delivered.length, 3);
    t.end();
  },
);

t.test('maxConcurrency 2, skip: slots planned together are checked again at hand-out', (t) => {
  // Every second, with a 3 s look-ahead: three slots are planned before the first one starts,
  // so planning saw nothing in flight. The hand-out holds the limit.
  const h = new Harness();
  const first = T0 + 10_000;
  h.create('j1', first, {
    schedule: '* * * * * *',
    overlap: { policy: 'skip', bufferCap: 10, maxConcurrency: 2 },
  });
  for (let ms = first - 3_000; ms < first; ms += 100) h.step(ms);
  const planned = h.sm.runsOf('j1').filter((r) => r.status === 'SCHEDULED');
  t.ok(planned.length >= 3, `${planned.length} slots planned ahead, none skipped at planning`);
  for (let ms = first; ms <= first + 2_000; ms += 100) h.step(ms);
  t.same(
    h.delivered.map((o) => o.slotMs),
    [first, first + 1_000],
    'two out, the third not',
  );
  const third = h.sm.runs.get(`j1:${first + 2_000}`);
  t.equal(third?.status, 'SKIPPED', 'recorded in the log, not just left behind');
  t.equal(third?.reason, 'run_in_flight');
  t.equal(h.ops().filter((op) => op === 'miss-runs').length, 1, 'one miss-runs entry');
  h.succeed(h.delivered[0]!, first + 2_500);
  for (let ms = first + 2_500; ms <= first + 3_000; ms += 100) h.step(ms);
  t.same(
    h.delivered.map((o) => o.slotMs),
    [first, first + 1_000, first + 3_000],
    'room again: the next slot goes',
  );
  t.end();
});

t.test('skip: a manual trigger goes even when the job is full, and counts', (t) => {
  const h = new Harness();
  h.create('j1', SLOT, { overlap: { policy: 'skip', bufferCap: 10 } });
  h.step(SLOT - 2_000);
  h.step(SLOT);
  t.equal(h.delivered.length, 1);
  h.apply({ op: 'trigger-job', atMs: SLOT + 1_000, jobId: 'j1', slotMs: SLOT + 1_000 });
  h.step(SLOT + 1_000);
  t.equal(h.delivered.length, 2, 'asked for by a caller: not skipped');
  t.equal(h.delivered[1]!.slotMs, SLOT + 1_000);
  h.succeed(h.delivered[0]!, SLOT + 2_000);
  h.step(SLOT + 2_000);
  h.step(SLOT + MIN - 2_000);
  t.equal(h.sm.runs.get(`j1:${SLOT + MIN}`)?.reason, 'run_in_flight', 'the manual run counts');
  t.end();
});

t.test('maxConcurrency 2, buffer_all: the third slot waits, released oldest first', (t) => {
  const h = new Harness();
  h.create('j1', SLOT, { overlap: { policy: 'buffer_all', bufferCap: 10, maxConcurrency: 2 } });
  for (const k of [0, 1, 2, 3]) {
    h.step(SLOT + k * MIN - 2_000);
    h.step(SLOT + k * MIN);
    h.step(SLOT + k * MIN + 1);
  }
  t.same(
    h.delivered.map((o) => o.slotMs),
    [SLOT, SLOT + MIN],
    'two in flight; the third and fourth slots wait',
  );
  for (const k of [2, 3]) t.equal(h.sm.runs.get(`j1:${SLOT + k * MIN}`)?.status, 'SCHEDULED');
  h.succeed(h.delivered[1]!, SLOT + 3 * MIN + 10);
  h.step(SLOT + 3 * MIN + 10);
  h.step(SLOT + 3 * MIN + 11);
  t.same(
    h.delivered.map((o) => o.slotMs),
    [SLOT, SLOT + MIN, SLOT + 2 * MIN],
    'one finished: the oldest waiting slot goes, the other still waits',
  );
  h.succeed(h.delivered[0]!, SLOT + 3 * MIN + 20);
  h.step(SLOT + 3 * MIN + 20);
  h.step(SLOT + 3 * MIN + 21);
  t.equal(h.delivered.at(-1)?.slotMs, SLOT + 3 * MIN, 'then the next one');
  t.equal(h.delivered.length, 4);
  t.ok(
    h.sm.runsOf('j1').every((r) => r.status !== 'SKIPPED'),
    'nothing skipped below the buffer cap',
  );
  t.end();
});

// An update touches every run of its job, so the held ones are looked at again under the new
// definition at once.
t.test('buffer_one: raising maxConcurrency releases a held run with none finishing', (t) => {
  const h = new Harness();
  h.create('j1', SLOT, { overlap: { policy: 'buffer_one', bufferCap: 10 } });
  h.step(SLOT - 2_000);
  h.step(SLOT);
  h.step(SLOT + MIN - 2_000);
  h.step(SLOT + MIN);
  t.equal(h.delivered.length, 1, 'default limit 1: the second slot waits');
  const job = h.sm.jobs.get('j1')!;
  h.apply({
    op: 'update-job',
    atMs: SLOT + MIN + 100,
    jobId: 'j1',
    spec: spec({ overlap: { policy: 'buffer_one', bufferCap: 10, maxConcurrency: 2 } }),
    nextFireAtMs: job.nextFireAtMs,
    expectedVersion: job.version,
  });
  h.step(SLOT + MIN + 200);
  t.same(
    h.delivered.map((o) => o.slotMs),
    [SLOT, SLOT + MIN],
    'room under the new limit: the held slot goes',
  );
  t.end();
});

t.test('misfire after an outage: fire_once coalesces, the rest are MISSED', (t) => {
  const h = new Harness();
  h.create('j1', SLOT, {
    misfire: { policy: 'fire_once', fireAllCap: 10, catchUpWindowMs: 3600_000 },
  });
  h.step(SLOT + 5 * MIN + 30_000); // down across five slots
  const runs = h.sm.runsOf('j1');
  t.equal(runs.filter((r) => r.status === 'MISSED').length, 5);
  t.equal(runs.filter((r) => r.status === 'SCHEDULED').length, 1);
  t.equal(h.delivered.length, 0);
  h.step(SLOT + 5 * MIN + 30_001);
  t.equal(h.delivered.length, 1, 'the coalesced slot fires at once');
  t.end();
});

t.test('drain: no new work starts; drained once in-flight results committed', (t) => {
  const h = new Harness();
  h.create('j1', SLOT);
  h.create('j2', SLOT + 30_000);
  h.step(SLOT - 2_000);
  h.step(SLOT);
  t.equal(h.delivered.length, 1);
  h.d.beginDrain();
  t.notOk(h.d.isDrained, 'one attempt in flight');
  h.step(SLOT + 30_000);
  t.equal(h.delivered.length, 1, 'nothing new while draining');
  h.succeed(h.delivered[0]!, SLOT + 30_001);
  h.step(SLOT + 30_001);
  t.ok(h.d.isDrained);
  t.equal(h.sm.runs.get(h.delivered[0]!.fireId)?.status, 'SUCCEEDED');
  h.d.endDrain();
  h.step(SLOT + 30_002);
  h.step(SLOT + 30_003);
  t.equal(h.delivered.length, 2, 'work resumes when the transfer is abandoned');
  t.end();
});

t.test('tokens strictly increase per job across concurrent runs (allow)', (t) => {
  const h = new Harness();
  h.create('j1', SLOT, { schedule: '* * * * * *' }); // every second
  let now = SLOT - 3_000;
  for (let i = 0; i < 20; i++, now += 1000) h.step(now);
  const tokens = h.delivered.map((o) => o.token);
  t.ok(tokens.length >= 15);
  for (let i = 1; i < tokens.length; i++) t.ok(tokens[i]! > tokens[i - 1]!, `token ${i} increases`);
  t.end();
});

t.test('at-most-once: a pause applied after the start but before the send wins', (t) => {
  // Found by the scheduler simulation (seed 129): the start applied, the client's pause was
  // acknowledged in the same batch, and the next step still sent the order.
  for (const stop of ['pause', 'delete'] as const) {
    const h = new Harness();
    h.create('j1', SLOT, { delivery: 'at_most_once' });
    h.step(SLOT - 2_000);
    h.fate = 'unknown';
    h.step(SLOT);
    const started = h.proposed.at(-1)!;
    t.equal(started.op, 'attempt-started');
    h.fate = 'committed';
    h.apply(started);
    h.apply(
      stop === 'pause'
        ? { op: 'pause-job', atMs: SLOT + 1, jobId: 'j1' }
        : { op: 'delete-job', atMs: SLOT + 1, jobId: 'j1' },
    );
    const s = h.step(SLOT + 2);
    t.same(s.deliveries, [], `${stop}: nothing sent after the acknowledged ${stop}`);
    t.equal(h.ops().at(-1), 'attempt-result', `${stop}: the unsent attempt is reported`);
    const run = h.sm.runs.get(`j1:${SLOT}`)!;
    t.equal(run.status, stop === 'pause' ? 'SKIPPED' : 'DEAD', `${stop}: run ended`);
    t.match(run.attempts[0]!.error, /not sent/);
    t.equal(h.d.inFlightCount, 0);
  }
  t.end();
});

t.test('runs planned before an outage go through the misfire policy when it ends', (t) => {
  const outage = (policy: 'skip' | 'fire_once' | 'fire_all'): Harness => {
    const h = new Harness();
    h.create('j1', SLOT, {
      schedule: '*/10 * * * * *',
      misfire: { policy, fireAllCap: 2, catchUpWindowMs: 3600_000 },
    });
    h.step(SLOT - 2_000); // intent for SLOT committed: the run exists, SCHEDULED
    t.equal(h.sm.runs.get(`j1:${SLOT}`)?.status, 'SCHEDULED');
    // Down from before SLOT until SLOT + 47 s: nobody steps. Then a few steps (apply between).
    h.step(SLOT + 47_000);
    h.step(SLOT + 47_001);
    h.step(SLOT + 47_002);
    return h;
  };
  const skip = outage('skip');
  t.equal(skip.delivered.length, 0, 'skip: nothing fires late');
  t.equal(skip.sm.runs.get(`j1:${SLOT}`)?.status, 'MISSED');
  t.equal(skip.sm.runs.get(`j1:${SLOT}`)?.reason, 'skip_policy');

  const once = outage('fire_once');
  t.equal(once.delivered.length, 1, 'fire_once: exactly one late fire');
  t.equal(once.delivered[0]!.slotMs, SLOT + 40_000, 'the newest slot');
  t.equal(once.sm.runs.get(`j1:${SLOT}`)?.reason, 'coalesced', 'the pre-planned one coalesced');

  const all = outage('fire_all');
  const fired = all.delivered.map((o) => o.slotMs).sort((a, b) => a - b);
  t.same(fired, [SLOT, SLOT + 30_000, SLOT + 40_000], 'fire_all: the planned one and the cap');
  t.equal(
    all.sm.runsOf('j1').filter((r) => r.status === 'MISSED' && r.reason === 'fire_all_cap').length,
    2,
  );
  t.end();
});

t.test('a spike handed out in chunks: every run goes out once, however long the hand-out', (t) => {
  const spike = (lapse: boolean): Harness => {
    const h = new Harness();
    for (let i = 0; i < 10; i++)
      h.create(`j${i}`, SLOT, {
        misfire: { policy: 'skip', fireAllCap: 1, catchUpWindowMs: 0 },
      });
    h.step(SLOT - 2_000);
    t.equal(h.sm.runs.size, 10, 'ten runs planned for the slot');
    t.equal(h.step(SLOT, 3).deliveries.length, 3, 'the first chunk at the slot');
    t.equal(h.d.dispatchBacklog, 7, 'the rest waits for the next steps');
    // The next chunks come after the misfire threshold (a slow hand-out, a loaded node).
    if (lapse) {
      h.lease = false;
      h.step(SLOT + 6_000, 3);
      h.lease = true;
    }
    for (let now = SLOT + 6_001; h.d.dispatchBacklog > 0 && now < SLOT + 6_100; now++)
      h.step(now, 3);
    return h;
  };
  const paced = spike(false);
  const fired = paced.delivered.map((o) => o.fireId).sort();
  t.equal(fired.length, 10, 'held back by the cap only: all ten delivered');
  t.equal(new Set(fired).size, 10, 'each once');
  t.equal(paced.sm.runsOf('j9').filter((r) => r.status === 'MISSED').length, 0, 'none MISSED');
  t.equal(paced.step(SLOT + 6_200, 3).deliveries.length, 0, 'nothing more to hand out');

  // A lapsed lease is an outage: what waited through it goes through the misfire policy.
  const lapsed = spike(true);
  t.equal(lapsed.delivered.length, 3, 'only the chunk handed out before the lapse');
  const missed = [...lapsed.sm.runs.values()].filter((r) => r.status === 'MISSED');
  t.equal(missed.length, 7, 'the runs that waited through the lapse are MISSED');
  t.ok(
    missed.every((r) => r.reason === 'outside_catch_up_window'),
    'with the reason the policy gives',
  );
  t.end();
});

// A change of a job (update, pause, resume) recomputes its next slot from now, and a delete
// ends it. Slots that were due and not yet planned (the leader was down) are first recorded by
// the job's rules through a settle intent proposed in the same batch (the API does this); none
// is left without a run.
t.test('overdue slots are settled before an update, a pause, a resume or a delete', (t) => {
  const statuses = (h: Harness, slots: number[]): (string | undefined)[] =>
    slots.map((s) => h.sm.runs.get(`j1:${s}`)?.status);
  const overdue = [SLOT, SLOT + MIN, SLOT + 2 * MIN];
  const now = SLOT + 2 * MIN + 30_000;

  // fire_all: every overdue slot fires, then the update takes effect from now.
  const a = new Harness();
  a.create('j1', SLOT, {
    misfire: { policy: 'fire_all', fireAllCap: 10, catchUpWindowMs: 3600_000 },
  });
  const settle = a.d.overdueIntent('j1', now);
  t.same(settle?.slots, overdue, 'the intent names every overdue slot');
  a.apply({ op: 'fire-intents', atMs: now, term: 1, intents: [settle!] });
  a.apply({
    op: 'update-job',
    atMs: now,
    jobId: 'j1',
    spec: spec({ name: 'renamed' }),
    nextFireAtMs: SLOT + 3 * MIN,
    expectedVersion: undefined,
  });
  t.same(statuses(a, overdue), ['SCHEDULED', 'SCHEDULED', 'SCHEDULED'], 'fire_all: all fire');
  t.equal(a.sm.jobs.get('j1')?.nextFireAtMs, SLOT + 3 * MIN, "the update's next slot");

  // fire_once: the newest fires, the others are MISSED with a reason; none is silent.
  const b = new Harness();
  b.create('j1', SLOT);
  b.apply({ op: 'fire-intents', atMs: now, term: 1, intents: [b.d.overdueIntent('j1', now)!] });
  b.apply({ op: 'pause-job', atMs: now, jobId: 'j1' });
  t.same(statuses(b, overdue), ['MISSED', 'MISSED', 'SKIPPED'], 'fire_once, then the pause wins');
  t.ok(b.sm.runs.get(`j1:${SLOT}`)?.reason, 'MISSED carries its reason');

  // Paused through the outage: the slots are SKIPPED (paused) before the resume.
  const c = new Harness();
  c.create('j1', SLOT);
  c.apply({ op: 'pause-job', atMs: SLOT - 1000, jobId: 'j1' });
  c.apply({ op: 'fire-intents', atMs: now, term: 1, intents: [c.d.overdueIntent('j1', now)!] });
  c.apply({ op: 'resume-job', atMs: now, jobId: 'j1', nextFireAtMs: SLOT + 3 * MIN });
  t.same(statuses(c, overdue), ['SKIPPED', 'SKIPPED', 'SKIPPED'], 'paused slots recorded');

  // A delete: the overdue slots are recorded, then cancelled by the delete; none is silent.
  // (Found by the chaos suite, seed 403: slots due before a delete had no run at all.)
  const del = new Harness();
  del.create('j1', SLOT, {
    misfire: { policy: 'fire_all', fireAllCap: 10, catchUpWindowMs: 3600_000 },
  });
  del.apply({
    op: 'fire-intents',
    atMs: now,
    term: 1,
    intents: [del.d.overdueIntent('j1', now)!],
  });
  del.apply({ op: 'delete-job', atMs: now, jobId: 'j1' });
  t.same(statuses(del, overdue), ['CANCELLED', 'CANCELLED', 'CANCELLED'], 'delete: recorded');
  t.equal(del.sm.runs.get(`j1:${SLOT}`)?.reason, 'job deleted');

  // The leader's own intent recorded the first slot between planning and apply: the settle
  // records the rest, once each.
  const d = new Harness();
  d.create('j1', SLOT, {
    misfire: { policy: 'fire_all', fireAllCap: 10, catchUpWindowMs: 3600_000 },
  });
  const late = d.d.overdueIntent('j1', now)!;
  d.apply({
    op: 'fire-intents',
    atMs: now,
    term: 1,
    intents: [
      {
        jobId: 'j1',
        expectedNextFireAtMs: SLOT,
        slots: [SLOT],
        notFired: [],
        nextFireAtMs: SLOT + MIN,
      },
    ],
  });
  d.apply({ op: 'fire-intents', atMs: now, term: 1, intents: [late] });
  t.same(statuses(d, overdue), ['SCHEDULED', 'SCHEDULED', 'SCHEDULED']);
  t.equal(d.sm.runsOf('j1').length, 3, 'one run per slot');
  t.equal(d.sm.jobs.get('j1')?.nextFireAtMs, SLOT + 3 * MIN);

  // Planned from another version (an update applied in between): ignored.
  const e = new Harness();
  e.create('j1', SLOT);
  const stale = e.d.overdueIntent('j1', now)!;
  e.apply({
    op: 'update-job',
    atMs: now,
    jobId: 'j1',
    spec: spec(),
    nextFireAtMs: SLOT + 3 * MIN,
    expectedVersion: undefined,
  });
  e.apply({ op: 'fire-intents', atMs: now, term: 1, intents: [stale] });
  t.equal(e.sm.runsOf('j1').length, 0, 'a settle of an older version records nothing');
  t.equal(e.d.overdueIntent('j1', SLOT), undefined, 'nothing overdue: no intent');
  t.end();
});

/** A leader holding results up to 500 ms, with `jobs` one-off jobs handed out at their slot. */
function heldAtSlot(jobs: number): Harness {
  const h = new Harness({ resultHoldMs: 500 });
  for (let i = 0; i < jobs; i++) h.create(`j${i}`, SLOT);
  h.step(SLOT - 2_000);
  h.step(SLOT);
  return h;
}

// During a spike the leader holds attempt results back while deliveries wait (resultHoldMs), so
// that they reach the log as a few large entries instead of competing with the sends.
t.test('results held while deliveries wait go to the log together', (t) => {
  const h = heldAtSlot(6);
  t.equal(h.delivered.length, 6);
  h.holdResults = true;
  for (const o of h.delivered) h.succeed(o, SLOT + 10);
  h.proposed.length = 0;
  h.step(SLOT + 10);
  h.step(SLOT + 300);
  t.same(h.ops(), [], 'nothing proposed while deliveries wait');
  t.ok(
    h.delivered.every((o) => h.sm.runs.get(o.fireId)?.status === 'SCHEDULED'),
    'the runs are not settled yet',
  );
  t.same(h.step(SLOT + 301).deliveries, [], 'a held result is no reason to send again');
  h.holdResults = false;
  h.step(SLOT + 302);
  t.same(h.ops(), ['attempt-results'], 'one entry once the backlog is gone');
  t.ok(h.delivered.every((o) => h.sm.runs.get(o.fireId)?.status === 'SUCCEEDED'));
  t.equal(h.d.inFlightCount, 0);
  t.end();
});

t.test('held results leave after resultHoldMs, or full entries when too many wait', (t) => {
  const h = new Harness({ resultHoldMs: 500, resultsPerEntry: 4, heldResultsMax: 8 });
  for (let i = 0; i < 11; i++) h.create(`j${i}`, SLOT);
  h.step(SLOT - 2_000);
  h.step(SLOT);
  t.equal(h.delivered.length, 11);
  h.holdResults = true;
  h.proposed.length = 0;
  h.succeed(h.delivered[0]!, SLOT + 10);
  h.step(SLOT + 10);
  t.same(h.ops(), [], 'one result is held');
  for (const o of h.delivered.slice(1, 8)) h.succeed(o, SLOT + 20);
  h.step(SLOT + 20);
  t.same(h.ops(), [], 'full entries wait too, up to heldResultsMax results');
  for (const o of h.delivered.slice(8)) h.succeed(o, SLOT + 30);
  h.step(SLOT + 30);
  t.same(h.ops(), ['attempt-results', 'attempt-results'], 'beyond it, the full entries leave');
  t.same(
    h.proposed.map((c) => (c.op === 'attempt-results' ? c.results.length : 0)),
    [4, 4],
    'of resultsPerEntry each',
  );
  h.step(SLOT + 509);
  t.equal(h.proposed.length, 2, 'the other three wait on');
  h.step(SLOT + 510);
  t.same(
    h.ops(),
    ['attempt-results', 'attempt-results', 'attempt-results'],
    'until the oldest waited 500 ms',
  );
  t.equal(h.sm.runs.size, 11);
  t.ok([...h.sm.runs.values()].every((r) => r.status === 'SUCCEEDED'));
  t.end();
});

t.test('a drain proposes held results at once and is not drained before they commit', (t) => {
  const h = new Harness({ resultHoldMs: 500 });
  h.create('j1', SLOT);
  h.step(SLOT - 2_000);
  h.step(SLOT);
  h.holdResults = true;
  h.fate = 'unknown';
  h.succeed(h.delivered[0]!, SLOT + 10);
  h.step(SLOT + 10);
  h.d.beginDrain();
  t.notOk(h.d.isDrained, 'a held result keeps the group from draining');
  h.proposed.length = 0;
  h.step(SLOT + 11);
  t.same(h.ops(), ['attempt-result'], 'proposed at once while draining');
  t.notOk(h.d.isDrained, 'its fate was unknown: it is proposed again');
  h.fate = 'committed';
  h.step(SLOT + 12);
  t.ok(h.d.isDrained);
  t.equal(h.sm.runs.get(h.delivered[0]!.fireId)?.status, 'SUCCEEDED');
  t.end();
});

t.test(
  'a leader change loses held results (at-least-once goes out again); at-most-once results are never held',
  (t) => {
    const h = bothSentInTerm1(t, new Harness({ resultHoldMs: 500 }));
    h.holdResults = true;
    h.proposed.length = 0;
    for (const o of h.delivered) h.succeed(o, SLOT + 10);
    h.step(SLOT + 10);
    t.same(h.ops(), ['attempt-result'], 'only the at-most-once result is proposed');
    t.equal(h.sm.runs.get(`most:${SLOT}`)?.status, 'SUCCEEDED', 'and recorded at once');
    const first = h.delivered.find((o) => o.jobId === 'least')!;
    t.equal(h.sm.runs.get(first.fireId)?.status, 'SCHEDULED', 'the other result is held');
    // The leader dies holding the at-least-once result; another replica (same applied state) leads.
    h.term = 2;
    h.d = h.newDispatcher();
    h.holdResults = false;
    h.proposed.length = 0;
    h.step(SLOT + 2_000);
    h.step(SLOT + 2_001);
    t.equal(
      h.sm.runs.get(`most:${SLOT}`)?.status,
      'SUCCEEDED',
      'at-most-once: neither lost nor UNKNOWN',
    );
    t.equal(h.delivered.filter((o) => o.jobId === 'most').length, 1, 'and never sent again');
    const again = h.delivered.filter((o) => o.jobId === 'least');
    t.equal(again.length, 2, 'at-least-once sent again');
    t.equal(again[1]!.fireId, first.fireId, 'same fire id');
    t.ok(again[1]!.token > first.token, 'higher token');
    t.end();
  },
);

t.test('a step proposes at most the results the runtime allows; the rest follow', (t) => {
  const h = heldAtSlot(6);
  for (const o of h.delivered) h.succeed(o, SLOT + 10);
  h.proposed.length = 0;
  h.resultMax = 4;
  h.step(SLOT + 10);
  const first = h.proposed[0];
  t.equal(first?.op === 'attempt-results' ? first.results.length : 0, 4, 'four in this step');
  h.step(SLOT + 11);
  t.same(h.ops(), ['attempt-results', 'attempt-results'], 'the other two at the next');
  t.ok([...h.sm.runs.values()].every((r) => r.status === 'SUCCEEDED'));
  h.resultMax = 0;
  t.same(h.step(SLOT + 12).proposals, [], 'nothing held: nothing to propose');
  t.end();
});

t.test('foresee: the orders a step will hand out at the slot, each run once', (t) => {
  const h = new Harness();
  h.create('one', SLOT);
  h.create('amo', SLOT, { delivery: 'at_most_once' });
  h.create('paused', SLOT);
  h.create('later', SLOT + 30_000, { schedule: '30 * * * * *' });
  h.step(SLOT - 2_000); // intents for the slot, inside the look-ahead
  h.apply({ op: 'pause-job', atMs: SLOT - 1_900, jobId: 'paused' });
  const seen = h.d.foresee(SLOT - 1_500, SLOT + 1_000, 100);
  t.same(
    seen.map((o) => o.fireId),
    [`one:${SLOT}`],
    'only the at-least-once run of a job not paused, due in the window',
  );
  t.same(h.d.foresee(SLOT - 1_400, SLOT + 1_000, 100), [], 'each run is foreseen once');
  const s = h.step(SLOT + 3);
  const sent = s.deliveries.find((o) => o.fireId === `one:${SLOT}`);
  t.same(
    sent && { attempt: sent.attempt, token: sent.token },
    { attempt: seen[0]!.attempt, token: seen[0]!.token },
    'the hand-out has the foreseen attempt and token',
  );
  t.end();
});

t.test(
  'foresee: at most `max` per call, the rest at the next call; a new term starts over',
  (t) => {
    const h = new Harness();
    for (let i = 0; i < 10; i++) h.create(`j${i}`, SLOT);
    h.step(SLOT - 2_000);
    const first = h.d.foresee(SLOT - 1_500, SLOT + 1_000, 4);
    const second = h.d.foresee(SLOT - 1_490, SLOT + 1_000, 4);
    const third = h.d.foresee(SLOT - 1_480, SLOT + 1_000, 4);
    t.same([first.length, second.length, third.length], [4, 4, 2]);
    const ids = [...first, ...second, ...third].map((o) => o.fireId);
    t.equal(new Set(ids).size, 10, 'every run once');
    h.term = 2;
    h.step(SLOT - 1_000); // a new term: its tokens are new
    const again = h.d.foresee(SLOT - 1_000, SLOT + 1_000, 100);
    t.equal(again.length, 10, 'foreseen again in the new term');
    t.ok(
      again.every((o) => termOfToken(o.token) === 2),
      'with tokens of the new term',
    );
    t.end();
  },
);

t.test('foresee: nothing for a job with another live run, nor while draining', (t) => {
  const h = new Harness();
  h.create('busy', SLOT, { schedule: '* * * * * *' }); // every second: several live runs
  h.create('solo', SLOT);
  for (let i = 0; i < 3; i++) h.step(SLOT - 2_000 + i * 10); // one intent per job and step
  t.ok(h.sm.runs.has(`busy:${SLOT + 1000}`), 'busy has a second run');
  t.same(
    h.d.foresee(SLOT - 1_500, SLOT + 1_000, 100).map((o) => o.jobId),
    ['solo'],
    'a job with several live runs is not foreseen (its tokens depend on their order)',
  );
  const d = new Harness();
  d.create('solo', SLOT);
  d.step(SLOT - 2_000);
  d.d.beginDrain();
  t.same(d.d.foresee(SLOT - 1_500, SLOT + 1_000, 100), [], 'a draining leader foresees nothing');
  t.end();
});

t.test(
  'a trigger with overrides: every attempt sends its payload and headers, the job keeps its own',
  (t) => {
    for (const delivery of ['at_least_once', 'at_most_once'] as const) {
      const h = new Harness();
      h.create('j1', SLOT + 10 * MIN, {
        delivery,
        payload: '{"job":true}',
        target: { url: 'http://example.test/hook', headers: { 'X-Team': 'a', 'X-Keep': 'k' } },
        retry: {
          maxAttempts: 3,
          initialBackoffMs: 100,
          maxBackoffMs: 1000,
          multiplier: 2,
          maxAgeMs: 3_600_000,
        },
      });
      const overrides = { payload: '{"run":1}', headers: { 'x-team': 'b', 'X-Extra': 'e' } };
      h.apply({ op: 'trigger-job', atMs: SLOT, jobId: 'j1', slotMs: SLOT, overrides });
      h.apply({ op: 'trigger-job', atMs: SLOT, jobId: 'j1', slotMs: SLOT + 1 });
      for (let ms = SLOT; ms <= SLOT + 5; ms++) h.step(ms);
      const [first, plain] = h.delivered;
      t.equal(first?.job.payload, '{"run":1}', `${delivery}: the run's payload`);
      t.same(
        first?.job.target.headers,
        { 'X-Keep': 'k', 'x-team': 'b', 'X-Extra': 'e' },
        'headers merged, a name in any case replaced',
      );
      t.equal(plain?.job.payload, '{"job":true}', "a trigger without overrides sends the job's");
      t.same(h.sm.jobs.get('j1')?.payload, '{"job":true}', 'the job is unchanged');
      t.same(h.sm.runs.get(`j1:${SLOT}`)?.overrides, overrides, 'recorded on the run');
      if (delivery === 'at_least_once') {
        h.d.attemptDone(
          first!,
          { outcome: 'retry', statusCode: 503, durationMs: 1, isProvablyUndelivered: false },
          SLOT + 10,
        );
        for (let ms = SLOT + 10; ms <= SLOT + 2_000; ms += 10) h.step(ms);
        const retry = h.delivered.filter((o) => o.fireId === `j1:${SLOT}`);
        t.equal(retry.length, 2, 'retried');
        t.equal(retry[1]?.job.payload, '{"run":1}', "the retry sends the run's payload too");
      }
    }
    t.end();
  },
);

/** A job whose webhook completes asynchronously within `timeoutMs`, one-off at SLOT. */
function asyncJob(
  h: Harness,
  delivery: 'at_least_once' | 'at_most_once',
  timeoutMs = 10_000,
): void {
  h.create('j1', SLOT, {
    schedule: `at ${new Date(SLOT).toISOString()}`,
    delivery,
    target: { url: 'http://example.test/hook', headers: {}, completionTimeoutMs: timeoutMs },
    retry: {
      maxAttempts: 3,
      initialBackoffMs: 100,
      maxBackoffMs: 1000,
      multiplier: 2,
      maxAgeMs: 3_600_000,
    },
  });
}

function accept(h: Harness, o: DeliveryOrder, nowMs: number): void {
  h.d.attemptDone(
    o,
    { outcome: 'success', statusCode: 202, durationMs: 4, isProvablyUndelivered: false },
    nowMs,
  );
  h.step(nowMs);
}

t.test(
  '202 with a completion timeout: RUNNING until CompleteRun, which only the current token may send',
  (t) => {
    const h = new Harness();
    asyncJob(h, 'at_least_once');
    h.step(SLOT - 2_000);
    h.step(SLOT);
    const o = h.delivered[0]!;
    const fireId = o.fireId;
    t.ok(h.d.isInFlight(fireId), 'sent: in flight (shown RUNNING)');
    t.equal(viewStatus(h.sm.runs.get(fireId)!, true), 'RUNNING');
    accept(h, o, SLOT + 10);
    const run = h.sm.runs.get(fireId)!;
    t.equal(run.status, 'RUNNING', 'accepted: RUNNING in replicated state');
    t.equal(run.completeByMs, SLOT + 10 + 10_000, 'with its deadline');
    t.equal(run.attempts[0]?.outcome, 'accepted');
    t.notOk(h.d.isInFlight(fireId), "no longer in the leader's flight");
    const stale = h.sm.applyCommand(
      h.d.completionCommand({ fireId, token: o.token - 1, outcome: 'success' }, SLOT + 20),
    );
    t.match(stale, { ok: false, code: 'FENCING_TOKEN_STALE' }, 'another token is refused');
    t.equal(h.sm.runs.get(fireId)?.status, 'RUNNING', 'and changes nothing');
    const done = h.sm.applyCommand(
      h.d.completionCommand(
        { fireId, token: o.token, outcome: 'success', output: 'rows: 42' },
        SLOT + 5_000,
      ),
    );
    h.d.afterApply();
    t.match(done, { ok: true, status: 'SUCCEEDED' });
    t.equal(h.sm.runs.get(fireId)?.attempts[0]?.outcome, 'success');
    t.equal(h.sm.runs.get(fireId)?.attempts[0]?.responseExcerpt, 'rows: 42', 'the output is kept');
    t.equal(
      h.sm.runs.get(fireId)?.attempts[0]?.durationMs,
      5_000 - 6, // sent at SLOT + 6 (its 202 came 4 ms later, at SLOT + 10)
      'duration: from the send to the completion',
    );
    t.equal(h.sm.runs.get(fireId)?.completeByMs, undefined);
    const again = h.sm.applyCommand(
      h.d.completionCommand({ fireId, token: o.token, outcome: 'fail' }, SLOT + 5_001),
    );
    t.match(again, { ok: false, code: 'RUN_WRONG_STATE' }, 'a finished run is refused');
    t.end();
  },
);

t.test('a 202 without a completion timeout is a success, as any 2xx', (t) => {
  const h = new Harness();
  h.create('j1', SLOT);
  h.step(SLOT - 2_000);
  h.step(SLOT);
  accept(h, h.delivered[0]!, SLOT + 10);
  t.equal(h.sm.runs.get(h.delivered[0]!.fireId)?.status, 'SUCCEEDED');
  t.end();
});

t.test(
  'the completion deadline: heartbeats move it; past it at-least-once retries, at-most-once dies',
  (t) => {
    for (const delivery of ['at_least_once', 'at_most_once'] as const) {
      const h = new Harness();
      asyncJob(h, delivery, 5_000);
      h.step(SLOT - 2_000);
      for (let ms = SLOT; ms <= SLOT + 5; ms++) h.step(ms);
      const o = h.delivered[0]!;
      accept(h, o, SLOT + 10);
      const hb = h.sm.applyCommand({
        op: 'heartbeat-run',
        atMs: SLOT + 4_000,
        fireId: o.fireId,
        token: o.token,
        completeByMs: SLOT + 9_000,
      });
      h.d.afterApply();
      t.match(
        hb,
        { ok: true, status: 'RUNNING' },
        `${delivery}: a heartbeat with the current token`,
      );
      const staleHb = h.sm.applyCommand({
        op: 'heartbeat-run',
        atMs: SLOT + 4_000,
        fireId: o.fireId,
        token: o.token + 1,
        completeByMs: SLOT + 99_000,
      });
      t.match(staleHb, { ok: false, code: 'FENCING_TOKEN_STALE' });
      h.step(SLOT + 6_000);
      t.equal(
        h.sm.runs.get(o.fireId)?.status,
        'RUNNING',
        'the first deadline moved: still RUNNING',
      );
      t.equal(h.d.nextDueMs(), SLOT + 9_000, 'a quiet group wakes for the deadline');
      h.step(SLOT + 9_001);
      const run = h.sm.runs.get(o.fireId)!;
      t.match(run.attempts[0]?.error, /COMPLETION_TIMEOUT/, 'the attempt says why');
      if (delivery === 'at_least_once') {
        t.equal(run.status, 'SCHEDULED', "retried by the job's policy");
        t.equal(viewStatus(run, false), 'FAILED', 'shown FAILED until the retry goes');
        for (let ms = SLOT + 9_001; ms <= SLOT + 11_000; ms += 10) h.step(ms);
        t.equal(h.delivered.length, 2, 'the retry is sent');
        t.equal(h.delivered[1]!.attempt, 2);
      } else {
        t.equal(run.status, 'DEAD', 'at most once: the receiver may have done it, so never again');
      }
    }
    t.end();
  },
);

t.test('a deadline outlives its leader: the next one expires it from replicated state', (t) => {
  const h = new Harness();
  asyncJob(h, 'at_least_once', 5_000);
  h.step(SLOT - 2_000);
  h.step(SLOT);
  const o = h.delivered[0]!;
  accept(h, o, SLOT + 10);
  // The leader dies; a new replica built from the same state takes over in a later term.
  h.d = h.newDispatcher();
  h.term = 2;
  h.step(SLOT + 3_000);
  t.equal(
    h.sm.runs.get(o.fireId)?.status,
    'RUNNING',
    'nothing lost: still RUNNING under the new leader',
  );
  const late = h.sm.applyCommand(
    h.d.completionCommand({ fireId: o.fireId, token: o.token, outcome: 'success' }, SLOT + 3_500),
  );
  t.match(
    late,
    { ok: true, status: 'SUCCEEDED' },
    "the old leader's token still names the current attempt: accepted",
  );
  t.end();
});

t.test(
  'a completion after a new leader re-sent the run carries the deposed token: refused',
  (t) => {
    const h = new Harness();
    asyncJob(h, 'at_least_once', 5_000);
    h.step(SLOT - 2_000);
    h.step(SLOT);
    const first = h.delivered[0]!;
    accept(h, first, SLOT + 10);
    h.step(SLOT + 5_011); // expired: retried
    for (let ms = SLOT + 5_011; ms <= SLOT + 8_000; ms += 10) h.step(ms);
    const second = h.delivered[1]!;
    t.equal(second.attempt, 2);
    accept(h, second, SLOT + 8_010);
    const old = h.sm.applyCommand(
      h.d.completionCommand(
        { fireId: first.fireId, token: first.token, outcome: 'success' },
        SLOT + 8_100,
      ),
    );
    t.match(
      old,
      { ok: false, code: 'FENCING_TOKEN_STALE', reason: /attempt 1.*attempt 2/ },
      'names both attempts',
    );
    t.end();
  },
);

const RETRY_ONCE = {
  maxAttempts: 1,
  initialBackoffMs: 100,
  maxBackoffMs: 100,
  multiplier: 2,
  maxAgeMs: 60_000,
};

/** Upstream `up` and `down` depending on it, both every minute; steps until `untilMs`. */
function dag(policy: 'skip' | 'run' = 'skip'): Harness {
  const h = new Harness();
  h.create('up', SLOT, { retry: RETRY_ONCE });
  h.create('down', SLOT, { dependsOn: { jobs: ['up'], onUpstreamFailure: policy } });
  return h;
}

function runTo(
  h: Harness,
  fromMs: number,
  toMs: number,
  answer?: (o: DeliveryOrder) => void,
): void {
  for (let ms = fromMs; ms <= toMs; ms += 10) {
    const before = h.delivered.length;
    h.step(ms);
    for (const o of h.delivered.slice(before)) answer?.(o);
  }
}

t.test("depends_on: the downstream slot waits for its upstream's run, then goes", (t) => {
  const h = dag();
  h.step(SLOT - 2_000);
  const down = h.sm.runs.get(`down:${SLOT}`)!;
  t.same(
    down.upstream?.map((u) => [u.job, u.outcome]),
    [['up', undefined]],
    'created waiting',
  );
  let upDone = 0;
  runTo(h, SLOT, SLOT + 3_000, (o) => {
    if (o.jobId === 'up') {
      upDone = SLOT + 1_000;
      // The upstream answers late: the downstream must not go before.
      return;
    }
  });
  t.same(
    h.delivered.map((o) => o.jobId),
    ['up'],
    'only the upstream went',
  );
  t.equal(h.sm.runs.get(`down:${SLOT}`)?.status, 'SCHEDULED', 'the downstream waits');
  h.succeed(h.delivered[0]!, SLOT + 3_000);
  runTo(h, SLOT + 3_000, SLOT + 6_000);
  t.same(
    h.delivered.map((o) => o.jobId),
    ['up', 'down'],
    'then the downstream',
  );
  const settled = h.sm.runs.get(`down:${SLOT}`)!.upstream![0]!;
  t.same(
    [settled.outcome, settled.fireId],
    ['succeeded', `up:${SLOT}`],
    'which upstream run it was',
  );
  t.ok(upDone > 0);
  t.end();
});

t.test('depends_on: an upstream that died SKIPs the slot (skip) or lets it run (run)', (t) => {
  for (const policy of ['skip', 'run'] as const) {
    const h = dag(policy);
    h.step(SLOT - 2_000);
    runTo(h, SLOT, SLOT + 100);
    const up = h.delivered.find((o) => o.jobId === 'up')!;
    h.d.attemptDone(
      up,
      { outcome: 'fail', statusCode: 400, durationMs: 1, isProvablyUndelivered: false },
      SLOT + 200,
    );
    runTo(h, SLOT + 200, SLOT + 3_000);
    const down = h.sm.runs.get(`down:${SLOT}`)!;
    if (policy === 'skip') {
      t.equal(down.status, 'SKIPPED', 'skip: SKIPPED');
      t.match(
        down.reason,
        /^UPSTREAM_FAILED: job up: its run up:\d+ is DEAD/,
        'naming the upstream',
      );
      t.notOk(
        h.delivered.some((o) => o.jobId === 'down'),
        'never sent',
      );
    } else
      t.ok(
        h.delivered.some((o) => o.jobId === 'down'),
        'run: sent anyway',
      );
  }
  t.end();
});

t.test(
  'depends_on: an upstream paused over the slot is missing; a wait gives up at max age',
  (t) => {
    const h = dag();
    h.apply({ op: 'pause-job', atMs: T0, jobId: 'up' });
    h.step(SLOT - 2_000);
    runTo(h, SLOT, SLOT + 2_000);
    const down = h.sm.runs.get(`down:${SLOT}`)!;
    t.equal(down.status, 'SKIPPED');
    t.match(down.reason, /its run up:\d+ is SKIPPED/, 'the paused slot was recorded SKIPPED');

    const w = new Harness();
    w.create('up', SLOT + MIN, {});
    w.create('down', SLOT, {
      dependsOn: { jobs: ['up'], onUpstreamFailure: 'skip' },
      retry: { ...RETRY_ONCE, maxAgeMs: 5_000 },
    });
    // The upstream's only slot is after the downstream's: no run at or before it, ever.
    w.step(SLOT - 2_000);
    runTo(w, SLOT, SLOT + 1_000);
    t.equal(
      w.sm.runs.get(`down:${SLOT}`)?.status,
      'SKIPPED',
      'an upstream with no slot before: missing',
    );
    t.end();
  },
);

t.test('latestSlotAtOrBefore: the last slot of a schedule at or before an instant', (t) => {
  const hourly = parseSchedule('0 * * * *', { timezone: 'UTC', anchorMs: undefined });
  const at = Date.UTC(2026, 0, 1, 10, 15);
  t.equal(latestSlotAtOrBefore(hourly, Date.UTC(2025, 0, 1), at), Date.UTC(2026, 0, 1, 10));
  t.equal(
    latestSlotAtOrBefore(hourly, Date.UTC(2025, 0, 1), Date.UTC(2026, 0, 1, 10)),
    Date.UTC(2026, 0, 1, 10),
    'a slot exactly at it',
  );
  t.equal(latestSlotAtOrBefore(hourly, at, at), undefined, 'none after the lower bound');
  const every = parseSchedule('every 90s', { timezone: 'UTC', anchorMs: 0 });
  t.equal(latestSlotAtOrBefore(every, -1, 1_000_000), 990_000);
  t.end();
});

t.test('depends_on: a wait that passes the max age gives up (timeout), never sent', (t) => {
  const h = new Harness();
  // The upstream's slot comes, but its run never finishes: the receiver never answers.
  h.create('up', SLOT, {});
  h.create('down', SLOT, {
    dependsOn: { jobs: ['up'], onUpstreamFailure: 'skip' },
    retry: { ...RETRY_ONCE, maxAgeMs: 5_000 },
  });
  h.step(SLOT - 2_000);
  runTo(h, SLOT, SLOT + 7_000);
  const down = h.sm.runs.get(`down:${SLOT}`)!;
  t.equal(down.status, 'SKIPPED');
  t.match(down.reason, /the wait passed the max age/);
  t.same(
    down.upstream?.map((u) => u.outcome),
    ['timeout'],
  );
  t.notOk(h.delivered.some((o) => o.jobId === 'down'));
  t.end();
});
