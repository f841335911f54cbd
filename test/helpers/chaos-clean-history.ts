/**
 * Seeded clean chaos histories for the checker's property test: a small simulation of a
 * scheduler that keeps every promise. Jobs of several schedule kinds (every 1-5 s, cron with
 * seconds, one-off `at`) and both semantics; each operation takes effect at the midpoint of its
 * interval; slots fire on time outside faults; inside a fault window the job's misfire policy
 * decides (late delivery, coalesced or MISSED), and at-least-once slots may be delivered again
 * with a higher token. Pauses and deletes keep clear of faults, so no late delivery can follow
 * them. The returned facts tell a test where a corruption will be noticed.
 */
import { SeededRand } from '../../src/base/rand.js';
import { formatInstant } from '../../src/schedule/civil.js';
import { nextFire } from '../../src/schedule/next-fire.js';
import { parseSchedule } from '../../src/schedule/parse.js';
import type {
  DeliverySemantics,
  JobDefinition,
  MisfirePolicyName,
  NemesisKind,
  RunRead,
} from '../../chaos/history/format.js';
import { HistoryBuilder, META, START_EPOCH_MS, readOf } from './chaos-history.js';

export const RUN_MS = 60_000;
const FINAL_T = RUN_MS + 5_000;
const CRONS = ['*/2 * * * * *', '*/3 * * * * *', '0,15,30,45 * * * * *', '* * * * * *'];
const FAULT_KINDS: readonly NemesisKind[] = ['kill', 'pause', 'partition', 'clock-bump'];

export interface CleanHistory {
  readonly builder: HistoryBuilder;
  /** Delivered slots (job, slot) with one 2xx attempt, due away from faults and job changes. */
  readonly calmSlots: readonly { readonly jobId: string; readonly slotMs: number }[];
  readonly atMostOnceJobs: readonly string[];
  /** Jobs paused (acknowledged at `ackT`) and not resumed before `resumeT` (Infinity: never). */
  readonly pausedJobs: readonly {
    readonly jobId: string;
    readonly ackT: number;
    readonly resumeT: number;
  }[];
  readonly duplicatesAllowed: number;
}

interface Window {
  readonly from: number;
  readonly to: number;
}

function scheduleFor(rand: SeededRand, i: number): Pick<JobDefinition, 'schedule' | 'anchorMs'> {
  switch (i % 3) {
    case 0:
      return { schedule: `every ${1 + rand.int(5)}s`, anchorMs: START_EPOCH_MS + rand.int(1000) };
    case 1:
      return { schedule: CRONS[rand.int(CRONS.length)]! };
    default:
      return {
        schedule: `at ${formatInstant(START_EPOCH_MS + (5 + rand.int(50)) * 1000 + rand.int(1000))}`,
      };
  }
}

