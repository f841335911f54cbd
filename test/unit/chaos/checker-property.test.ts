// Property test of the chaos checker: seeded clean histories (several schedule kinds, both
// semantics, random fault windows, allowed at-least-once duplicates, pauses, resumes and deletes)
// must all check ok, and the same histories with one seeded corruption must be reported as that
// corruption: a dropped delivery, an at-most-once delivery repeated, a lowered token, a delivery
// after an acknowledged pause. A failure names its seed; rerun it with CHAOS_CHECK_SEED=<seed>.
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { checkHistory, type CheckReport } from '../../../chaos/checker/check-history.js';
import { renderSummary } from '../../../chaos/checker/summary.js';
import type { ViolationKind } from '../../../chaos/checker/violations.js';
import type { HistoryRecord } from '../../../chaos/history/format.js';
import { cleanHistory } from '../../helpers/chaos-clean-history.js';
import { START_EPOCH_MS } from '../../helpers/chaos-history.js';

const only = process.env['CHAOS_CHECK_SEED'];
const SEEDS = only !== undefined ? [Number(only)] : Array.from({ length: 40 }, (_, i) => 1_000 + i);

function found(report: CheckReport): ViolationKind[] {
  return Object.entries(report.violations)
    .filter(([, v]) => v.count > 0)
    .map(([kind]) => kind as ViolationKind);
}

/** Removes every delivery and run record of one slot. */
function dropSlot(
  records: readonly HistoryRecord[],
  jobId: string,
  slotMs: number,
): HistoryRecord[] {
  const keep = (r: { slotMs: number }): boolean => r.slotMs !== slotMs;
  return records.flatMap((r): HistoryRecord[] => {
    if (r.type === 'delivery') return r.jobId === jobId && r.slotMs === slotMs ? [] : [r];
    if (r.type === 'final' && r.jobId === jobId)
      return [{ ...r, runs: { ...r.runs, runs: r.runs.runs.filter(keep) } }];
    if (r.type === 'ok' && r.f === 'list-runs' && r.jobId === jobId && r.value && 'runs' in r.value)
      return [{ ...r, value: { ...r.value, runs: r.value.runs.filter(keep) } }];
    return [r];
  });
}

const exercised = { drop: 0, amo: 0, token: 0, pause: 0, faults: 0, duplicates: 0 };

t.test('clean histories check ok; each corruption is reported as itself', (t) => {
  for (const seed of SEEDS) {
    const rand = new SeededRand(seed * 7 + 1);
    const clean = cleanHistory(seed);
    const records = clean.builder.records;
    const report = checkHistory(records);
    if (!report.ok) {
      t.fail(`seed ${seed}: clean history not ok\n${renderSummary(report)}`);
      continue;
    }
    t.equal(
      report.duplicates.atLeastOnceDuplicatesAllowed,
      clean.duplicatesAllowed,
      `seed ${seed}: allowed duplicates`,
    );
    t.equal(report.slots.slotsUnobserved, 0, `seed ${seed}: every owed slot observed`);
    exercised.faults += report.counts.faults;
    exercised.duplicates += clean.duplicatesAllowed;

    const calm = clean.calmSlots[rand.int(clean.calmSlots.length)];
    if (calm) {
      exercised.drop++;
      const dropped = checkHistory(dropSlot(records, calm.jobId, calm.slotMs));
      t.same(
        found(dropped),
        ['slot-without-run'],
        `seed ${seed}: dropped ${calm.jobId}:${calm.slotMs}`,
      );
    }

    // Lower a token below every earlier accepted one (so not the job's first delivery).
    const laterSlots = clean.calmSlots.filter((s) =>
      records.some((r) => r.type === 'delivery' && r.jobId === s.jobId && r.slotMs < s.slotMs),
    );
    const low = laterSlots[rand.int(Math.max(1, laterSlots.length))];
    if (low) {
      const lowered = records.map((r) =>
        r.type === 'delivery' && r.jobId === low.jobId && r.slotMs === low.slotMs
          ? { ...r, token: 1 }
          : r,
      );
      exercised.token++;
      t.same(
        found(checkHistory(lowered)),
        ['fencing-stale-accepted'],
        `seed ${seed}: lowered token`,
      );
    }

    const amo = clean.calmSlots.filter((s) => clean.atMostOnceJobs.includes(s.jobId));
    const twice = amo[rand.int(Math.max(1, amo.length))];
    if (twice) {
      exercised.amo++;
      const b = cleanHistory(seed).builder;
      const first = records.find(
        (r) => r.type === 'delivery' && r.jobId === twice.jobId && r.slotMs === twice.slotMs,
      )!;
      b.delivery(twice.jobId, twice.slotMs, first.t + 150, { attempt: 2 });
      t.same(
        found(checkHistory(b.records)),
        ['at-most-once-duplicate'],
        `seed ${seed}: at-most-once twice`,
      );
    }

    const paused = clean.pausedJobs[rand.int(Math.max(1, clean.pausedJobs.length))];
    if (paused) {
      const at = paused.ackT + 500 + 200 + rand.int(2_000);
      if (at < paused.resumeT) {
        exercised.pause++;
        const b = cleanHistory(seed).builder;
        b.delivery(paused.jobId, START_EPOCH_MS + at - 30, at);
        t.same(
          found(checkHistory(b.records)),
          ['delivery-after-pause'],
          `seed ${seed}: delivery after pause`,
        );
      }
    }
  }
  t.comment(`exercised: ${JSON.stringify(exercised)}`);
  if (only === undefined) {
    t.ok(exercised.drop >= 30 && exercised.token >= 30, 'drops and lowered tokens on most seeds');
    t.ok(exercised.amo >= 20, 'at-most-once repeats on many seeds');
    t.ok(exercised.pause >= 5, 'deliveries after a pause on several seeds');
    t.ok(
      exercised.faults >= 20 && exercised.duplicates >= 5,
      'faults and allowed duplicates occur',
    );
  }
  t.end();
});
