/**
 * What a waiting run's upstream came to, read from the upstream's group's applied (hence
 * committed) state: the rule of docs/workflows.md. Slot S of a job waits, for each upstream, for
 * the upstream's run of its latest slot at or before S (by the upstream's current schedule, from
 * its creation on):
 * - SUCCEEDED: succeeded; another finished status: failed; not finished yet: pending;
 * - no such run yet, and the upstream's next slot to plan is at or before that slot: pending
 *   (its leader has not planned it yet);
 * - otherwise missing: the upstream was deleted, was paused over that slot, has no slot at or
 *   before S, or the run was dropped by retention.
 * Pure: the caller passes the state and how to compile a schedule.
 */
import { nextFire } from '../schedule/next-fire.js';
import { parseSchedule, type Schedule } from '../schedule/parse.js';
import { fireIdOf, isTerminal, type Job, type RunStatus, type UpstreamOutcome } from './model.js';
import type { SchedulerStateMachine } from './state-machine.js';

export interface UpstreamAnswer {
  readonly outcome: UpstreamOutcome | 'pending';
  readonly fireId?: string;
  readonly status?: RunStatus;
}

/**
 * A stored job's schedule, as its leader plans it: an `every` schedule without an anchor counts
 * from the job's creation.
 */
export function scheduleOfJob(job: Job): Schedule {
  return parseSchedule(job.schedule, {
    timezone: job.timezone,
    anchorMs: job.anchorMs ?? job.createdAtMs,
  });
}

/** What upstream job `jobKey` came to for a downstream slot `slotMs`. */
export function answerUpstream(
  sm: SchedulerStateMachine,
  jobKey: string,
  slotMs: number,
  compile: (job: Job) => Schedule = scheduleOfJob,
): UpstreamAnswer {
  const job = sm.jobs.get(jobKey);
  if (job === undefined) return { outcome: 'missing' };
  const slot = latestSlotAtOrBefore(compile(job), job.createdAtMs, slotMs);
  if (slot === undefined) return { outcome: 'missing' };
  const fireId = fireIdOf(jobKey, slot);
  const run = sm.runs.get(fireId);
  if (run === undefined) {
    const planned = job.nextFireAtMs === undefined || job.nextFireAtMs > slot;
    return planned ? { outcome: 'missing' } : { outcome: 'pending' };
  }
  if (!isTerminal(run.status)) return { outcome: 'pending', fireId };
  return {
    outcome: run.status === 'SUCCEEDED' ? 'succeeded' : 'failed',
    fireId,
    status: run.status,
  };
}

/**
 * The schedule's latest slot in (afterMs, atMostMs], or undefined: a binary search over
 * nextFire (the first slot after an instant never decreases as the instant grows), about 45
 * nextFire calls whatever the schedule's period.
 */
export function latestSlotAtOrBefore(
  schedule: Schedule,
  afterMs: number,
  atMostMs: number,
): number | undefined {
  let lo = afterMs;
  const first = nextFire(schedule, lo);
  if (first === undefined || first > atMostMs) return undefined;
  let hi = atMostMs;
  // nextFire(lo) ≤ atMostMs < nextFire(hi): the last slot is nextFire(lo) once hi = lo + 1.
  while (hi - lo > 1) {
    const mid = Math.floor(lo + (hi - lo) / 2);
    const at = nextFire(schedule, mid);
    if (at !== undefined && at <= atMostMs) lo = mid;
    else hi = mid;
  }
  return nextFire(schedule, lo);
}
