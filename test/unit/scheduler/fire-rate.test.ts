// FireRateMeter: first attempts per second over a sliding minute, with the time passed in. What
// the meta leader relies on to split by --split-fire-rate: a steady rate reads as itself, a
// single busy second is smoothed out, old fires leave the window, a reset forgets them, and
// the first seconds after a reset never read high.
import t from 'tap';
import { FireRateMeter } from '../../../src/scheduler/fire-rate.js';
import { splitBoundPassed } from '../../../src/cluster/split-admin.js';

const T0 = 1_700_000_000_000;

/** `perSec` fires in each second of [fromMs, toMs), spread over the second. */
function fireSteadily(m: FireRateMeter, fromMs: number, toMs: number, perSec: number): void {
  for (let s = fromMs; s < toMs; s += 1000)
    for (let i = 0; i < perSec; i++) m.record(s + Math.floor((i * 1000) / perSec));
}

t.test('a steady rate reads as itself once the window is full', (t) => {
  const m = new FireRateMeter(T0);
  fireSteadily(m, T0, T0 + 120_000, 5);
  t.equal(m.ratePerSec(T0 + 120_000), 5);
  // Half a second later the window is seconds 61..120 so far: 59 full ones and half of one
  // without fires yet.
  t.equal(m.ratePerSec(T0 + 120_500), (5 * 59) / 59.5, 'the window covers what time has passed');
  t.end();
});

t.test('before a full window the rate is over the time measured, at least 10 s', (t) => {
  const m = new FireRateMeter(T0);
  fireSteadily(m, T0, T0 + 20_000, 4);
  t.equal(m.ratePerSec(T0 + 20_000), 4, '80 fires in 20 s');
  const early = new FireRateMeter(T0);
  fireSteadily(early, T0, T0 + 2000, 50);
  t.equal(early.ratePerSec(T0 + 2000), 10, '100 fires in the first 2 s read over 10 s, not 50/s');
  t.end();
});

t.test('a one-second spike is smoothed over the minute', (t) => {
  const m = new FireRateMeter(T0);
  fireSteadily(m, T0, T0 + 60_000, 1);
  m.record(T0 + 60_000, 600);
  t.ok(m.ratePerSec(T0 + 60_999) < 12, `600 fires in one second add about 10/s`);
  t.ok(m.ratePerSec(T0 + 60_999) > 10);
  t.end();
});

t.test('fires older than the window no longer count', (t) => {
  const m = new FireRateMeter(T0);
  fireSteadily(m, T0, T0 + 30_000, 10);
  t.equal(m.ratePerSec(T0 + 30_000), 10);
  // Nothing fires for the next minute and a half: the rate falls, then reads zero.
  t.ok(m.ratePerSec(T0 + 60_000) < 10 && m.ratePerSec(T0 + 60_000) > 0, 'still partly counted');
  t.equal(m.ratePerSec(T0 + 91_000), 0, 'all of it has left the window');
  // The ring slots are reused: new fires are not added to the old counts.
  fireSteadily(m, T0 + 120_000, T0 + 180_000, 2);
  t.equal(m.ratePerSec(T0 + 180_000), 2);
  t.end();
});

t.test('a reset forgets what was counted', (t) => {
  const m = new FireRateMeter(T0);
  fireSteadily(m, T0, T0 + 60_000, 20);
  m.reset(T0 + 60_000);
  t.equal(m.ratePerSec(T0 + 60_000), 0);
  fireSteadily(m, T0 + 60_000, T0 + 90_000, 3);
  t.equal(m.ratePerSec(T0 + 90_000), 3, 'only the fires since the reset, over the time since');
  t.end();
});

t.test("a new leader's catch-up of slots due before it led does not count", (t) => {
  const m = new FireRateMeter(T0);
  m.reset(T0 + 30_000);
  // 30 s of slots missed while the group had no leader, handed out at once now (fire_all).
  m.record(T0 + 5000, 300);
  for (let s = 0; s < 30; s++) m.record(T0 + s * 1000, 10);
  t.equal(m.ratePerSec(T0 + 30_500), 0, 'slots before the reset are not this leader’s rate');
  fireSteadily(m, T0 + 30_000, T0 + 50_000, 2);
  t.equal(m.ratePerSec(T0 + 50_000), 2);
  t.end();
});

t.test('a fire counts at its slot, so a late hand-out is not a burst', (t) => {
  const m = new FireRateMeter(T0);
  // Slots of 20 s at 3/s, all handed out late, at the end: counted in their own seconds.
  fireSteadily(m, T0, T0 + 20_000, 3);
  t.equal(m.ratePerSec(T0 + 20_000), 3);
  // A slot older than the ring holds is dropped, and does not wipe a newer second's count.
  fireSteadily(m, T0 + 20_000, T0 + 80_000, 3);
  m.record(T0 + 500, 1000);
  t.equal(m.ratePerSec(T0 + 80_000), 3);
  t.end();
});

t.test('a clock that steps back counts nothing from the future', (t) => {
  const m = new FireRateMeter(T0);
  fireSteadily(m, T0, T0 + 30_000, 2);
  const back = T0 + 10_000;
  t.equal(m.ratePerSec(back), (2 * 11 * 1000) / 10_000, 'only the seconds up to the clock');
  t.end();
});

t.test('options are checked', (t) => {
  t.throws(() => new FireRateMeter(T0, { bucketMs: 0 }), RangeError);
  t.throws(() => new FireRateMeter(T0, { windowMs: 10, bucketMs: 1000 }), RangeError);
  t.end();
});

t.test('which bound a group passes', (t) => {
  t.equal(splitBoundPassed(10, 100, 0, 0), undefined, 'both off');
  t.equal(splitBoundPassed(7, 0, 6, 0), '--split-jobs');
  t.equal(splitBoundPassed(6, 0, 6, 0), undefined, 'at the bound is not above it');
  t.equal(splitBoundPassed(1, 3.5, 1_000_000, 3), '--split-fire-rate');
  t.equal(splitBoundPassed(1, 3, 1_000_000, 3), undefined);
  t.equal(splitBoundPassed(9, 9, 6, 3), '--split-jobs', 'job count named first');
  t.end();
});
