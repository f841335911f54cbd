/**
 * The slots a job certainly owed: every slot of its certain definition over the stretches of time
 * when it certainly existed, was not paused and had that definition (job-timeline.ts), computed
 * with the cluster's own schedule code (src/schedule), respecting start, end and a fire count,
 * and stopping at the run's horizon. Pure.
 */
import { nextFire, nextFires } from '../../src/schedule/next-fire.js';
import { tryParseSchedule, type Schedule } from '../../src/schedule/parse.js';
import type { EpochMs, JobDefinition } from '../history/format.js';
import { isJobRead, type HistoryContext } from './context.js';
import { jobSegments, slotKey, type JobSegment } from './job-timeline.js';

/** A bound on the slots computed per job, so a mistaken `every 1ms` cannot exhaust memory. */
export const SLOTS_PER_JOB_MAX = 200_000;

export interface OwedSlots {
  readonly jobId: string;
  /** Ascending UTC ms. */
  readonly slots: readonly EpochMs[];
  /** Why the job's slots could not be computed (its definition did not compile). */
  readonly uncheckable: string | undefined;
  readonly segments: readonly JobSegment[];
}

/** The anchor of an `every` schedule: the definition's, else the first slot the create answered. */
function anchorOf(ctx: HistoryContext, jobId: string, def: JobDefinition): number | undefined {
  if (def.anchorMs !== undefined) return def.anchorMs;
  for (const op of ctx.opsByJob.get(jobId) ?? []) {
    const value = op.completion?.value;
    if (
      op.f === 'create' &&
      op.outcome === 'ok' &&
      isJobRead(value) &&
      value.nextFireAtMs !== undefined
    )
      return value.nextFireAtMs;
  }
  return undefined;
}

export function compileDefinition(
  ctx: HistoryContext,
  jobId: string,
  def: JobDefinition,
): Schedule | string {
  const text = def.schedule.trim();
  const anchorMs = text.startsWith('every') ? anchorOf(ctx, jobId, def) : undefined;
  if (text.startsWith('every') && anchorMs === undefined)
    return 'an every schedule with no anchor in the definition or the create answer';
  const parsed = tryParseSchedule(text, { timezone: def.timezone ?? 'UTC', anchorMs });
  if (!parsed.ok)
    return `schedule does not compile: ${parsed.violations.map((v) => v.reason).join('; ')}`;
  return parsed.schedule;
}

/** The last slot a fire count allows, counted conservatively from the first create's call. */
function fireCountCutoff(
  ctx: HistoryContext,
  jobId: string,
  def: JobDefinition,
  schedule: Schedule,
): number {
  if (def.remainingFires === undefined) return Number.POSITIVE_INFINITY;
  const create = (ctx.opsByJob.get(jobId) ?? []).find(
    (op) => op.f === 'create' && op.outcome !== 'fail',
  );
  if (!create || def.remainingFires <= 0) return Number.NEGATIVE_INFINITY;
  const first = nextFires(schedule, ctx.epochOf(create.invokeT), def.remainingFires);
  return first[first.length - 1] ?? Number.NEGATIVE_INFINITY;
}

export function owedSlots(ctx: HistoryContext, jobId: string): OwedSlots {
  const segments = jobSegments(ctx, jobId);
  const compiled = new Map<string, Schedule | string>();
  const slots: EpochMs[] = [];
  let uncheckable: string | undefined;
  for (const [i, seg] of segments.entries()) {
    const def = seg.definition;
    if (!seg.active || def === undefined) continue;
    const to = Math.min(seg.to, ctx.horizonT);
    if (to <= seg.from) continue;
    const key = slotKey(def);
    let schedule = compiled.get(key);
    if (schedule === undefined) {
      schedule = compileDefinition(ctx, jobId, def);
      compiled.set(key, schedule);
    }
    if (typeof schedule === 'string') {
      uncheckable = schedule;
      continue;
    }
    const cutoff = Math.min(fireCountCutoff(ctx, jobId, def, schedule), def.endAtMs ?? Infinity);
    const fromEpoch = Math.max(
      ctx.epochOf(seg.from),
      seg.definitionFromMs ?? -Infinity,
      (def.startAtMs ?? -Infinity) - 1,
    );
    // A delete takes effect at its leader's clock: one behind real time (a clock fault) saw
    // slots just before the delete as still to come, and the delete won over them. The runs it
    // cancelled are gone with the job, so those slots are not owed (within the injected skew).
    const deleting = segments[i + 1]?.maybeDeleted === true && !seg.maybeDeleted;
    const behindMs = deleting ? ctx.clockBehindMs(seg.to, seg.to) : 0;
    const toEpoch = Math.min(ctx.epochOf(to) - behindMs, cutoff + 1);
    for (
      let s = nextFire(schedule, fromEpoch);
      s !== undefined && s < toEpoch;
      s = nextFire(schedule, s)
    ) {
      if (slots.length >= SLOTS_PER_JOB_MAX) {
        uncheckable = `more than ${SLOTS_PER_JOB_MAX} slots`;
        break;
      }
      slots.push(s);
    }
  }
  return { jobId, slots, uncheckable, segments };
}
