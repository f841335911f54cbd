// The planning index against a naive oracle: each job with a next slot is due a look-ahead
// before it, and advance(now) hands out every job due by now exactly once, in (due, id) order.
// The index keeps only jobs due within the wheel's horizon and finds the others by scanning the
// job table's next-slot column; the oracle keeps every job. Seeded random creates, moves (near
// to far and back), deletes, slots removed, advances by steps from 1 ms to several horizons, and
// restores (the table replaced under the index, which reloads from it).
import t from 'tap';
import { compileJobSpec } from '../../../src/api/job-spec.js';
import { SeededRand } from '../../../src/base/rand.js';
import { JobTable } from '../../../src/scheduler/job-table.js';
import { PlanningIndex } from '../../../src/scheduler/planning-index.js';
import { Retained } from '../../../src/scheduler/retained.js';
import { DueOracle as Oracle } from './fixtures.js';

const T = Date.UTC(2026, 2, 1);
const LOOK = 3000;
const spec = new Retained().spec(
  compileJobSpec(
    { tenant: 'acme', schedule: 'every 1h', target: { url: 'http://127.0.0.1:9/h' } },
    T,
  ).spec,
);

t.test('matches the oracle on seeded random operations', (t) => {
  let mismatches = 0;
  for (let seed = 1; seed <= 40; seed++) {
    const r = new SeededRand(seed);
    const start = T + r.int(1000);
    const tickMs = 1 + r.int(20);
    const bucketCount = 2 + r.int(64);
    const jobs = new JobTable();
    const horizon = tickMs * bucketCount;
    const scanPhaseMs = r.int(horizon);
    const idx = new PlanningIndex(
      { lookAheadMs: LOOK, startMs: start, tickMs, bucketCount, scanPhaseMs },
      jobs,
    );
    const oracle = new Oracle();
    let now = start;
    const report = (what: string, got: unknown, want: unknown): void => {
      mismatches++;
      if (mismatches < 4) t.same(got, want, `seed ${seed}: ${what}`);
    };
    for (let step = 0; step < 2000; step++) {
      const roll = r.int(10);
      const id = `j${r.int(150)}`;
      if (roll < 5) {
        // A slot already due, near, or far beyond the horizon (up to 50 horizons away).
        const next =
          now +
          LOOK +
          (r.chance(0.1) ? -r.int(50) : r.chance(0.3) ? r.int(50 * horizon) : r.int(horizon));
        if (!jobs.has(id)) jobs.addNew(id, spec, '', undefined, now, next, undefined);
        else jobs.setNextFire(id, next);
        idx.schedule(id, next);
        oracle.due.set(id, next - LOOK);
      } else if (roll < 6) {
        if (jobs.has(id)) jobs.setNextFire(id, undefined);
        idx.cancel(id);
        oracle.due.delete(id);
      } else if (roll < 7) {
        jobs.delete(id);
        idx.cancel(id);
        oracle.due.delete(id);
      } else if (r.chance(0.03)) {
        // A restore: the table changes under the index, which reloads from it, jobs handed
        // out and not yet re-derived included.
        for (let k = 0; k < 5; k++) {
          const other = `j${r.int(150)}`;
          if (r.chance(0.5)) jobs.delete(other);
          else if (!jobs.has(other))
            jobs.addNew(
              other,
              spec,
              '',
              undefined,
              now,
              now + LOOK + r.int(3 * horizon),
              undefined,
            );
        }
        idx.reload();
        oracle.due.clear();
        for (const key of jobs.keys()) {
          const next = jobs.nextFireOrMissing(key);
          if (typeof next === 'number') oracle.due.set(key, next - LOOK);
        }
      } else {
        now += r.chance(0.05) ? r.int(5 * horizon) : r.int(Math.max(2, Math.floor(horizon / 8)));
        const got = idx.advance(now);
        const want = oracle.advance(now);
        if (JSON.stringify(got) !== JSON.stringify(want)) report(`advance to ${now}`, got, want);
      }
      for (const [key, due] of oracle.due)
        if (idx.dueAt(key) !== due) report(`dueAt(${key})`, idx.dueAt(key), due);
      let withSlot = 0;
      for (const key of jobs.keys()) if (jobs.nextFireOrMissing(key) !== undefined) withSlot++;
      if (idx.size !== withSlot) report('size', idx.size, withSlot);
    }
  }
  t.equal(mismatches, 0, 'no difference from the oracle');
  t.end();
});

t.test('a far job takes no wheel entry until its slot nears', (t) => {
  const jobs = new JobTable();
  const idx = new PlanningIndex({ lookAheadMs: LOOK, startMs: T }, jobs);
  const yearly = T + 365 * 86_400_000;
  for (let i = 0; i < 1000; i++) {
    jobs.addNew(`far${i}`, spec, '', undefined, T, yearly + i, undefined);
    idx.schedule(`far${i}`, yearly + i);
  }
  jobs.addNew('soon', spec, '', undefined, T, T + 10_000, undefined);
  idx.schedule('soon', T + 10_000);
  t.same(idx.advance(T), [], 'nothing due yet');
  t.equal(idx.size, 1001, 'every job with a next slot counts');
  t.equal(idx.wheelSize, 1, 'only the near one is in the wheel');
  t.equal(idx.dueAt('far7'), yearly + 7 - LOOK, 'a far job is still due, from the column');
  t.same(idx.advance(T + 7000), [{ key: 'soon', dueMs: T + 7000 }]);
  t.notOk(idx.has('soon'), 'handed out: no longer waiting');
  const got = idx.advance(yearly + 999 - LOOK);
  t.equal(got.length, 1000, 'the far jobs come out when their time comes');
  t.same(
    got.slice(0, 2).map((g) => g.key),
    ['far0', 'far1'],
    'in due order',
  );
  t.end();
});
