// Retry planning. Goal: the delay after attempt n is uniform over [0, min(max, initial ×
// multiplier^(n−1))], never below a Retry-After, and planRetry gives up exactly when the attempts
// are used up or the retry would start after slot + max age. Method: exact checks of the
// ceiling sequence; bounds over many seeded draws; a bucket count of 200,000 draws from
// SeededRand against the uniform expectation (fixed seed, so the check is deterministic); a
// Rand stub that returns the extremes; and a table of rejected policies.
import t from 'tap';
import { AssertionError } from '../../../src/base/assert.js';
import { SeededRand, type Rand } from '../../../src/base/rand.js';
import {
  backoffCeilingMs,
  backoffDelayMs,
  planRetry,
  validateRetryPolicy,
} from '../../../src/delivery/backoff.js';
import type { RetryPolicy } from '../../../src/scheduler/model.js';

const policy: RetryPolicy = {
  maxAttempts: 8,
  initialBackoffMs: 1000,
  maxBackoffMs: 30_000,
  multiplier: 2,
  maxAgeMs: 3_600_000,
};

/** Always the top (or bottom) of the range asked for. */
const extreme = (top: boolean): Rand => ({
  int: (bound) => (top ? bound - 1 : 0),
  float: () => (top ? 1 - Number.EPSILON : 0),
});

t.test('the ceiling grows exponentially and stops at maxBackoffMs', (t) => {
  const ceilings = [1, 2, 3, 4, 5, 6, 7, 8, 50, 5000].map((n) => backoffCeilingMs(policy, n));
  t.strictSame(ceilings, [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000, 30_000, 30_000]);
  const fractional = { ...policy, initialBackoffMs: 100, multiplier: 1.5 };
  t.strictSame(
    [1, 2, 3, 4].map((n) => backoffCeilingMs(fractional, n)),
    [100, 150, 225, 337],
    'a fractional multiplier is floored to whole ms',
  );
  t.equal(backoffCeilingMs({ ...policy, multiplier: 1 }, 20), 1000, 'multiplier 1 is constant');
  t.throws(() => backoffCeilingMs(policy, 0), AssertionError);
  t.end();
});

t.test('delays stay inside [0, ceiling] and reach both ends', (t) => {
  const rand = new SeededRand(7);
  for (let attempt = 1; attempt <= 8; attempt++) {
    const ceiling = backoffCeilingMs(policy, attempt);
    let lo = Infinity;
    let hi = -Infinity;
    let fractionalCount = 0;
    for (let i = 0; i < 2000; i++) {
      const d = backoffDelayMs(policy, attempt, rand);
      if (!Number.isInteger(d)) fractionalCount++;
      lo = Math.min(lo, d);
      hi = Math.max(hi, d);
    }
    t.equal(fractionalCount, 0, `attempt ${attempt}: whole ms`);
    t.ok(lo >= 0 && hi <= ceiling, `attempt ${attempt}: [${lo}, ${hi}] ⊆ [0, ${ceiling}]`);
    // 2000 draws spread over the window come close to both ends.
    t.ok(lo <= ceiling * 0.01 && hi >= ceiling * 0.99, `attempt ${attempt}: spans the window`);
  }
  t.equal(backoffDelayMs(policy, 3, extreme(false)), 0, 'full jitter can retry at once');
  t.equal(backoffDelayMs(policy, 3, extreme(true)), 4000, 'and up to the ceiling, inclusive');
  t.end();
});

t.test('full jitter is uniform over the window', (t) => {
  const rand = new SeededRand(20240310);
  const attempt = 5; // ceiling 16,000 ms
  const ceiling = backoffCeilingMs(policy, attempt);
  const bucketCount = 10;
  const buckets = new Array<number>(bucketCount).fill(0);
  const draws = 200_000;
  let sum = 0;
  for (let i = 0; i < draws; i++) {
    const d = backoffDelayMs(policy, attempt, rand);
    sum += d;
    const i = Math.min(bucketCount - 1, Math.floor((d / (ceiling + 1)) * bucketCount));
    buckets[i] = (buckets[i] ?? 0) + 1;
  }
  const expected = draws / bucketCount;
  for (const [i, count] of buckets.entries()) {
    t.ok(Math.abs(count - expected) < expected * 0.03, `bucket ${i}: ${count} ≈ ${expected}`);
  }
  const mean = sum / draws;
  t.ok(Math.abs(mean - ceiling / 2) < ceiling * 0.01, `mean ${mean.toFixed(0)} ≈ ${ceiling / 2}`);
  // Chi-squared with 9 degrees of freedom: 21.67 is the 99% quantile.
  const chi2 = buckets.reduce((acc, c) => acc + (c - expected) ** 2 / expected, 0);
  t.ok(chi2 < 21.67, `chi² ${chi2.toFixed(2)} < 21.67`);
  t.end();
});

