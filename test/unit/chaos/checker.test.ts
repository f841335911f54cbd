// The chaos checker must pass a clean history with the right counts and report each kind of
// violation as exactly that kind. Method: one small hand-built history per kind (an every-second
// job, 20 s of driver time, final read at 20 s), each differing from the clean one by the one
// thing that breaks the invariant.
import t from 'tap';
import { ValidationError } from '../../../src/base/errors.js';
import { checkHistory, type CheckReport } from '../../../chaos/checker/check-history.js';
import { renderSummary } from '../../../chaos/checker/summary.js';
import type { ViolationKind } from '../../../chaos/checker/violations.js';
import type { RunRead } from '../../../chaos/history/format.js';
import {
  HistoryBuilder,
  START_EPOCH_MS,
  everySecond,
  readOf,
} from '../../helpers/chaos-history.js';

const J = 'j1';
const slot = (s: number): number => START_EPOCH_MS + s * 1000;

/** Kinds with a non-zero count. */
function found(report: CheckReport): Partial<Record<ViolationKind, number>> {
  const out: Partial<Record<ViolationKind, number>> = {};
  for (const [kind, v] of Object.entries(report.violations))
    if (v.count > 0) out[kind as ViolationKind] = v.count;
  return out;
}

/** Create at 0-10 ms, a get at 5 s, slots 1-19 delivered 20 ms late, final read at 20 s. */
function clean(
  options: { skip?: number[]; runs?: RunRead[]; def?: ReturnType<typeof everySecond> } = {},
): HistoryBuilder {
  const def = options.def ?? everySecond();
  return new HistoryBuilder()
    .create(J, def)
    .op('get', 5000, 5010, 'ok', { jobId: J, value: readOf(J, def) })
    .deliverSeconds(J, 1, 19, 20, options.skip ?? [])
    .final(
      J,
      20_000,
      readOf(J, def),
      options.runs ?? HistoryBuilder.succeeded(1, 19, options.skip ?? []),
    );
}

t.test('a clean history is ok, with the slots owed, delivered and the lag counted', (t) => {
  const report = checkHistory(clean().records);
  t.same(found(report), {});
  t.equal(report.ok, true);
  t.equal(report.verdict, 'ok');
  // Horizon = final read (20 s) − end grace (L 1 s + look-ahead 3 s): slots 1..15 s are owed.
  t.equal(report.slots.slotsOwed, 15);
  t.equal(report.slots.slotsDelivered, 15);
  t.equal(report.slots.slotsUnobserved, 0);
  t.equal(report.jobs.jobsAcknowledged, 1);
  t.equal(report.jobs.jobsPresentAtEnd, 1);
  t.equal(report.fencing.accepted, 19);
  t.equal(report.lag.outsideFaults.count, 19);
  t.equal(report.lag.outsideFaults.p50Ms, 20);
  t.equal(report.lag.insideFaults.count, 0);
  t.equal(report.register.operations, 3, 'create, get and the final read');
  t.match(renderSummary(report), /chaos check: OK/);
  t.end();
});

t.test('an acknowledged job absent from the final read is lost', (t) => {
  const def = everySecond();
  const b = new HistoryBuilder()
    .create(J, def)
    .deliverSeconds(J, 1, 19)
    .final(J, 20_000, null, HistoryBuilder.succeeded(1, 19));
  const report = checkHistory(b.records);
  t.same(found(report), { 'job-lost': 1 });
  t.equal(report.ok, false);
  t.end();
});

t.test('a deleted job absent from the final read is not lost', (t) => {
  const def = everySecond();
  const b = new HistoryBuilder()
    .create(J, def)
    .deliverSeconds(J, 1, 10)
    .op('delete', 10_200, 10_210, 'info', { jobId: J })
    .final(J, 20_000, null, HistoryBuilder.succeeded(1, 10));
  t.same(found(checkHistory(b.records)), {});
  t.end();
});

