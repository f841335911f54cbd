// A tenant's fires per second, held at the hand-out. Driven as the hand-out drives it: at each
// step, step(nowMs), then for each queued run of a tenant allows(tenant), and taken(tenant) for
// each run handed out; a refused run stays queued in its turn. Goal: over its rate a tenant's
// runs are delayed, never dropped (one second's worth at once, then the rate), another tenant
// is not held up, runs that waited are reported as throttled, the last complete second's counts
// are what usage shows, a rate below 1 still lets runs through, and buckets are forgotten once
// they refill. Time is passed in as numbers.
import t from 'tap';
import { TenantFireRate } from '../../../src/delivery/tenant-fire-rate.js';

const STEP_MS = 10;

interface Run {
  readonly tenant: string;
  readonly n: number;
}

/** One hand-out step: every queued run is asked for in order; refused runs stay queued. */
function handOut(rate: TenantFireRate, nowMs: number, queue: Run[]): Run[] {
  rate.step(nowMs);
  const out: Run[] = [];
  const kept: Run[] = [];
  for (const run of queue) {
    if (rate.allows(run.tenant)) {
      rate.taken(run.tenant);
      out.push(run);
    } else kept.push(run);
  }
  queue.splice(0, queue.length, ...kept);
  return out;
}

t.test('over its rate a tenant is delayed, never dropped; another tenant is on time', (t) => {
  const rates: Record<string, number> = { slow: 10, busy: 1000 };
  const throttled: string[] = [];
  const rate = new TenantFireRate(
    (tenant) => rates[tenant] ?? 1,
    (tenant) => throttled.push(tenant),
  );
  const queue: Run[] = Array.from({ length: 100 }, (_, n) => ({ tenant: 'slow', n }));
  const slowOutAt = new Map<number, number>();
  let slowHandedOut = 0;
  let handedTwice = 0;
  let busyQueued = 0;
  let busyOut = 0;
  let busyRefused = 0;
  const usage: Record<number, [number, number, number, number]> = {};
  let trackedWhileBusy = 0;
  for (let now = 0; now <= 12_000; now += STEP_MS) {
    // The busy tenant queues one run per step (100 per second, a tenth of its rate) until 10 s.
    if (now < 10_000) {
      queue.push({ tenant: 'busy', n: busyQueued++ });
    }
    for (const run of handOut(rate, now, queue)) {
      if (run.tenant === 'slow') {
        if (slowOutAt.has(run.n)) handedTwice++;
        slowOutAt.set(run.n, now);
        slowHandedOut++;
      } else busyOut++;
    }
    busyRefused += queue.filter((r) => r.tenant === 'busy').length;
    if (now % 1000 === 0)
      usage[now] = [
        rate.firedLastSecond('slow', now),
        rate.throttledLastSecond('slow', now),
        rate.firedLastSecond('busy', now),
        rate.throttledLastSecond('busy', now),
      ];
    if (now === 5000) trackedWhileBusy = rate.trackedCount;
  }

  t.equal(slowHandedOut, 100, 'every run of the slow tenant handed out');
  t.equal(handedTwice, 0, 'none twice');
  t.equal(slowOutAt.size, 100, 'each of the 100');
  t.equal(queue.length, 0, 'nothing left queued');
  const times = [...slowOutAt.entries()].sort((a, b) => a[0] - b[0]).map(([, at]) => at);
  t.same(
    times,
    [...times].sort((a, b) => a - b),
    'runs go out in their turn',
  );
  t.equal(times.filter((at) => at === 0).length, 10, 'one second’s rate at once');
  const last = Math.max(...times);
  t.ok(last >= 8_900 && last <= 9_200, `the last one out at ${last} ms, about 9 s later`);
  for (let s = 1; s < 9; s++) {
    const inSecond = times.filter((at) => at >= s * 1000 && at < (s + 1) * 1000).length;
    t.ok(inSecond >= 9 && inSecond <= 11, `second ${s}: ${inSecond} out, about 10`);
  }

  t.equal(busyOut, busyQueued, 'the busy tenant: every run out');
  t.equal(busyRefused, 0, 'the busy tenant was never refused');
  t.ok(throttled.length >= 80, `${throttled.length} runs reported as having waited`);
  t.ok(throttled.length <= 100);
  t.notOk(throttled.includes('busy'), 'none of the unthrottled tenant');

  // [slow fired, slow throttled, busy fired, busy throttled] in the last complete second.
  t.same(usage[0], [0, 0, 0, 0], 'no complete second yet');
  t.equal(usage[1000]?.[0], 19, 'second 0: the burst of 10, then 9 more at the rate');
  t.equal(usage[1000]?.[1], 9, 'of which the 9 after the burst waited');
  t.same(usage[3000], [10, 10, 100, 0], 'second 2: at the rate, all throttled; busy on time');
  t.same(usage[11_000], [0, 0, 0, 0], 'second 10: both done');

  t.ok(trackedWhileBusy >= 1, 'the slow tenant’s bucket is tracked while it waits');
  t.equal(rate.trackedCount, 0, 'forgotten once refilled and pruned');
  t.end();
});

