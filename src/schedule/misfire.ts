/**
 * Misfires: slots that came due while nobody could fire them (the whole cluster was down, or a
 * job was paused past its slots). Given the job's `nextFireAt` in the past, this decides, slot by
 * slot, which fire now and which are recorded as MISSED runs, so none is dropped silently.
 *
 * Each due slot s (nextFireAt ≤ s ≤ now) has a lateness `now − s`:
 * - lateness ≤ misfireThresholdMs: not a misfire at all; it fires under every policy (a slot a
 *   new leader fires one election late must not be lost to `skip`);
 * - lateness > catchUpWindowMs: too stale to run; MISSED `outside_catch_up_window`;
 * - otherwise the policy decides:
 *   - `fire_all`: every such slot fires, except that only the latest `fireCountMax` do; older
 *     ones are MISSED `fire_all_cap` (recent slots are the ones still worth running);
 *   - `fire_once`: only the latest due slot fires, standing for all of them; the rest are MISSED
 *     `coalesced` (also when an on-time slot fires, since that run already catches up);
 *   - `skip`: all are MISSED `skip_policy`.
 *
 * The walk is bounded: at most `slotCountMax` slots are decided per call, and the plan says where
 * to resume, so a one-second job after a week of downtime becomes a series of bounded batches.
 */
import { assert, assertNever } from '../base/assert.js';
import { nextFire } from './next-fire.js';
import type { Schedule } from './parse.js';

export type MisfirePolicy =
  | { readonly kind: 'fire_all'; readonly fireCountMax: number }
  | { readonly kind: 'fire_once' }
  | { readonly kind: 'skip' };

export type MissedReason = 'outside_catch_up_window' | 'fire_all_cap' | 'coalesced' | 'skip_policy';

export interface MissedSlot {
  readonly slotMs: number;
  readonly reason: MissedReason;
}

export interface MisfireInput {
  readonly schedule: Schedule;
  /** The first slot not yet fired or recorded; the job's committed `nextFireAt`. */
  readonly nextFireAtMs: number;
  readonly nowMs: number;
  readonly policy: MisfirePolicy;
  /** A slot later than this is never fired; it is recorded as MISSED. */
  readonly catchUpWindowMs: number;
  /** A slot late by at most this is on time and fires whatever the policy. @default 0 */
  readonly misfireThresholdMs?: number;
  /** Slots decided per call; must exceed a `fire_all` cap. @default 10_000 */
  readonly slotCountMax?: number;
}

export interface MisfirePlan {
  /** Slots to fire now, ascending. */
  readonly fireSlotsMs: readonly number[];
  /** Slots to record as MISSED runs, ascending. */
  readonly missedSlots: readonly MissedSlot[];
  /**
   * The job's `nextFireAt` once the plan is applied: the first slot after `nowMs` when complete,
   * else the first undecided due slot (call again from there).
   */
  readonly nextFireAtMs: number | undefined;
  readonly isComplete: boolean;
}

export const MISFIRE_SLOT_COUNT_MAX_DEFAULT = 10_000;

function checkInput(input: MisfireInput, thresholdMs: number, slotCountMax: number): void {
  const { policy, catchUpWindowMs } = input;
  assert(Number.isFinite(input.nowMs), 'nowMs must be finite');
  assert(Number.isFinite(input.nextFireAtMs), 'nextFireAtMs must be finite');
  assert(catchUpWindowMs >= 0, 'catchUpWindowMs must be ≥ 0');
  assert(
    thresholdMs >= 0 && thresholdMs <= catchUpWindowMs,
    'misfireThresholdMs must be in [0, catchUpWindowMs]',
  );
  assert(Number.isSafeInteger(slotCountMax) && slotCountMax > 0, 'slotCountMax must be > 0');
  if (policy.kind === 'fire_all') {
    assert(
      Number.isSafeInteger(policy.fireCountMax) && policy.fireCountMax >= 1,
      'fire_all needs fireCountMax ≥ 1',
    );
    assert(slotCountMax > policy.fireCountMax, 'slotCountMax must exceed the fire_all cap');
  }
}

/** Decides the fate of the due slots from `nextFireAtMs` up to `nowMs` inclusive. */
export function planMisfire(input: MisfireInput): MisfirePlan {
  const { schedule, nowMs, policy, catchUpWindowMs } = input;
  const thresholdMs = input.misfireThresholdMs ?? 0;
  const slotCountMax = input.slotCountMax ?? MISFIRE_SLOT_COUNT_MAX_DEFAULT;
  checkInput(input, thresholdMs, slotCountMax);

  const fireSlotsMs: number[] = [];
  const missedSlots: MissedSlot[] = [];
  // fire_all only: misfired slots whose fate waits on how many more misfired slots follow.
  const pending: number[] = [];
  let decidedCount = 0;
  let slotMs: number | undefined = input.nextFireAtMs;
  const miss = (ms: number, reason: MissedReason): void => {
    missedSlots.push({ slotMs: ms, reason });
    decidedCount++;
  };
  const fire = (ms: number): void => {
    fireSlotsMs.push(ms);
    decidedCount++;
  };
  while (slotMs !== undefined && slotMs <= nowMs) {
    if (decidedCount + pending.length >= slotCountMax) {
      return { fireSlotsMs, missedSlots, nextFireAtMs: pending[0] ?? slotMs, isComplete: false };
    }
    const nextMs = nextFire(schedule, slotMs);
    const latenessMs = nowMs - slotMs;
    if (latenessMs > catchUpWindowMs) {
      miss(slotMs, 'outside_catch_up_window');
    } else if (latenessMs <= thresholdMs) {
      // On-time slots come after every misfired one, so the fire_all survivors go first.
      pending.splice(0).forEach(fire);
      fire(slotMs);
    } else {
      switch (policy.kind) {
        case 'skip':
          miss(slotMs, 'skip_policy');
          break;
        case 'fire_once':
          if (nextMs !== undefined && nextMs <= nowMs) miss(slotMs, 'coalesced');
          else fire(slotMs);
          break;
        case 'fire_all': {
          pending.push(slotMs);
          const dropped = pending.length > policy.fireCountMax ? pending.shift() : undefined;
          if (dropped !== undefined) miss(dropped, 'fire_all_cap');
          break;
        }
        default:
          assertNever(policy, 'misfire policy');
      }
    }
    slotMs = nextMs;
  }
  pending.splice(0).forEach(fire);
  return { fireSlotsMs, missedSlots, nextFireAtMs: slotMs, isComplete: true };
}
