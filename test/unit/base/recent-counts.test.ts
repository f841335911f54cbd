// Counts by key over whole seconds: lastSecond() is what was counted in the last complete second
// before now (not the second in progress), a second with nothing counted (or skipped) reads 0,
// and keys are counted apart. Time is passed in as numbers.
import t from 'tap';
import { RecentCounts } from '../../../src/base/recent-counts.js';

t.test('reports the last complete second, not the one in progress', (t) => {
  const c = new RecentCounts();
  t.equal(c.lastSecond('a', 0), 0, 'nothing counted yet');
  c.add('a', 0);
  c.add('a', 400);
  c.add('a', 999, 3);
  t.equal(c.lastSecond('a', 999), 0, 'second 0 is still in progress');
  t.equal(c.lastSecond('a', 1000), 5, 'second 0 is complete: 1 + 1 + 3');
  c.add('a', 1500, 2);
  t.equal(c.lastSecond('a', 1999), 5, 'unchanged during second 1');
  t.equal(c.lastSecond('a', 2000), 2, 'second 1');
  t.equal(c.lastSecond('a', 2999), 2);
  t.equal(c.lastSecond('a', 3000), 0, 'second 2 counted nothing');
  t.end();
});

t.test('a skipped second gives 0', (t) => {
  const c = new RecentCounts();
  c.add('a', 5_100, 7);
  t.equal(c.lastSecond('a', 6_000), 7);
  // Nothing called during second 6: at second 7 the last complete second is 6, not 5.
  t.equal(c.lastSecond('a', 7_000), 0, 'the last call was in second 6');
  const d = new RecentCounts();
  d.add('a', 5_100, 7);
  t.equal(d.lastSecond('a', 7_200), 0, 'no call at all during second 6');
  d.add('a', 7_300);
  t.equal(d.lastSecond('a', 8_000), 1, 'counting goes on after the gap');
  d.add('a', 8_000, 4);
  t.equal(d.lastSecond('a', 60_000), 0, 'a long gap');
  t.end();
});

t.test('keys are counted apart', (t) => {
  const c = new RecentCounts();
  c.add('a', 100, 3);
  c.add('b', 200);
  c.add('a', 300);
  c.add('b', 1100, 9);
  t.equal(c.lastSecond('a', 1200), 4);
  t.equal(c.lastSecond('b', 1200), 1);
  t.equal(c.lastSecond('c', 1200), 0, 'a key never counted');
  t.equal(c.lastSecond('a', 2000), 0, 'a counted nothing in second 1');
  t.equal(c.lastSecond('b', 2000), 9);
  t.end();
});