t.test('a rate below 1 still lets one run through every 1 / rate seconds', (t) => {
  let throttled = 0;
  const rate = new TenantFireRate(
    () => 0.5,
    () => throttled++,
  );
  const queue: Run[] = Array.from({ length: 4 }, (_, n) => ({ tenant: 'tiny', n }));
  const outAt: number[] = [];
  for (let now = 0; now <= 10_000; now += STEP_MS)
    for (const run of handOut(rate, now, queue)) outAt[run.n] = now;
  t.same(
    outAt,
    [0, 2000, 4000, 6000],
    'the first at once (a bucket holds at least 1), then every 2 s',
  );
  t.equal(throttled, 3, 'the three that waited');
  t.equal(rate.trackedCount, 0, 'refilled 2 s after the last and pruned');
  t.end();
});

t.test('trackedCount follows recent activity only', (t) => {
  const rate = new TenantFireRate(() => 5);
  rate.step(0);
  t.equal(rate.trackedCount, 0, 'nobody asked');
  t.ok(rate.allows('a'));
  t.equal(rate.trackedCount, 0, 'asking alone keeps nothing');
  rate.taken('a');
  rate.taken('b');
  t.equal(rate.trackedCount, 2);
  rate.step(500);
  t.equal(rate.trackedCount, 2, 'no prune within a second of the last');
  rate.step(1000);
  t.equal(rate.trackedCount, 0, '1 s later both refilled (1 token at 5/s) and were pruned');
  t.end();
});

t.test('an infinite rate is no limit: never refused, no bucket kept, still counted', (t) => {
  const rates: Record<string, number> = { free: Infinity, capped: 1 };
  let throttled = 0;
  const rate = new TenantFireRate(
    (tenant) => rates[tenant] ?? 1,
    () => throttled++,
  );
  rate.step(0);
  let refused = 0;
  for (let i = 0; i < 10_000; i++) {
    if (rate.allows('free')) rate.taken('free');
    else refused++;
  }
  t.equal(refused, 0, '10,000 at once');
  t.equal(rate.trackedCount, 0, 'no bucket for it');
  t.equal(throttled, 0);
  rate.step(1000);
  t.equal(rate.firedLastSecond('free', 1000), 10_000, 'its fires still show in usage');

  // A limited tenant whose limit is lifted goes on at once, and its bucket is dropped.
  t.ok(rate.allows('capped'));
  rate.taken('capped');
  t.notOk(rate.allows('capped'), 'at 1 per second, the second run waits');
  t.equal(rate.trackedCount, 1);
  rates['capped'] = Infinity;
  t.ok(rate.allows('capped'), 'the lifted limit applies at the next call');
  rate.step(2000);
  t.equal(rate.trackedCount, 0, 'its bucket is pruned');
  t.end();
});
