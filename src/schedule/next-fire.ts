/**
 * Next fire instants of a compiled schedule: nextFire(t) is the smallest slot strictly after t.
 *
 * A schedule denotes a fixed set of slots, independent of when or how often it is asked, so a
 * leader that recomputes after a restart neither repeats nor skips a slot. For cron the set is
 * defined on the zone's time line cut into segments of constant offset (see zone-rules.ts):
 *
 * - inside a segment, a slot is every instant whose wall time (instant + offset) matches;
 * - at a transition T from offset o1 to o2 of at most 3 h ("DST-like"), a fixed-time schedule
 *   (no `*`, `?` or `/` in second, minute or hour) loses the second pass of an overlap (its wall
 *   times already fired before T) and, when a gap [T+o1, T+o2) hides at least one matching wall
 *   time, gains T itself, once; periodic schedules just follow the wall clock;
 * - a larger change (a calendar jump such as Samoa's lost day) is taken literally: skipped wall
 *   times never fire, repeated ones fire in every pass.
 *
 * The walk visits one segment at a time and, inside it, asks the cron table for the next
 * matching wall time, so its cost depends on the number of segments crossed (two a year in DST
 * zones), never on the number of minutes.
 */
import { assertionFailed, assertNever } from '../base/assert.js';
import { DAY_MS, HOUR_MS, SECOND_MS } from './civil.js';
import { nextMatchingWallMs } from './cron-table.js';
import type { CronSchedule, IntervalSchedule, Schedule } from './parse.js';

/** The first instant of year 0001 (UTC): no slot is earlier. */
export const SLOT_MS_MIN = -62_135_596_800_000;
/** The last millisecond of year 9999 (UTC): no slot is later. */
export const SLOT_MS_MAX = 253_402_300_799_999;
/** Offset changes up to this size (inclusive) get the DST gap and overlap rules. */
export const DST_LIKE_CHANGE_MS_MAX = 3 * HOUR_MS;
/** How far ahead a search goes: one Gregorian cycle, after which wall-time matches repeat. */
export const SEARCH_HORIZON_MS = 146_097 * DAY_MS;

/** Finds matching wall times, remembering the last answer: segments re-ask the same question. */
class WallSearch {
  private fromMs = Infinity;
  private foundMs: number | undefined;

  constructor(private readonly schedule: CronSchedule) {}

  /** Smallest matching wall time ≥ fromMs, or undefined when none ever matches. */
  next(fromMs: number): number | undefined {
    // No match in [this.fromMs, foundMs) means the answer for any start inside it is foundMs.
    if (fromMs >= this.fromMs && (this.foundMs === undefined || fromMs <= this.foundMs)) {
      return this.foundMs;
    }
    this.fromMs = fromMs;
    this.foundMs = nextMatchingWallMs(this.schedule.table, fromMs);
    return this.foundMs;
  }
}

function isDstLikeGap(deltaMs: number): boolean {
  return deltaMs > 0 && deltaMs <= DST_LIKE_CHANGE_MS_MAX;
}

function isDstLikeOverlap(deltaMs: number): boolean {
  return deltaMs < 0 && -deltaMs <= DST_LIKE_CHANGE_MS_MAX;
}

/**
 * The last answer found per compiled cron schedule. A schedule is a fixed set of slots, so when
 * nextFire(a) = s, every t in [a, s) has the answer s too: jobs sharing a compiled schedule
 * (a bulk registration's first slots, thousands of jobs due at the same :00) ask that question
 * again and again. Only found slots are kept: "none within the horizon" depends on where the
 * search starts. A cache of the set's own function, so it never changes an answer.
 */
const lastAnswers = new WeakMap<CronSchedule, { afterMs: number; slotMs: number }>();

function nextCronFire(schedule: CronSchedule, afterMs: number): number | undefined {
  const last = lastAnswers.get(schedule);
  if (last !== undefined && afterMs >= last.afterMs && afterMs < last.slotMs) return last.slotMs;
  const slotMs = searchCronFire(schedule, afterMs);
  if (slotMs !== undefined) {
    if (last === undefined) lastAnswers.set(schedule, { afterMs, slotMs });
    else {
      last.afterMs = afterMs;
      last.slotMs = slotMs;
    }
  }
  return slotMs;
}

