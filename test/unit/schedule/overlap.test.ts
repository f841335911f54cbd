// planOverlap decides what a due slot does while runs of its job are still in flight. Method: a
// decision table per policy over in-flight and buffered counts (with the default limit of 1 and
// with maxConcurrency 2 and 3), then a small simulation of slots and run completions that checks
// what each policy promises: nothing is lost (every slot fires, is buffered or is SKIPPED),
// buffers respect their bound, buffered slots fire in order, and no more than maxConcurrency
// runs are ever in flight.
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import {
  maxConcurrencyOfPolicy,
  planOverlap,
  releasableBuffered,
  shouldReleaseBuffered,
} from '../../../src/schedule/overlap.js';
import type { OverlapDecision, OverlapPolicy } from '../../../src/schedule/overlap.js';

const FIRE: OverlapDecision = { action: 'fire' };
const BUFFER: OverlapDecision = { action: 'buffer' };
const SKIP_IN_FLIGHT: OverlapDecision = { action: 'skip', reason: 'run_in_flight' };
const SKIP_FULL: OverlapDecision = { action: 'skip', reason: 'buffer_full' };

const allow: OverlapPolicy = { kind: 'allow' };
const skip: OverlapPolicy = { kind: 'skip' };
const bufferOne: OverlapPolicy = { kind: 'buffer_one' };
const bufferAll: OverlapPolicy = { kind: 'buffer_all', bufferedCountMax: 3 };
const skip2: OverlapPolicy = { kind: 'skip', maxConcurrency: 2 };
const bufferOne2: OverlapPolicy = { kind: 'buffer_one', maxConcurrency: 2 };
const bufferAll3: OverlapPolicy = { kind: 'buffer_all', bufferedCountMax: 3, maxConcurrency: 3 };

t.test('decision table', (t) => {
  const table: readonly [OverlapPolicy, number, number, OverlapDecision][] = [
    [allow, 0, 0, FIRE],
    [allow, 5, 0, FIRE],
    [skip, 0, 0, FIRE],
    [skip, 1, 0, SKIP_IN_FLIGHT],
    [bufferOne, 0, 0, FIRE],
    [bufferOne, 1, 0, BUFFER],
    [bufferOne, 1, 1, SKIP_FULL],
    [bufferOne, 0, 1, SKIP_FULL],
    [bufferAll, 0, 0, FIRE],
    [bufferAll, 1, 0, BUFFER],
    [bufferAll, 1, 2, BUFFER],
    [bufferAll, 1, 3, SKIP_FULL],
    [bufferAll, 0, 2, BUFFER],
    // maxConcurrency N: the slot fires while fewer than N are in flight.
    [skip2, 0, 0, FIRE],
    [skip2, 1, 0, FIRE],
    [skip2, 2, 0, SKIP_IN_FLIGHT],
    [skip2, 5, 0, SKIP_IN_FLIGHT],
    [bufferOne2, 1, 0, FIRE],
    [bufferOne2, 2, 0, BUFFER],
    [bufferOne2, 2, 1, SKIP_FULL],
    [bufferOne2, 1, 1, SKIP_FULL],
    [bufferAll3, 2, 0, FIRE],
    [bufferAll3, 3, 0, BUFFER],
    [bufferAll3, 3, 2, BUFFER],
    [bufferAll3, 3, 3, SKIP_FULL],
    [bufferAll3, 1, 1, BUFFER],
  ];
  for (const [policy, inFlightRunCount, bufferedSlotCount, expected] of table) {
    t.same(
      planOverlap({ policy, inFlightRunCount, bufferedSlotCount }),
      expected,
      `${policy.kind} (max ${maxConcurrencyOfPolicy(policy)}), ${inFlightRunCount} in flight, ${bufferedSlotCount} buffered`,
    );
  }
  t.end();
});

t.test('buffered slots are released one at a time when nothing is in flight', (t) => {
  t.equal(shouldReleaseBuffered({ inFlightRunCount: 0, bufferedSlotCount: 2 }), true);
  t.equal(shouldReleaseBuffered({ inFlightRunCount: 1, bufferedSlotCount: 2 }), false);
  t.equal(shouldReleaseBuffered({ inFlightRunCount: 0, bufferedSlotCount: 0 }), false);
  t.equal(releasableBuffered({ inFlightRunCount: 0, bufferedSlotCount: 2 }), 1, 'default limit 1');
  t.end();
});

