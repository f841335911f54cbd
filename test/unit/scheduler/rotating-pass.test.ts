// A pass over the groups starts one further each time; cut by its time slice, it leaves the
// groups it did not reach to the next pass, which starts with them, and every group is reached.
import t from 'tap';
import { RotatingPass } from '../../../src/scheduler/rotating-pass.js';

/** Runs a pass; each visit costs `costMs(index)` of a clock the pass reads. */
function pass(
  rp: RotatingPass,
  count: number,
  costMs: (i: number) => number,
  sliceMs?: number,
): { order: number[]; cut: boolean; visited: number } {
  let now = 0;
  const order: number[] = [];
  const r = rp.run(
    count,
    (i) => {
      order.push(i);
      now += costMs(i);
    },
    () => now,
    sliceMs,
  );
  return { order, cut: r.cut, visited: r.visited };
}

t.test('without a slice every pass visits all, one further each time', (t) => {
  const rp = new RotatingPass();
  t.same(pass(rp, 4, () => 100).order, [1, 2, 3, 0]);
  t.same(pass(rp, 4, () => 100).order, [2, 3, 0, 1]);
  t.same(
    pass(rp, 4, () => 100),
    { order: [3, 0, 1, 2], cut: false, visited: 4 },
  );
  t.end();
});

t.test('a slice cuts the pass after the visit that used it up; the next resumes there', (t) => {
  const rp = new RotatingPass();
  // 10 ms per group, a 25 ms slice: three groups per pass.
  t.same(
    pass(rp, 7, () => 10, 25),
    { order: [1, 2, 3], cut: true, visited: 3 },
  );
  t.same(pass(rp, 7, () => 10, 25).order, [4, 5, 6], 'the groups not reached come first');
  t.same(pass(rp, 7, () => 10, 25).order, [0, 1, 2]);
  t.same(
    pass(rp, 7, () => 1, 25),
    { order: [3, 4, 5, 6, 0, 1, 2], cut: false, visited: 7 },
  );
  t.same(pass(rp, 7, () => 1, 25).order, [4, 5, 6, 0, 1, 2, 3], 'then one further again');
  t.end();
});

t.test('one slow group still lets the pass reach it and stops right after', (t) => {
  const rp = new RotatingPass();
  t.same(
    pass(rp, 3, (i) => (i === 1 ? 400 : 1), 25),
    { order: [1], cut: true, visited: 1 },
  );
  t.same(pass(rp, 3, () => 1, 25).order, [2, 0, 1], 'the others first at the next pass');
  t.end();
});

t.test('the last group never cuts (nothing is left); no groups, no visit', (t) => {
  const rp = new RotatingPass();
  t.same(
    pass(rp, 1, () => 400, 25),
    { order: [0], cut: false, visited: 1 },
  );
  t.same(
    pass(rp, 0, () => 1, 25),
    { order: [], cut: false, visited: 0 },
  );
  t.end();
});

t.test('a count that shrank between passes still visits every group once', (t) => {
  const rp = new RotatingPass();
  pass(rp, 8, () => 10, 25);
  pass(rp, 8, () => 10, 25);
  const r = pass(rp, 5, () => 1, 25);
  t.same([...r.order].sort(), [0, 1, 2, 3, 4]);
  t.end();
});
