// The timing wheel against a naive oracle (a map scanned and sorted on every advance): seeded
// random schedules, moves, cancels and advances, with due times inside and far beyond the
// horizon, late inserts, and jumps longer than a whole turn of the wheel.
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { TimingWheel } from '../../../src/scheduler/timing-wheel.js';
import { DueOracle as Oracle } from './fixtures.js';

t.test('matches the oracle on seeded random operations', (t) => {
  let mismatches = 0;
  for (let seed = 1; seed <= 40; seed++) {
    const r = new SeededRand(seed);
    const start = 1_700_000_000_000 + r.int(1000);
    const wheel = new TimingWheel({
      tickMs: 1 + r.int(20),
      bucketCount: 2 + r.int(64),
      startMs: start,
    });
    const oracle = new Oracle();
    let now = start;
    for (let step = 0; step < 2000; step++) {
      const roll = r.int(10);
      const key = `k${r.int(200)}`;
      if (roll < 5) {
        // Mostly near, sometimes far beyond the horizon, sometimes already due.
        const due =
          now + (r.chance(0.1) ? -r.int(50) : r.chance(0.2) ? r.int(100_000) : r.int(500));
        wheel.schedule(key, due);
        oracle.due.set(key, due);
      } else if (roll < 7) {
        const a = wheel.cancel(key);
        const b = oracle.due.delete(key);
        if (a !== b) mismatches++;
      } else {
        now += r.chance(0.05) ? r.int(200_000) : r.int(60);
        const got = wheel.advance(now);
        const want = oracle.advance(now);
        if (JSON.stringify(got) !== JSON.stringify(want)) {
          mismatches++;
          if (mismatches < 3) t.same(got, want, `seed ${seed} step ${step} at ${now}`);
        }
      }
      if (wheel.size !== oracle.due.size) mismatches++;
    }
  }
  t.equal(mismatches, 0, 'no difference from the oracle');
  t.end();
});

t.test('scheduling a key again moves it; nextDueMs reports the earliest', (t) => {
  const w = new TimingWheel({ tickMs: 10, bucketCount: 8, startMs: 0 });
  w.schedule('a', 50);
  w.schedule('b', 10_000);
  w.schedule('a', 20_000);
  t.equal(w.size, 2);
  t.equal(w.nextDueMs(), 10_000);
  t.same(w.advance(9_999), []);
  t.same(w.advance(10_000), [{ key: 'b', dueMs: 10_000 }]);
  t.same(w.advance(30_000), [{ key: 'a', dueMs: 20_000 }]);
  t.equal(w.size, 0);
  t.end();
});

t.test('due times years away or before the start come back exact', (t) => {
  const start = 1_700_000_000_123;
  const wheel = new TimingWheel({ startMs: start });
  const dues = {
    past: start - 400 * 86_400_000 - 7,
    soon: start + 5,
    month: start + 31 * 86_400_000 + 1,
    decade: start + 3653 * 86_400_000 + 999,
  };
  for (const [key, due] of Object.entries(dues)) wheel.schedule(key, due);
  for (const [key, due] of Object.entries(dues)) t.equal(wheel.dueAt(key), due, key);
  t.equal(wheel.nextDueMs(), dues.past);
  t.same(
    wheel.advance(dues.decade).map((it) => [it.key, it.dueMs]),
    [
      ['past', dues.past],
      ['soon', dues.soon],
      ['month', dues.month],
      ['decade', dues.decade],
    ],
  );
  // Fractions of a ms (simulated clocks) come back exact too.
  const fresh = new TimingWheel({ startMs: start });
  const odd = start + 1234.5678901;
  fresh.schedule('odd', odd);
  t.equal(fresh.dueAt('odd'), odd);
  t.same(fresh.advance(odd), [{ key: 'odd', dueMs: odd }]);
  t.notOk(fresh.has('odd'));
  t.end();
});

t.test(
  'peek sees, without removing, every key inside the horizon in the range it is given',
  (t) => {
    let mismatches = 0;
    for (let seed = 1; seed <= 20; seed++) {
      const r = new SeededRand(seed);
      const tickMs = 1 + r.int(20);
      const bucketCount = 2 + r.int(64);
      const start = 1_700_000_000_000 + r.int(1000);
      const wheel = new TimingWheel({ tickMs, bucketCount, startMs: start });
      const oracle = new Oracle();
      let now = start;
      for (let step = 0; step < 500; step++) {
        for (let i = 0; i < 3; i++) {
          const key = `k${r.int(100)}`;
          const due = now + (r.chance(0.2) ? r.int(100_000) : r.int(tickMs * bucketCount));
          wheel.schedule(key, due);
          oracle.due.set(key, due);
        }
        now += r.int(tickMs * 4);
        wheel.advance(now);
        oracle.advance(now);
        // Everything due before the horizon is in the wheel after an advance.
        const from = now + 1 + r.int(tickMs * 2);
        const until = Math.floor(now / tickMs) * tickMs + tickMs * bucketCount - 1 - r.int(tickMs);
        const seen: string[] = [];
        wheel.peek(from, until, (key, dueMs) => {
          if (wheel.dueAt(key) !== dueMs) mismatches++;
          seen.push(key);
          return true;
        });
        const want = [...oracle.due]
          .filter(([, d]) => d >= from && d <= until)
          .map(([k]) => k)
          .sort();
        if (JSON.stringify(seen.sort()) !== JSON.stringify(want)) {
          mismatches++;
          if (mismatches < 3) t.same(seen, want, `seed ${seed} step ${step}`);
        }
        if (wheel.size !== oracle.due.size) mismatches++;
      }
    }
    t.equal(mismatches, 0, 'peek matches the oracle and removes nothing');
    t.end();
  },
);

t.test('peek stops when the visitor says so, and skips keys beyond the horizon', (t) => {
  const w = new TimingWheel({ tickMs: 10, bucketCount: 8, startMs: 0 });
  for (const [k, d] of [
    ['a', 10],
    ['b', 20],
    ['c', 30],
    ['far', 500],
  ] as const)
    w.schedule(k, d);
  const seen: string[] = [];
  w.peek(0, 1_000, (key) => {
    seen.push(key);
    return seen.length < 2;
  });
  t.same(seen, ['a', 'b'], 'stopped after the second');
  const all: string[] = [];
  w.peek(0, 1_000, (key) => all.push(key) > 0);
  t.same(all, ['a', 'b', 'c'], 'the key beyond the 80 ms horizon is not visited');
  t.equal(w.size, 4, 'nothing removed');
  t.end();
});