/** nextFire of a cron schedule without the cache of last answers (exported for its test). */
export function searchCronFire(schedule: CronSchedule, afterMs: number): number | undefined {
  // Cron slots fall on whole seconds: start at the first whole second strictly after afterMs.
  let cursorMs = Math.max(Math.floor(afterMs / SECOND_MS) * SECOND_MS + SECOND_MS, SLOT_MS_MIN);
  const horizonMs = Math.min(cursorMs + SEARCH_HORIZON_MS, SLOT_MS_MAX);
  const search = new WallSearch(schedule);
  const { zone, isFixed } = schedule;
  while (cursorMs <= horizonMs) {
    const segment = zone.segmentAt(cursorMs);
    const offsetMs = segment.offsetMs;
    const deltaMs = offsetMs - segment.prevOffsetMs;
    // Invariant: every slot in [afterMs, cursorMs) has been ruled out, so a catch-up slot at the
    // transition that starts this segment counts only when the cursor stands exactly on it.
    if (isFixed && cursorMs === segment.startMs && isDstLikeGap(deltaMs)) {
      const skipped = search.next(segment.startMs + segment.prevOffsetMs);
      if (skipped !== undefined && skipped < segment.startMs + offsetMs) return cursorMs;
    }
    let fromWallMs = cursorMs + offsetMs;
    if (isFixed && isDstLikeOverlap(deltaMs)) {
      // The second pass of an overlap repeats wall times a fixed schedule already fired.
      fromWallMs = Math.max(fromWallMs, segment.startMs + segment.prevOffsetMs);
    }
    const wallMs = search.next(fromWallMs);
    if (wallMs === undefined) return undefined;
    if (wallMs < segment.endMs + offsetMs) {
      const slotMs = wallMs - offsetMs;
      return slotMs <= SLOT_MS_MAX ? slotMs : undefined;
    }
    cursorMs = segment.endMs;
  }
  return undefined;
}

function nextIntervalFire(schedule: IntervalSchedule, afterMs: number): number | undefined {
  const { anchorMs, periodMs } = schedule;
  let slotMs: number;
  if (afterMs < anchorMs) {
    slotMs = anchorMs;
  } else {
    slotMs = anchorMs + (Math.floor((afterMs - anchorMs) / periodMs) + 1) * periodMs;
    // Guards against a rounded quotient when the numbers approach 2^53.
    if (slotMs <= afterMs) slotMs += periodMs;
    else if (slotMs - periodMs > afterMs && slotMs - periodMs >= anchorMs) slotMs -= periodMs;
  }
  return slotMs <= SLOT_MS_MAX ? slotMs : undefined;
}

/** The smallest slot of `schedule` strictly after `afterMs` (UTC ms), or undefined if none. */
export function nextFire(schedule: Schedule, afterMs: number): number | undefined {
  if (!Number.isFinite(afterMs))
    assertionFailed(`afterMs must be a finite number of UTC ms, got ${afterMs}`);
  switch (schedule.kind) {
    case 'cron':
      return nextCronFire(schedule, afterMs);
    case 'interval':
      return nextIntervalFire(schedule, afterMs);
    case 'at':
      return schedule.slotMs > afterMs ? schedule.slotMs : undefined;
    default:
      return assertNever(schedule, 'schedule kind');
  }
}

/** The `count` smallest slots strictly after `afterMs`, ascending (fewer when the set ends). */
export function nextFires(schedule: Schedule, afterMs: number, count: number): number[] {
  if (!(Number.isSafeInteger(count) && count >= 0))
    assertionFailed(`count must be a whole number, got ${count}`);
  const slots: number[] = [];
  let cursorMs = afterMs;
  while (slots.length < count) {
    const slotMs = nextFire(schedule, cursorMs);
    if (slotMs === undefined) break;
    slots.push(slotMs);
    cursorMs = slotMs;
  }
  return slots;
}
