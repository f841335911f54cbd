// The watch reports a loop held past its threshold, once, with how long; a free loop, never.
import t from 'tap';
import { LoopStallWatch, type LoopStall } from '../../../src/observe/loop-stalls.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function holdLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // Busy: nothing else runs on the loop meanwhile, as in a long collection or handler.
  }
}

t.test('a held loop is reported once with its length; a free one is not', async (t) => {
  const seen: LoopStall[] = [];
  const watch = new LoopStallWatch(20, 300, (s) => seen.push(s));
  watch.start();
  t.teardown(() => watch.stop());
  await sleep(300);
  t.same(seen, [], 'free loop: nothing reported');
  const before = Date.now();
  holdLoop(700);
  await sleep(100);
  t.equal(seen.length, 1, 'one report for one hold');
  t.ok(seen[0]!.lateMs >= 680 - 20, `late by about the hold (${seen[0]!.lateMs} ms)`);
  t.ok(seen[0]!.endedAtMs >= before + 680, 'reported as ended after the hold');
  t.equal(watch.stalls, 1);
});

t.test('bad settings are refused by name', (t) => {
  t.throws(() => new LoopStallWatch(0, 10, () => undefined), /everyMs must be positive/);
  t.throws(() => new LoopStallWatch(10, -1, () => undefined), /thresholdMs must be positive/);
  t.end();
});