t.test('with maxConcurrency N, as many are released as there is room for under N', (t) => {
  const max = 3;
  t.equal(
    releasableBuffered({ inFlightRunCount: 0, bufferedSlotCount: 5, maxConcurrency: max }),
    3,
  );
  t.equal(
    releasableBuffered({ inFlightRunCount: 1, bufferedSlotCount: 5, maxConcurrency: max }),
    2,
  );
  t.equal(
    releasableBuffered({ inFlightRunCount: 2, bufferedSlotCount: 1, maxConcurrency: max }),
    1,
  );
  t.equal(
    releasableBuffered({ inFlightRunCount: 3, bufferedSlotCount: 5, maxConcurrency: max }),
    0,
  );
  t.equal(
    releasableBuffered({ inFlightRunCount: 4, bufferedSlotCount: 5, maxConcurrency: max }),
    0,
    'over the limit (it was lowered): none, never a negative count',
  );
  t.equal(
    shouldReleaseBuffered({ inFlightRunCount: 1, bufferedSlotCount: 2, maxConcurrency: 2 }),
    true,
  );
  t.equal(maxConcurrencyOfPolicy(allow), Number.POSITIVE_INFINITY, 'allow has no limit');
  t.equal(maxConcurrencyOfPolicy(skip), 1, 'absent: 1, what the policies always meant');
  t.end();
});

t.test('bad counts and caps are programmer errors', (t) => {
  t.throws(() => planOverlap({ policy: allow, inFlightRunCount: -1, bufferedSlotCount: 0 }));
  t.throws(() =>
    planOverlap({
      policy: { kind: 'buffer_all', bufferedCountMax: 0 },
      inFlightRunCount: 1,
      bufferedSlotCount: 0,
    }),
  );
  for (const maxConcurrency of [0, 1.5, -1])
    t.throws(
      () =>
        planOverlap({
          policy: { kind: 'skip', maxConcurrency },
          inFlightRunCount: 0,
          bufferedSlotCount: 0,
        }),
      `maxConcurrency ${maxConcurrency}`,
    );
  t.end();
});

interface Outcome {
  fired: number[];
  skipped: number[];
  bufferedMax: number;
  concurrentMax: number;
}

/**
 * Slots every 10 ticks; each run lasts a random 1–35 ticks (N times that under a limit of N, so
 * that N runs together still fall behind and the buffer fills); completions release the buffer.
 */
function simulate(policy: OverlapPolicy, seed: number): Outcome {
  const r = new SeededRand(seed);
  const limit = maxConcurrencyOfPolicy(policy);
  const runTicksMax = 35 * (Number.isFinite(limit) ? limit : 1);
  const running: number[] = []; // end ticks
  const buffer: number[] = [];
  const outcome: Outcome = { fired: [], skipped: [], bufferedMax: 0, concurrentMax: 0 };
  const start = (slot: number, tick: number): void => {
    outcome.fired.push(slot);
    running.push(tick + 1 + r.int(runTicksMax));
    outcome.concurrentMax = Math.max(outcome.concurrentMax, running.length);
  };
  for (let tick = 0; tick < 2000; tick++) {
    for (let i = running.length - 1; i >= 0; i--)
      if ((running[i] ?? 0) <= tick) running.splice(i, 1);
    const maxConcurrency = policy.kind === 'allow' ? undefined : policy.maxConcurrency;
    let release = releasableBuffered({
      inFlightRunCount: running.length,
      bufferedSlotCount: buffer.length,
      ...(maxConcurrency !== undefined && { maxConcurrency }),
    });
    while (release-- > 0) start(buffer.shift() ?? -1, tick);
    if (tick % 10 !== 0) continue;
    const decision = planOverlap({
      policy,
      inFlightRunCount: running.length,
      bufferedSlotCount: buffer.length,
    });
    if (decision.action === 'fire') start(tick, tick);
    else if (decision.action === 'buffer') buffer.push(tick);
    else outcome.skipped.push(tick);
    outcome.bufferedMax = Math.max(outcome.bufferedMax, buffer.length);
  }
  outcome.skipped.push(...buffer.splice(0)); // still waiting at the end: neither lost nor fired
  return outcome;
}

t.test('simulated slots: nothing lost, bounds kept, order kept', (t) => {
  for (const policy of [allow, skip, bufferOne, bufferAll, skip2, bufferOne2, bufferAll3]) {
    const max = maxConcurrencyOfPolicy(policy);
    const name = `${policy.kind} (max ${max})`;
    const o = simulate(policy, 41);
    const accounted = [...o.fired, ...o.skipped].sort((a, b) => a - b);
    t.same(
      accounted,
      Array.from({ length: 200 }, (_, i) => i * 10),
      `${name}: every slot`,
    );
    t.same(
      o.fired,
      [...o.fired].sort((a, b) => a - b),
      `${name}: fired in slot order`,
    );
    if (policy.kind !== 'allow')
      t.equal(o.concurrentMax, max, `${name}: up to ${max} in flight, never more`);
    else t.ok(o.concurrentMax > 1, 'allow: overlaps happen');
    if (policy.kind === 'skip') t.equal(o.bufferedMax, 0, `${name}: never buffers`);
    if (policy.kind === 'buffer_one') t.equal(o.bufferedMax, 1, `${name}: holds one`);
    if (policy.kind === 'buffer_all') t.equal(o.bufferedMax, 3, `${name}: fills to its cap`);
  }
  t.end();
});