// Found by chaos seed 38611: a job was deleted 0.7 s after a slot, through a leader whose clock
// was 2.9 s behind (a clock-bump fault). To that leader the slot was still ahead when the delete
// applied, so the delete won and cancelled the run, which went with the job: no read shows it.
t.test('slots just before a delete through a leader whose clock was behind are not owed', (t) => {
  const def = everySecond();
  const deleted = (behindMs: number | undefined): HistoryBuilder => {
    const b = new HistoryBuilder()
      .create(J, def)
      .deliverSeconds(J, 1, 9)
      .op('delete', 10_700, 10_710, 'ok', { jobId: J });
    if (behindMs !== undefined)
      b.fault('c1', 'clock-bump', 8_000, 12_000, {
        offsetMs: -behindMs,
        faketime: `-${behindMs / 1000}s`,
      });
    return b.final(J, 20_000, null, HistoryBuilder.succeeded(1, 9));
  };
  t.same(found(checkHistory(deleted(2_000).records)), {}, 'within the injected skew: not owed');
  t.same(
    found(checkHistory(deleted(undefined).records)),
    { 'slot-without-run': 1 },
    'with no clock fault, the slot before the delete is owed',
  );
  t.end();
});

t.test('deliveries for a job whose create definitely failed are a phantom job', (t) => {
  const b = clean().create('ghost', everySecond(), 0, 10, 'fail').deliverSeconds('ghost', 3, 5);
  t.same(found(checkHistory(b.records)), { 'phantom-job': 1 });
  t.end();
});

t.test('an owed slot with no delivery and no run record is reported', (t) => {
  const report = checkHistory(clean({ skip: [7] }).records);
  t.same(found(report), { 'slot-without-run': 1 });
  t.equal(report.violations['slot-without-run'].examples[0]?.slotMs, slot(7));
  t.end();
});

// Found by chaos seed 702: the final read of a job held a DEAD run from long before the runs the
// history bound had dropped (the dead-letter queue keeps DEAD runs until replayed), and the
// checker took that run as the read's reach, so dropped slots looked absent.
t.test('an old DEAD run does not make a bounded read reach past what it dropped', (t) => {
  const def = everySecond();
  const dead: RunRead = { slotMs: slot(1), status: 'DEAD', attempts: 5 };
  const read = [...HistoryBuilder.succeeded(10, 19), dead];
  const history = (): HistoryBuilder =>
    new HistoryBuilder({ runsRetainedMax: 10 })
      .create(J, def)
      .deliverSeconds(J, 1, 19, 20, [7, 8])
      .final(J, 20_000, readOf(J, def), read);
  const report = checkHistory(history().records);
  t.same(found(report), {}, 'slots 7 and 8 fell out of the bounded history: unobserved');
  t.equal(report.slots.slotsUnobserved, 2);
  // With room for every run, the same read does reach them: then their absence is a violation.
  const roomy = new HistoryBuilder({ runsRetainedMax: 100 })
    .create(J, def)
    .deliverSeconds(J, 1, 19, 20, [7, 8])
    .final(J, 20_000, readOf(J, def), read);
  t.same(found(checkHistory(roomy.records)), { 'slot-without-run': 2 });
  t.end();
});

t.test(
  'a definition stamped by a leader whose clock ran ahead owes no slot before the stamp',
  (t) => {
    // The create is answered at 10 ms; the leader that proposed it read 2.5 s on its clock, so
    // to the cluster slots 1 and 2 were already past: the definition took effect after them.
    const def = everySecond();
    const skewed = (aheadMs: number | undefined): HistoryBuilder => {
      const b = new HistoryBuilder().op('create', 0, 10, 'ok', {
        jobId: J,
        definition: def,
        requestId: `req-${J}`,
        value: { ...readOf(J, def), updatedAtMs: slot(2.5) },
      });
      if (aheadMs !== undefined)
        b.fault('c1', 'clock-bump', -100, 4_000, {
          offsetMs: aheadMs,
          faketime: `+${aheadMs / 1000}s`,
        });
      return b
        .deliverSeconds(J, 3, 19)
        .final(J, 20_000, readOf(J, def), HistoryBuilder.succeeded(3, 19));
    };
    t.same(found(checkHistory(skewed(3_000).records)), {}, 'within the injected skew: believed');
    t.same(
      found(checkHistory(skewed(1_000).records)),
      { 'slot-without-run': 2 },
      'a stamp later than the skew allows is not believed',
    );
    t.same(
      found(checkHistory(skewed(undefined).records)),
      { 'slot-without-run': 2 },
      'with no clock fault, slots after the answer are owed whatever the stamp says',
    );
    t.end();
  },
);

t.test('a missing slot no read could have shown is unobserved, not a violation', (t) => {
  // An incomplete read holding only the newest runs does not reach back to slot 7.
  const report = checkHistory(
    clean({ skip: [7], runs: HistoryBuilder.succeeded(12, 19) }).records.map((r) =>
      r.type === 'final' ? { ...r, runs: { ...r.runs, complete: false } } : r,
    ),
  );
  t.same(found(report), {});
  t.equal(report.slots.slotsUnobserved, 1);
  t.end();
});

