// SeededRand is the simulator's only source of chance: the same seed must give the same stream,
// different seeds different streams, and int() must stay inside its bound.
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';

t.test('the same seed gives the same stream', (t) => {
  const a = new SeededRand(42);
  const b = new SeededRand(42);
  const xs = Array.from({ length: 100 }, () => a.u32());
  const ys = Array.from({ length: 100 }, () => b.u32());
  t.same(xs, ys);
  t.end();
});

t.test('different seeds give different streams', (t) => {
  const a = new SeededRand(1);
  const b = new SeededRand(2);
  t.not(a.u32(), b.u32());
  t.end();
});

t.test('int stays in [0, bound) and covers it', (t) => {
  const r = new SeededRand(7);
  const seen = new Set<number>();
  let outside = 0;
  for (let i = 0; i < 10_000; i++) {
    const v = r.int(10);
    if (!(v >= 0 && v < 10 && Number.isInteger(v))) outside++;
    seen.add(v);
  }
  t.equal(outside, 0, 'every value inside [0, 10)');
  t.equal(seen.size, 10, 'every value of [0, 10) drawn');
  t.throws(() => r.int(0), RangeError);
  t.end();
});
