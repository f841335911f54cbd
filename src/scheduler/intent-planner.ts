/**
 * The leader's planning step (docs/ARCHITECTURE.md, The firing protocol, step 2): for jobs whose
 * next slot falls inside the look-ahead, decide what happens to the slot and compute the job's
 * following slot, as fire intents to propose in one batch. Pure: time, term and the job state come
 * in as arguments, schedules are compiled by the caller (cached per job version).
 *
 * Per job, in this order: a slot past the job's end finishes the job; a paused job's slot is
 * recorded SKIPPED ('paused'); a slot late by more than the misfire threshold goes through the
 * job's misfire policy (fire_all capped, fire_once, skip, all inside the catch-up window; the
 * rest MISSED with a reason); an on-time slot goes through the overlap policy (fire, buffer —
 * which fires and lets the dispatcher hold the run back — or SKIPPED with a reason), counting
 * the job's runs in flight against its `maxConcurrency`. The count is taken when the slot is
 * planned, a look-ahead before it; the dispatcher checks the limit again when the run's turn
 * comes (dispatcher.ts, dispatch).
 */
import { nextFire } from '../schedule/next-fire.js';
import { planMisfire, type MisfirePolicy } from '../schedule/misfire.js';
import { planOverlap, type OverlapPolicy } from '../schedule/overlap.js';
import type { Schedule } from '../schedule/parse.js';
import type { FireIntent, SlotNotFired } from './commands.js';
import { maxConcurrencyOf, type Job } from './model.js';

export interface PlanInput {
  /** Candidate jobs (typically those the due index says are due within the look-ahead). */
  readonly jobs: Iterable<Job>;
  readonly nowMs: number;
  readonly lookAheadMs: number;
  /** How late a slot may be and still count as on time (elections, GC). */
  readonly misfireThresholdMs: number;
  /** Most intents in one batch; the rest wait for the next planning round. */
  readonly maxIntents: number;
  readonly compile: (job: Job) => Schedule;
  /** Runs of the job started and not finished, and runs held back by buffering. */
  readonly inFlightRuns: (jobId: string) => number;
  readonly bufferedRuns: (jobId: string) => number;
}

export function planIntents(input: PlanInput): FireIntent[] {
  const out: FireIntent[] = [];
  for (const job of input.jobs) {
    if (out.length >= input.maxIntents) break;
    const intent = planJob(job, input);
    if (intent) out.push(intent);
  }
  return out;
}

/** Slots one settle may record at most; past them the misfire policy's window applies anyway. */
const OVERDUE_SLOTS_MAX = 1000;

/**
 * The intent that settles a job's overdue slots (due at or before `nowMs`, not yet planned, as
 * after an outage) by its misfire, overlap and pause rules, as planning would have. A change of
 * the job (update, pause, resume) recomputes its next slot from now, so without this the slots
 * between would get no run at all: proposed just before the change, they end recorded.
 */
export function planOverdue(
  job: Job,
  input: Omit<PlanInput, 'jobs' | 'maxIntents' | 'lookAheadMs'>,
): FireIntent | undefined {
  const first = job.nextFireAtMs;
  if (first === undefined || first > input.nowMs) return undefined;
  const step: PlanInput = { ...input, jobs: [], maxIntents: 1, lookAheadMs: 0 };
  const slots: number[] = [];
  const notFired: SlotNotFired[] = [];
  let current: Job = job;
  let next: number | undefined = first;
  while (
    next !== undefined &&
    next <= input.nowMs &&
    slots.length + notFired.length < OVERDUE_SLOTS_MAX
  ) {
    const intent = planJob(current, step);
    if (!intent) break;
    slots.push(...intent.slots);
    notFired.push(...intent.notFired);
    const remaining =
      current.remaining === undefined
        ? undefined
        : Math.max(0, current.remaining - intent.slots.length);
    next = remaining === 0 ? undefined : intent.nextFireAtMs;
    current = { ...current, nextFireAtMs: next, remaining };
  }
  return {
    jobId: job.id,
    expectedNextFireAtMs: first,
    slots,
    notFired,
    nextFireAtMs: next,
    settlesVersion: job.version,
  };
}

function toMisfirePolicy(job: Job): MisfirePolicy {
  switch (job.misfire.policy) {
    case 'fire_all':
      return { kind: 'fire_all', fireCountMax: job.misfire.fireAllCap };
    case 'fire_once':
      return { kind: 'fire_once' };
    case 'skip':
      return { kind: 'skip' };
  }
}

function toOverlapPolicy(job: Job): OverlapPolicy {
  // A definition without the field (written before it existed, or not given) limits to 1.
  const maxConcurrency = maxConcurrencyOf(job.overlap);
  switch (job.overlap.policy) {
    case 'allow':
      return { kind: 'allow' };
    case 'skip':
      return { kind: 'skip', maxConcurrency };
    case 'buffer_one':
      return { kind: 'buffer_one', maxConcurrency };
    case 'buffer_all':
      return { kind: 'buffer_all', bufferedCountMax: job.overlap.bufferCap, maxConcurrency };
  }
}

function planJob(job: Job, input: PlanInput): FireIntent | undefined {
  const slot = job.nextFireAtMs;
  if (slot === undefined || slot > input.nowMs + input.lookAheadMs) return undefined;
  const base = { jobId: job.id, expectedNextFireAtMs: slot, version: job.version };
  if (job.endAtMs !== undefined && slot > job.endAtMs) {
    return { ...base, slots: [], notFired: [], nextFireAtMs: undefined };
  }
  const schedule = input.compile(job);
  const following = (ms: number): number | undefined => {
    const n = nextFire(schedule, ms);
    return n === undefined || (job.endAtMs !== undefined && n > job.endAtMs) ? undefined : n;
  };
  if (job.paused) {
    return {
      ...base,
      slots: [],
      notFired: [{ slotMs: slot, status: 'SKIPPED', reason: 'paused' }],
      nextFireAtMs: following(slot),
    };
  }
  if (slot < input.nowMs - input.misfireThresholdMs) {
    const plan = planMisfire({
      schedule,
      nextFireAtMs: slot,
      nowMs: input.nowMs,
      policy: toMisfirePolicy(job),
      catchUpWindowMs: Math.max(job.misfire.catchUpWindowMs, input.misfireThresholdMs),
      misfireThresholdMs: input.misfireThresholdMs,
    });
    const notFired: SlotNotFired[] = plan.missedSlots.map((m) => ({
      slotMs: m.slotMs,
      status: 'MISSED',
      reason: m.reason,
    }));
    const next = plan.nextFireAtMs;
    return {
      ...base,
      slots: plan.fireSlotsMs,
      notFired,
      nextFireAtMs:
        next === undefined || (job.endAtMs !== undefined && next > job.endAtMs) ? undefined : next,
    };
  }
  const decision = planOverlap({
    policy: toOverlapPolicy(job),
    inFlightRunCount: input.inFlightRuns(job.id),
    bufferedSlotCount: input.bufferedRuns(job.id),
  });
  if (decision.action === 'skip') {
    return {
      ...base,
      slots: [],
      notFired: [{ slotMs: slot, status: 'SKIPPED', reason: decision.reason }],
      nextFireAtMs: following(slot),
    };
  }
  return { ...base, slots: [slot], notFired: [], nextFireAtMs: following(slot) };
}