t.test('a slot recorded MISSED with a reason the policy never gives is beyond policy', (t) => {
  const runs = [
    ...HistoryBuilder.succeeded(1, 19, [7]),
    { slotMs: slot(7), status: 'MISSED' as const, reason: 'skip_policy' },
  ];
  const report = checkHistory(clean({ skip: [7], runs }).records);
  t.same(found(report), { 'slot-skipped-beyond-policy': 1 });
  t.match(report.violations['slot-skipped-beyond-policy'].examples[0]?.message, /fire_once/);
  t.end();
});

t.test('a MISSED slot inside a fault window under the job policy is accounted for', (t) => {
  const runs = [
    ...HistoryBuilder.succeeded(1, 19, [7]),
    { slotMs: slot(7), status: 'MISSED' as const, reason: 'skip_policy' },
  ];
  const b = clean({ skip: [7], runs, def: everySecond({ misfire: { policy: 'skip' } }) }).fault(
    'f1',
    'kill',
    6_500,
    7_500,
  );
  const report = checkHistory(b.records);
  t.same(found(report), {});
  t.same(report.slots.slotsRecordedOnly, { MISSED: 1 });
  t.end();
});

t.test('an at-most-once slot received twice after a 2xx is a duplicate', (t) => {
  const b = clean({ def: everySecond({ delivery: 'at_most_once' }) }).delivery(J, slot(5), 5_600, {
    attempt: 2,
  });
  t.same(found(checkHistory(b.records)), { 'at-most-once-duplicate': 1 });
  t.end();
});

t.test('an at-most-once retry after a definite 5xx is an ordinary retry', (t) => {
  const def = everySecond({ delivery: 'at_most_once' });
  const b = new HistoryBuilder()
    .create(J, def)
    .deliverSeconds(J, 1, 19, 20, [5])
    .delivery(J, slot(5), 5_020, { answer: '5xx' })
    .delivery(J, slot(5), 5_900, { attempt: 2 })
    .final(J, 20_000, readOf(J, def), HistoryBuilder.succeeded(1, 19));
  const report = checkHistory(b.records);
  t.same(found(report), {});
  t.equal(report.duplicates.retries, 1);
  t.end();
});

t.test('an at-least-once duplicate with no fault around it is a violation', (t) => {
  const b = clean().delivery(J, slot(5), 5_600, { attempt: 2 });
  const report = checkHistory(b.records);
  t.same(found(report), { 'at-least-once-duplicate': 1 });
  t.match(report.violations['at-least-once-duplicate'].examples[0]?.message, /no fault/);
  t.end();
});

t.test('an at-least-once duplicate across a kill, same fire id, higher token, is allowed', (t) => {
  const b = clean().fault('k1', 'kill', 5_100, 5_300).delivery(J, slot(5), 5_600, { attempt: 2 });
  const report = checkHistory(b.records);
  t.same(found(report), {});
  t.equal(report.duplicates.atLeastOnceDuplicatesAllowed, 1);
  t.end();
});

t.test(
  "a deposed leader's lower-token attempt after the success: allowed only refused, in a fault",
  (t) => {
    // Seed 402: n1 sent attempt 1 at the slot and was paused at once; the new leader's attempt 2
    // succeeded; attempt 1 reached the sink after SIGCONT, with its older token.
    const late = (answer: 'stale' | '2xx', fault: boolean): HistoryBuilder => {
      const b = clean().delivery(J, slot(5), 5_600, { attempt: 1, token: 1, answer });
      return fault ? b.fault('p1', 'pause', 5_010, 5_500) : b;
    };
    t.same(found(checkHistory(late('stale', true).records)), {}, 'refused by fencing, in a pause');
    t.same(
      found(checkHistory(late('stale', false).records)),
      { 'at-least-once-duplicate': 1 },
      'refused, but no fault explains it',
    );
    t.match(
      found(checkHistory(late('2xx', true).records)),
      { 'at-least-once-duplicate': 1 },
      'accepted with a lower token',
    );
    t.end();
  },
);

t.test('a duplicate across a graceful leader transfer is not allowed', (t) => {
  const b = clean()
    .fault('x1', 'leader-transfer', 5_100, 5_300)
    .delivery(J, slot(5), 5_600, { attempt: 2 });
  t.same(found(checkHistory(b.records)), { 'at-least-once-duplicate': 1 });
  t.end();
});