export function cleanHistory(seed: number): CleanHistory {
  const rand = new SeededRand(seed);
  const b = new HistoryBuilder({ seed: String(seed), durationMs: RUN_MS });
  const { inFlightSlackMs: delta, recoveryAllowanceMs: allowance } = META;

  // Faults: up to three, apart from each other.
  const faults: Window[] = [];
  for (let k = 0, n = rand.int(4); k < n; k++) {
    const from = 8_000 + k * 17_000 + rand.int(6_000);
    const fault = { from, to: from + 1_000 + rand.int(5_000) };
    faults.push(fault);
    b.fault(`f${k}`, FAULT_KINDS[rand.int(FAULT_KINDS.length)]!, fault.from, fault.to);
  }
  const faultAt = (t: number): Window | undefined => faults.find((f) => f.from <= t && t <= f.to);
  const nearFault = (t: number, margin: number): boolean =>
    faults.some((f) => t >= f.from - margin && t <= f.to + margin);

  const calmSlots: { jobId: string; slotMs: number }[] = [];
  const atMostOnceJobs: string[] = [];
  const pausedJobs: { jobId: string; ackT: number; resumeT: number }[] = [];
  let duplicatesAllowed = 0;
  const jobCount = 6 + rand.int(5);
  for (let i = 0; i < jobCount; i++) {
    const jobId = `job-${seed}-${i}`;
    const delivery: DeliverySemantics =
      i === 0
        ? 'at_most_once'
        : i === 1
          ? 'at_least_once'
          : rand.chance(0.5)
            ? 'at_most_once'
            : 'at_least_once';
    if (delivery === 'at_most_once') atMostOnceJobs.push(jobId);
    const policy: MisfirePolicyName = (['fire_all', 'fire_once', 'skip'] as const)[rand.int(3)]!;
    const def: JobDefinition = {
      tenant: `t${i % 3}`,
      name: `${jobId}-v1`,
      ...scheduleFor(rand, i === 0 || i === 1 ? 0 : i),
      delivery,
      misfire: { policy },
      overlap: { policy: 'allow' },
    };
    const createT0 = rand.int(2_000);
    const createT1 = createT0 + 5 + rand.int(50);
    b.create(jobId, def, createT0, createT1);
    const createdAt = (createT0 + createT1) / 2;

    // Job changes away from faults: a pause (maybe resumed later), or a delete, or neither.
    let pausedFrom = Infinity;
    let pausedTo = Infinity;
    let deletedAt = Infinity;
    const change = i <= 1 ? 0 : rand.int(3);
    const pickCalmT = (): number | undefined => {
      for (let tries = 0; tries < 20; tries++) {
        const t = 10_000 + rand.int(40_000);
        if (!nearFault(t, 4_000)) return t;
      }
      return undefined;
    };
    const changeT = change === 0 ? undefined : pickCalmT();
    if (changeT !== undefined && change === 1) {
      const t1 = changeT + 10;
      b.op('pause', changeT, t1, 'ok', { jobId, value: readOf(jobId, def, 1, true) });
      pausedFrom = changeT + 5;
      const resumeT = changeT + 4_000 + rand.int(8_000);
      const resumes = rand.chance(0.5) && !nearFault(resumeT, 4_000);
      if (resumes) {
        b.op('resume', resumeT, resumeT + 10, 'ok', { jobId, value: readOf(jobId, def) });
        pausedTo = resumeT + 5;
      }
      pausedJobs.push({ jobId, ackT: t1, resumeT: resumes ? resumeT : Infinity });
    } else if (changeT !== undefined && change === 2) {
      b.op('delete', changeT, changeT + 10, 'ok', { jobId });
      deletedAt = changeT + 5;
    }
    const stateAt = (t: number): { exists: boolean; paused: boolean } => ({
      exists: t >= createdAt && t < deletedAt,
      paused: t >= pausedFrom && t < pausedTo,
    });

    // A get at a calm moment, answered with the state at its midpoint.
    const getT = 3_000 + rand.int(50_000);
    const s = stateAt(getT + 5);
    b.op('get', getT, getT + 10, 'ok', {
      jobId,
      value: s.exists ? readOf(jobId, def, 1, s.paused) : null,
    });

    const runs = new Map<number, RunRead>();
    const schedule = parseSchedule(def.schedule, { timezone: 'UTC', anchorMs: def.anchorMs });
    let pendingFireOnce: number | undefined;
    for (
      let slotMs = nextFire(schedule, START_EPOCH_MS + createdAt);
      slotMs !== undefined && slotMs - START_EPOCH_MS <= FINAL_T - 1_000;
      slotMs = nextFire(schedule, slotMs)
    ) {
      const sT = slotMs - START_EPOCH_MS;
      const st = stateAt(sT);
      if (!st.exists) continue;
      if (st.paused) {
        runs.set(slotMs, { slotMs, status: 'SKIPPED', reason: 'paused' });
        continue;
      }
      const fault = faultAt(sT);
      if (fault === undefined) {
        const lag = 5 + rand.int(300);
        const nearChange = changeT !== undefined && Math.abs(sT - changeT) < 3_000;
        if (!nearChange && rand.chance(0.05)) {
          // A definite 5xx, retried a second later: an ordinary retry under both semantics.
          b.delivery(jobId, slotMs, sT + lag, { answer: '5xx' });
          b.delivery(jobId, slotMs, sT + lag + 1_000, { attempt: 2 });
        } else {
          b.delivery(jobId, slotMs, sT + lag);
          const calm =
            !nearFault(sT, delta + allowance + 1_500) &&
            sT > createT1 + 1_500 &&
            sT < FINAL_T - 6_000;
          const awayFromChanges = changeT === undefined || Math.abs(sT - changeT) > 6_000;
          if (calm && awayFromChanges && (pausedTo === Infinity || sT > pausedTo + 1_500))
            calmSlots.push({ jobId, slotMs });
        }
        runs.set(slotMs, { slotMs, status: 'SUCCEEDED', attempts: 1 });
        continue;
      }
      // Inside a fault: the misfire policy decides once the fault heals.
      const fireAt = fault.to + 100 + rand.int(800);
      if (policy === 'skip') {
        runs.set(slotMs, { slotMs, status: 'MISSED', reason: 'skip_policy' });
      } else if (policy === 'fire_once') {
        if (pendingFireOnce !== undefined)
          runs.set(pendingFireOnce, {
            slotMs: pendingFireOnce,
            status: 'MISSED',
            reason: 'coalesced',
          });
        pendingFireOnce = slotMs;
        const next = nextFire(schedule, slotMs);
        if (next === undefined || faultAt(next - START_EPOCH_MS) !== fault) {
          b.delivery(jobId, slotMs, fireAt);
          runs.set(slotMs, { slotMs, status: 'SUCCEEDED', attempts: 1 });
          pendingFireOnce = undefined;
        }
      } else {
        b.delivery(jobId, slotMs, fireAt);
        runs.set(slotMs, { slotMs, status: 'SUCCEEDED', attempts: 1 });
        if (delivery === 'at_least_once' && rand.chance(0.4)) {
          b.delivery(jobId, slotMs, fireAt + 50 + rand.int(300), { attempt: 2 });
          duplicatesAllowed++;
        }
      }
    }
    const sorted = [...runs.values()].sort((x, y) => y.slotMs - x.slotMs);
    const midT = 30_000;
    b.op('list-runs', midT, midT + 10, 'ok', {
      jobId,
      value: {
        runs: sorted.filter((r) => r.slotMs - START_EPOCH_MS < midT - 8_000),
        complete: true,
      },
    });
    b.final(
      jobId,
      FINAL_T,
      deletedAt < Infinity
        ? null
        : readOf(jobId, def, 1, pausedTo === Infinity && pausedFrom < Infinity),
      sorted,
    );
  }
  return { builder: b, calmSlots, atMostOnceJobs, pausedJobs, duplicatesAllowed };
}
