/**
 * Overlap: a slot comes due while an earlier run of the same job is still in flight. The policy
 * says whether the new slot fires anyway, is recorded as a SKIPPED run, or waits in the job's
 * buffer until the run in flight finishes. Buffered slots keep their own slot (and so their fire
 * id); they are released oldest first, one at a time, whenever nothing is in flight.
 *
 * - `allow`: fire; runs may overlap.
 * - `skip`: SKIPPED while a run is in flight.
 * - `buffer_one`: buffer one slot; while one already waits, a newer slot is SKIPPED (the waiting
 *   run will catch up for both, as Temporal's BUFFER_ONE does).
 * - `buffer_all`: buffer every slot up to `bufferedCountMax`; beyond it SKIPPED, because an
 *   unbounded buffer behind a stuck run is a memory leak, not a policy.
 */
import { assert, assertNever } from '../base/assert.js';

export type OverlapPolicy =
  | { readonly kind: 'allow' }
  | { readonly kind: 'skip' }
  | { readonly kind: 'buffer_one' }
  | { readonly kind: 'buffer_all'; readonly bufferedCountMax: number };

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

function checkCounts(input: OverlapInput): void {
  assert(
    Number.isSafeInteger(input.inFlightRunCount) && input.inFlightRunCount >= 0,
    'inFlightRunCount must be a count',
  );
  assert(
    Number.isSafeInteger(input.bufferedSlotCount) && input.bufferedSlotCount >= 0,
    'bufferedSlotCount must be a count',
  );
}

function bufferOrSkip(input: OverlapInput, bufferedCountMax: number): OverlapDecision {
  // A non-empty buffer means older slots are still waiting: the new one queues behind them even
  // in the instant between a run finishing and the release of the next buffered slot.
  if (input.inFlightRunCount === 0 && input.bufferedSlotCount === 0) return FIRE;
  if (input.bufferedSlotCount < bufferedCountMax) return BUFFER;
  return { action: 'skip', reason: 'buffer_full' };
}

/** What to do with a slot that is due now. */
export function planOverlap(input: OverlapInput): OverlapDecision {
  checkCounts(input);
  const { policy } = input;
  switch (policy.kind) {
    case 'allow':
      return FIRE;
    case 'skip':
      return input.inFlightRunCount > 0 ? { action: 'skip', reason: 'run_in_flight' } : FIRE;
    case 'buffer_one':
      return bufferOrSkip(input, 1);
    case 'buffer_all':
      assert(
        Number.isSafeInteger(policy.bufferedCountMax) && policy.bufferedCountMax >= 1,
        'buffer_all needs bufferedCountMax ≥ 1',
      );
      return bufferOrSkip(input, policy.bufferedCountMax);
    default:
      return assertNever(policy, 'overlap policy');
  }
}

/** Whether the oldest buffered slot should fire now (call when a run finishes or on recovery). */
export function shouldReleaseBuffered(input: Omit<OverlapInput, 'policy'>): boolean {
  assert(input.inFlightRunCount >= 0 && input.bufferedSlotCount >= 0, 'counts must be ≥ 0');
  return input.inFlightRunCount === 0 && input.bufferedSlotCount > 0;
}