t.test('Retry-After is a floor, not a replacement', (t) => {
  t.equal(backoffDelayMs(policy, 1, extreme(false), 5000), 5000, 'raised to Retry-After');
  t.equal(backoffDelayMs(policy, 3, extreme(true), 500), 4000, 'a larger jitter wins');
  t.equal(backoffDelayMs(policy, 1, extreme(false), 0), 0);
  t.equal(backoffDelayMs(policy, 1, extreme(false), 1.2), 2, 'rounded up to whole ms');
  const slot = 1_000_000;
  t.equal(
    planRetry(policy, 1, slot, slot + 10, 120_000, extreme(false)),
    slot + 10 + 120_000,
    'Retry-After larger than the whole backoff range',
  );
  t.end();
});

t.test('planRetry gives up when the attempts are used up', (t) => {
  const slot = 5_000_000;
  const now = slot + 100;
  for (let attempt = 1; attempt < policy.maxAttempts; attempt++) {
    const at = planRetry(policy, attempt, slot, now, undefined, new SeededRand(attempt));
    t.ok(
      at !== undefined && at >= now && at <= now + backoffCeilingMs(policy, attempt),
      `${attempt}`,
    );
  }
  t.equal(planRetry(policy, 8, slot, now, undefined, new SeededRand(1)), undefined, 'last one');
  t.equal(planRetry(policy, 9, slot, now, undefined, new SeededRand(1)), undefined, 'beyond');
  t.equal(
    planRetry({ ...policy, maxAttempts: 1 }, 1, slot, now, undefined, new SeededRand(1)),
    undefined,
    'maxAttempts 1 never retries',
  );

  // An exhausted run draws no randomness: the stream stays aligned for the runs that retry.
  let draws = 0;
  const counting: Rand = {
    int: (b) => {
      draws++;
      return b - 1;
    },
    float: () => 0,
  };
  planRetry(policy, 8, slot, now, undefined, counting);
  t.equal(draws, 0);
  t.end();
});

t.test('planRetry gives up when the retry would pass the max age', (t) => {
  const slot = 10_000_000;
  const p = { ...policy, maxAgeMs: 60_000 };
  // 5 s before the limit, a delay of up to 4 s (attempt 3) always fits.
  t.equal(planRetry(p, 3, slot, slot + 55_000, undefined, extreme(true)), slot + 59_000);
  // A delay that would land 1 ms after the limit does not.
  t.equal(planRetry(p, 3, slot, slot + 56_001, undefined, extreme(true)), undefined);
  // Landing exactly on the limit is allowed (the state machine's rule: retryAt − slot ≤ maxAge).
  t.equal(planRetry(p, 3, slot, slot + 56_000, undefined, extreme(true)), slot + 60_000);
  // Already past the limit.
  t.equal(planRetry(p, 1, slot, slot + 60_001, undefined, extreme(false)), undefined);
  // A Retry-After beyond the limit gives up rather than retrying early.
  t.equal(planRetry(p, 1, slot, slot + 1000, 3_600_000, extreme(false)), undefined);
  t.equal(planRetry({ ...p, maxAgeMs: 0 }, 1, slot, slot, undefined, extreme(false)), slot);
  t.end();
});

t.test('same seed, same plan', (t) => {
  const plan = (seed: number): (number | undefined)[] => {
    const r = new SeededRand(seed);
    return [1, 2, 3, 4, 5].map((a) => planRetry(policy, a, 0, 1000, undefined, r));
  };
  t.strictSame(plan(42), plan(42));
  t.notSame(plan(42), plan(43));
  t.end();
});

t.test('invalid policies are rejected with every field named', (t) => {
  const cases: [string, Partial<RetryPolicy>, string[]][] = [
    ['zero attempts', { maxAttempts: 0 }, ['retry.maxAttempts']],
    ['fractional attempts', { maxAttempts: 2.5 }, ['retry.maxAttempts']],
    ['negative initial', { initialBackoffMs: -1 }, ['retry.initialBackoffMs']],
    ['max below initial', { initialBackoffMs: 5000, maxBackoffMs: 1000 }, ['retry.maxBackoffMs']],
    ['shrinking multiplier', { multiplier: 0.5 }, ['retry.multiplier']],
    ['NaN multiplier', { multiplier: NaN }, ['retry.multiplier']],
    ['infinite max age', { maxAgeMs: Infinity }, ['retry.maxAgeMs']],
    [
      'several at once',
      { maxAttempts: -1, multiplier: 0, maxAgeMs: -5 },
      ['retry.maxAttempts', 'retry.multiplier', 'retry.maxAgeMs'],
    ],
  ];
  t.strictSame(validateRetryPolicy(policy), []);
  for (const [what, patch, fields] of cases) {
    const violations = validateRetryPolicy({ ...policy, ...patch });
    t.strictSame(
      violations.map((v) => v.field),
      fields,
      what,
    );
  }
  t.throws(
    () => planRetry({ ...policy, maxAttempts: 0 }, 1, 0, 0, undefined, new SeededRand(1)),
    AssertionError,
    'planRetry asserts: a stored policy was validated when the job was written',
  );
  t.throws(() => planRetry(policy, 1, 0, 0, -1, new SeededRand(1)), AssertionError);
  t.end();
});