t.test('a duplicate across replica moves, a drain or a rebalance alone is not allowed', (t) => {
  for (const kind of ['replica-move', 'node-drain', 'rebalance'] as const) {
    const b = clean().fault('m1', kind, 5_100, 5_300).delivery(J, slot(5), 5_600, { attempt: 2 });
    t.same(found(checkHistory(b.records)), { 'at-least-once-duplicate': 1 }, kind);
  }
  t.end();
});

t.test('a delivery received after an acknowledged delete is reported', (t) => {
  const def = everySecond();
  const b = new HistoryBuilder()
    .create(J, def)
    .deliverSeconds(J, 1, 10)
    .op('delete', 10_000, 10_010, 'ok', { jobId: J })
    .delivery(J, slot(12), 12_020)
    .final(J, 20_000, null, HistoryBuilder.succeeded(1, 10));
  t.same(found(checkHistory(b.records)), { 'delivery-after-cancel': 1 });
  t.end();
});

t.test(
  'a delivery received after an acknowledged pause is reported; after a resume it is not',
  (t) => {
    const def = everySecond();
    const paused = new HistoryBuilder()
      .create(J, def)
      .deliverSeconds(J, 1, 10)
      .op('pause', 10_000, 10_010, 'ok', { jobId: J, value: readOf(J, def, 1, true) })
      .delivery(J, slot(12), 12_020)
      .final(J, 20_000, readOf(J, def, 1, true), HistoryBuilder.succeeded(1, 10));
    t.same(found(checkHistory(paused.records)), { 'delivery-after-pause': 1 });

    const resumed = new HistoryBuilder()
      .create(J, def)
      .deliverSeconds(J, 1, 10)
      .op('pause', 10_000, 10_010, 'ok', { jobId: J })
      .op('resume', 11_500, 11_510, 'ok', { jobId: J })
      .deliverSeconds(J, 12, 19)
      .final(J, 20_000, readOf(J, def), HistoryBuilder.succeeded(1, 19, [11]));
    const report = checkHistory(resumed.records);
    t.same(found(report), {});
    t.ok(report.slots.slotsOwed < 15, 'slots around the pause are not owed');
    t.end();
  },
);

t.test('a bulk pause of the job tenant counts as a pause of the job', (t) => {
  const def = everySecond();
  const b = new HistoryBuilder()
    .create(J, def)
    .deliverSeconds(J, 1, 10)
    .op('bulk-pause', 10_000, 10_010, 'ok', { tenant: 'acme' })
    .delivery(J, slot(12), 12_020)
    .final(J, 20_000, readOf(J, def, 1, true), HistoryBuilder.succeeded(1, 10));
  t.same(found(checkHistory(b.records)), { 'delivery-after-pause': 1 });
  t.end();
});

t.test('a read of a version never written is not linearizable', (t) => {
  const def = everySecond();
  const b = clean().op('get', 8000, 8010, 'ok', { jobId: J, value: readOf(J, def, 2) });
  const report = checkHistory(b.records);
  t.same(found(report), { 'job-read-not-linearizable': 1 });
  t.match(report.violations['job-read-not-linearizable'].examples[0]?.message, /not linearizable/);
  t.end();
});

t.test('a read that sees an update and then the old definition is not linearizable', (t) => {
  const def = everySecond();
  const updated = everySecond({ name: 'w2' });
  const b = clean()
    .op('update', 6000, 6010, 'ok', { jobId: J, definition: updated, value: readOf(J, updated, 2) })
    .op('get', 7000, 7010, 'ok', { jobId: J, value: readOf(J, def, 1) });
  t.equal(found(checkHistory(b.records))['job-read-not-linearizable'], 1);
  t.end();
});

t.test('JOB_NOT_FOUND from a pause of an existing job is not linearizable', (t) => {
  const b = clean().op('pause', 7000, 7010, 'fail', { jobId: J, error: { code: 'JOB_NOT_FOUND' } });
  t.same(found(checkHistory(b.records)), { 'job-read-not-linearizable': 1 });
  t.end();
});

t.test(
  'an accepted delivery with a token not above the highest accepted is a fencing violation',
  (t) => {
    const def = everySecond();
    const b = new HistoryBuilder()
      .create(J, def)
      .deliverSeconds(J, 1, 19, 20, [6])
      .delivery(J, slot(6), 6_020, { token: 5 })
      .final(J, 20_000, readOf(J, def), HistoryBuilder.succeeded(1, 19));
    const report = checkHistory(b.records);
    t.same(found(report), { 'fencing-stale-accepted': 1 });
    t.end();
  },
);

