/**
 * Overlap: a slot comes due while earlier runs of the same job are still in flight. Every policy
 * but `allow` bounds how many runs of the job may be in flight at once, `maxConcurrency` (1 when
 * not given, what these policies always meant); the policy says what happens to a slot that
 * comes due while that many are: it is recorded as a SKIPPED run, or waits in the job's buffer
 * until a run in flight finishes. Buffered slots keep their own slot (and so their fire id); they
 * are released oldest first, as many as there is room for, whenever fewer than `maxConcurrency`
 * runs are in flight.
 *
 * - `allow`: fire; runs may overlap without limit.
 * - `skip`: SKIPPED (`run_in_flight`) while `maxConcurrency` runs are in flight.
 * - `buffer_one`: buffer one slot; while one already waits, a newer slot is SKIPPED
 *   (`buffer_full`: the waiting run will catch up for both, as Temporal's BUFFER_ONE does).
 * - `buffer_all`: buffer every slot up to `bufferedCountMax`; beyond it SKIPPED (`buffer_full`),
 *   because an unbounded buffer behind a stuck run is a memory leak, not a policy.
 *
 * A slot that finds the job full is SKIPPED with `run_in_flight` whatever the limit, not with a
 * reason of its own (`max_concurrency`): under the default limit of 1 the two would name the
 * same event, readers of runs (the docs, the chaos checker) already take `run_in_flight` to mean
 * it, and the limit it hit is in the job's definition.
 */
import { assert, assertNever } from '../base/assert.js';

export type OverlapPolicy =
  | { readonly kind: 'allow' }
  | { readonly kind: 'skip'; readonly maxConcurrency?: number }
  | { readonly kind: 'buffer_one'; readonly maxConcurrency?: number }
  | {
      readonly kind: 'buffer_all';
      readonly bufferedCountMax: number;
      readonly maxConcurrency?: number;
    };

export type SkippedReason = 'run_in_flight' | 'buffer_full';

export type OverlapDecision =
  | { readonly action: 'fire' }
  | { readonly action: 'buffer' }
  | { readonly action: 'skip'; readonly reason: SkippedReason };

export interface OverlapInput {
  readonly policy: OverlapPolicy;
  /** Runs of the job dispatched or running and not yet finished. */
  readonly inFlightRunCount: number;
  /** Slots of the job waiting in its buffer. */
  readonly bufferedSlotCount: number;
}

const FIRE: OverlapDecision = { action: 'fire' };
const BUFFER: OverlapDecision = { action: 'buffer' };
const RUN_IN_FLIGHT: OverlapDecision = { action: 'skip', reason: 'run_in_flight' };

function checkCounts(input: Omit<OverlapInput, 'policy'>): void {
  assert(
    Number.isSafeInteger(input.inFlightRunCount) && input.inFlightRunCount >= 0,
    'inFlightRunCount must be a count',
  );
  assert(
    Number.isSafeInteger(input.bufferedSlotCount) && input.bufferedSlotCount >= 0,
    'bufferedSlotCount must be a count',
  );
}

/** The policy's limit on runs in flight: 1 when not given, infinity for allow. */
export function maxConcurrencyOfPolicy(policy: OverlapPolicy): number {
  if (policy.kind === 'allow') return Number.POSITIVE_INFINITY;
  const max = policy.maxConcurrency ?? 1;
  assert(Number.isSafeInteger(max) && max >= 1, 'maxConcurrency must be an integer ≥ 1');
  return max;
}

function bufferOrSkip(
  input: OverlapInput,
  bufferedCountMax: number,
  maxConcurrency: number,
): OverlapDecision {
  // A non-empty buffer means older slots are still waiting: the new one queues behind them even
  // in the instant between a run finishing and the release of the next buffered slot.
  if (input.inFlightRunCount < maxConcurrency && input.bufferedSlotCount === 0) return FIRE;
  if (input.bufferedSlotCount < bufferedCountMax) return BUFFER;
  return { action: 'skip', reason: 'buffer_full' };
}

/** What to do with a slot that is due now. */
export function planOverlap(input: OverlapInput): OverlapDecision {
  checkCounts(input);
  const { policy } = input;
  const maxConcurrency = maxConcurrencyOfPolicy(policy);
  switch (policy.kind) {
    case 'allow':
      return FIRE;
    case 'skip':
      return input.inFlightRunCount >= maxConcurrency ? RUN_IN_FLIGHT : FIRE;
    case 'buffer_one':
      return bufferOrSkip(input, 1, maxConcurrency);
    case 'buffer_all':
      assert(
        Number.isSafeInteger(policy.bufferedCountMax) && policy.bufferedCountMax >= 1,
        'buffer_all needs bufferedCountMax ≥ 1',
      );
      return bufferOrSkip(input, policy.bufferedCountMax, maxConcurrency);
    default:
      return assertNever(policy, 'overlap policy');
  }
}

/**
 * How many buffered slots should fire now, oldest first (ask when a run finishes or on
 * recovery): as many as there is room for under the limit, at most as many as wait.
 */
export function releasableBuffered(
  input: Omit<OverlapInput, 'policy'> & { readonly maxConcurrency?: number },
): number {
  checkCounts(input);
  const max = input.maxConcurrency ?? 1;
  assert(max >= 1, 'maxConcurrency must be ≥ 1');
  return Math.max(0, Math.min(input.bufferedSlotCount, max - input.inFlightRunCount));
}

/** Whether the oldest buffered slot should fire now (call when a run finishes or on recovery). */
export function shouldReleaseBuffered(
  input: Omit<OverlapInput, 'policy'> & { readonly maxConcurrency?: number },
): boolean {
  return releasableBuffered(input) > 0;
}
