/**
 * When a failed run tries again: exponential backoff with full jitter (the delay is uniform in
 * [0, ceiling], as in the AWS architecture blog's "full jitter"), at least what a Retry-After
 * asked for, and never past the job's attempt count or max age. Pure: randomness comes from an
 * injected Rand so the leader's choice is reproducible from a seed, and the result is carried in
 * the attempt-result command so followers never recompute it.
 *
 * Full jitter rather than "equal" or "decorrelated" jitter: when a receiver comes back after an
 * outage, the retries of thousands of runs that failed together spread evenly over the window
 * instead of arriving as a second spike.
 */
import { assertionFailed } from '../base/assert.js';
import type { FieldViolation } from '../base/errors.js';
import type { Rand } from '../base/rand.js';
import type { RetryPolicy } from '../scheduler/model.js';

/**
 * The upper end of the jitter window after attempt `attempt` (1-based) failed:
 * min(maxBackoffMs, initialBackoffMs × multiplier^(attempt − 1)), floored to whole ms.
 */
export function backoffCeilingMs(policy: RetryPolicy, attempt: number): number {
  if (!(Number.isSafeInteger(attempt) && attempt >= 1))
    assertionFailed(`attempt must be ≥ 1, got ${attempt}`);
  // The power overflows to Infinity for large attempts, which min() then caps.
  const grown = policy.initialBackoffMs * Math.pow(policy.multiplier, attempt - 1);
  return Math.floor(Math.min(policy.maxBackoffMs, grown));
}

/**
 * The delay before the next attempt: uniform over the whole ms in [0, ceiling] (both ends
 * included), raised to `retryAfterMs` when the target asked for more.
 */
export function backoffDelayMs(
  policy: RetryPolicy,
  attempt: number,
  rand: Rand,
  retryAfterMs?: number,
): number {
  const jittered = rand.int(backoffCeilingMs(policy, attempt) + 1);
  return retryAfterMs === undefined ? jittered : Math.max(jittered, Math.ceil(retryAfterMs));
}

/**
 * When the run whose attempt `attempt` just failed may be tried again (UTC ms), or undefined
 * when it must not: the attempt was the last one allowed, or the retry would start after
 * `slotMs + maxAgeMs`. No randomness is drawn for an exhausted run, so the Rand stream depends
 * only on the retries that happen.
 */
export function planRetry(
  policy: RetryPolicy,
  attempt: number,
  slotMs: number,
  nowMs: number,
  retryAfterMs: number | undefined,
  rand: Rand,
): number | undefined {
  if (validateRetryPolicy(policy).length !== 0)
    assertionFailed(`invalid retry policy ${JSON.stringify(policy)}`);
  if (!(Number.isSafeInteger(attempt) && attempt >= 1))
    assertionFailed(`attempt must be ≥ 1, got ${attempt}`);
  if (!(retryAfterMs === undefined || (Number.isFinite(retryAfterMs) && retryAfterMs >= 0)))
    assertionFailed(`retryAfterMs must be a finite number ≥ 0, got ${retryAfterMs}`);
  if (attempt >= policy.maxAttempts) return undefined;
  const deadlineMs = slotMs + policy.maxAgeMs;
  if (nowMs > deadlineMs) return undefined;
  const retryAtMs = nowMs + backoffDelayMs(policy, attempt, rand, retryAfterMs);
  return retryAtMs > deadlineMs ? undefined : retryAtMs;
}

/** Hard bounds that keep the arithmetic in safe integers; the API may apply tighter ones. */
export const RETRY_LIMITS = Object.freeze({
  maxAttemptsMax: 1_000,
  backoffMsMax: 30 * 86_400_000,
  multiplierMax: 100,
  maxAgeMsMax: 366 * 86_400_000,
});

/** Every rule a RetryPolicy breaks, with the field named under `prefix` (collect, not first). */
export function validateRetryPolicy(policy: RetryPolicy, prefix = 'retry'): FieldViolation[] {
  const violations: FieldViolation[] = [];
  const check = (field: keyof RetryPolicy, ok: boolean, reason: string): void => {
    if (!ok) violations.push({ field: `${prefix}.${field}`, reason });
  };
  const isIntIn = (v: number, lo: number, hi: number): boolean =>
    Number.isSafeInteger(v) && v >= lo && v <= hi;
  const L = RETRY_LIMITS;
  check(
    'maxAttempts',
    isIntIn(policy.maxAttempts, 1, L.maxAttemptsMax),
    `must be an integer in [1, ${L.maxAttemptsMax}]`,
  );
  check(
    'initialBackoffMs',
    isIntIn(policy.initialBackoffMs, 0, L.backoffMsMax),
    `must be an integer in [0, ${L.backoffMsMax}]`,
  );
  check(
    'maxBackoffMs',
    isIntIn(policy.maxBackoffMs, 0, L.backoffMsMax) &&
      policy.maxBackoffMs >= policy.initialBackoffMs,
    `must be an integer in [initial_backoff_ms, ${L.backoffMsMax}]`,
  );
  check(
    'multiplier',
    Number.isFinite(policy.multiplier) &&
      policy.multiplier >= 1 &&
      policy.multiplier <= L.multiplierMax,
    `must be a number in [1, ${L.multiplierMax}]`,
  );
  check(
    'maxAgeMs',
    isIntIn(policy.maxAgeMs, 0, L.maxAgeMsMax),
    `must be an integer in [0, ${L.maxAgeMsMax}]`,
  );
  return violations;
}