t.test('the sink refusing a stale token is counted, not a violation', (t) => {
  // A deposed leader's attempt arrives first and is refused; the new leader's is accepted.
  const b = clean({ skip: [6] })
    .delivery(J, slot(6), 6_010, { token: 5, answer: 'stale' })
    .delivery(J, slot(6), 6_020, { attempt: 2 });
  const report = checkHistory(b.records);
  t.same(found(report), {});
  t.equal(report.fencing.refusedStale, 1);
  t.equal(report.duplicates.retries, 1);
  t.end();
});

t.test('with term fencing, two tokens of one term may arrive in either order', (t) => {
  const term = 2 ** 24 * 3;
  const b = clean().setMeta({ sinkFencing: 'term' });
  b.delivery('k', slot(2), 2_050, { token: term + 2 }).delivery('k', slot(1), 2_060, {
    token: term + 1,
  });
  b.create('k', everySecond(), 0, 10, 'info');
  const report = checkHistory(b.records);
  t.equal(report.violations['fencing-stale-accepted'].count, 0);
  b.delivery('k', slot(3), 3_020, { token: 2 ** 24 * 2 + 9 });
  t.equal(checkHistory(b.records).violations['fencing-stale-accepted'].count, 1);
  t.end();
});

t.test('a first attempt later than L outside every fault window is off time', (t) => {
  const def = everySecond();
  const b = new HistoryBuilder()
    .create(J, def)
    .deliverSeconds(J, 1, 19, 20, [7])
    .delivery(J, slot(7), 8_600)
    .final(J, 20_000, readOf(J, def), HistoryBuilder.succeeded(1, 19));
  const report = checkHistory(b.records);
  t.same(found(report), { 'slot-off-time': 1 });
  t.equal(report.lag.outsideFaults.maxMs, 1_600);
  t.end();
});

t.test('late slots inside a fault window are measured there, and recovery is timed', (t) => {
  const def = everySecond();
  // The leader paused from 4 s to 8 s; slots 4..9 arrive at 9.5 s: slot 8 is late after the
  // end, slot 9 on time again.
  const b = new HistoryBuilder().create(J, def).deliverSeconds(J, 1, 3);
  for (let s = 4; s <= 9; s++) b.delivery(J, slot(s), 9_500 + s);
  b.deliverSeconds(J, 10, 19)
    .fault('p1', 'pause', 4_000, 8_000)
    .final(J, 20_000, readOf(J, def), HistoryBuilder.succeeded(1, 19));
  const report = checkHistory(b.records);
  t.same(found(report), {});
  t.equal(report.lag.insideFaults.count, 6, 'slots 4..9 s, inside [start − δ, end + R)');
  t.equal(report.lag.insideFaults.maxMs, 5_504);
  const [recovery] = report.lag.recovery;
  t.equal(recovery?.lateSlots, 1, 'slot 8 was late after the end');
  t.equal(recovery?.recoveryMs, 1_000, 'slot 9 was on time');
  t.end();
});

t.test('a step cap makes the verdict unknown, not ok', (t) => {
  const report = checkHistory(clean().records, { linearizability: { partitionStepsMax: 1 } });
  t.same(found(report), {});
  t.equal(report.verdict, 'unknown');
  t.equal(report.ok, false);
  t.same(report.register.unknownJobs, [J]);
  t.end();
});

t.test('malformed histories are refused with the problem named', (t) => {
  const noMeta = clean().records.filter((r) => r.type !== 'meta');
  t.throws(() => checkHistory(noMeta), ValidationError);

  const orphan = clean().records;
  orphan.push({ type: 'ok', t: 1, process: 99, opId: 999, f: 'get', jobId: J, value: null });
  t.throws(() => checkHistory(orphan), { code: 'CHAOS_INVALID_HISTORY', message: /never invoked/ });

  const reused = new HistoryBuilder().create(J, everySecond()).records;
  reused.push({ type: 'invoke', t: 20, process: 7, opId: 50, f: 'get', jobId: J });
  reused.push({ type: 'info', t: 30, process: 7, opId: 50, f: 'get', jobId: J });
  reused.push({ type: 'invoke', t: 40, process: 7, opId: 51, f: 'get', jobId: J });
  t.throws(() => checkHistory(reused), { message: /retire the process id/ });
  t.end();
});
