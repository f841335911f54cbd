// A brute-force model of the spec's fire set, for differential tests of next-fire.ts. It shares
// nothing with the implementation beyond the parsed value sets: offsets come from Intl one minute
// at a time, dates and weekdays from Date's UTC getters, transitions are found by comparing
// neighbouring minutes, and each rule of the spec (§2.4) is applied literally, instant by instant.
import type { CronFields } from '../../../src/schedule/cron-table.js';
import type { CronSchedule } from '../../../src/schedule/parse.js';

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
const DST_LIKE_MS_MAX = 3 * HOUR_MS;

const formatters = new Map<string, Intl.DateTimeFormat>();

/** The UTC offset of `timezone` at `ms`, from the runtime's Intl data, in ms. */
export function intlOffsetMs(timezone: string, ms: number): number {
  let format = formatters.get(timezone);
  if (format === undefined) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timezone, format);
  }
  const match = /(\d+)\/(\d+)\/(\d+), (\d+):(\d+):(\d+)/.exec(format.format(ms));
  if (match === null) throw new Error(`unexpected Intl output for ${timezone}`);
  const [, month, day, year, hour, minute, second] = match.map(Number);
  const wall = Date.UTC(year ?? 0, (month ?? 1) - 1, day ?? 1, hour ?? 0, minute ?? 0, second ?? 0);
  return wall - Math.floor(ms / 1000) * 1000;
}

/** The plain reading of the cron fields, evaluated on a wall time read as UTC. */
export function matchesWall(fields: CronFields, wallMs: number): boolean {
  const d = new Date(wallMs);
  const day = d.getUTCDate();
  const weekday = d.getUTCDay();
  const daysInMonth = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0)).getUTCDate();
  if (!fields.seconds.includes(d.getUTCSeconds())) return false;
  if (!fields.minutes.includes(d.getUTCMinutes())) return false;
  if (!fields.hours.includes(d.getUTCHours())) return false;
  if (!fields.months.includes(d.getUTCMonth() + 1)) return false;
  const domMatch =
    fields.daysOfMonth.includes(day) || (fields.hasLastDayOfMonth && day === daysInMonth);
  const nth = fields.nthDayOfWeek;
  const dowMatch =
    fields.daysOfWeek.includes(weekday) ||
    (fields.lastDaysOfWeek.includes(weekday) && day + 7 > daysInMonth) ||
    (nth !== undefined && nth.weekday === weekday && Math.ceil(day / 7) === nth.nth);
  return fields.isDayOfMonthRestricted && fields.isDayOfWeekRestricted
    ? domMatch || dowMatch
    : domMatch && dowMatch;
}

interface Transition {
  readonly atMs: number;
  readonly beforeMs: number;
  readonly afterMs: number;
}

/**
 * Every slot f with fromMs < f ≤ toMs. Assumes offsets and transitions on whole minutes (true of
 * the tz data since 1972), and a window no longer than a few days (it scans every minute).
 */
export function oracleFires(schedule: CronSchedule, fromMs: number, toMs: number): number[] {
  const { fields, isFixed, timezone } = schedule;
  const firstMinute = Math.floor((fromMs - DST_LIKE_MS_MAX) / MINUTE_MS) * MINUTE_MS - MINUTE_MS;
  const offsets: number[] = [];
  const minutes: number[] = [];
  for (let m = firstMinute; m <= toMs; m += MINUTE_MS) {
    minutes.push(m);
    offsets.push(intlOffsetMs(timezone, m));
  }
  const transitions: Transition[] = [];
  for (let i = 1; i < minutes.length; i++) {
    const before = offsets[i - 1] ?? 0;
    const after = offsets[i] ?? 0;
    if (before !== after) {
      transitions.push({ atMs: minutes[i] ?? 0, beforeMs: before, afterMs: after });
    }
  }
  const inSecondPass = (ms: number): boolean =>
    transitions.some((tr) => {
      const delta = tr.afterMs - tr.beforeMs;
      return delta < 0 && -delta <= DST_LIKE_MS_MAX && ms >= tr.atMs && ms < tr.atMs - delta;
    });
  const seconds = schedule.fieldCount === 6 ? 60 : 1;
  const fires = new Set<number>();
  minutes.forEach((m, i) => {
    const offsetMs = offsets[i] ?? 0;
    for (let s = 0; s < seconds; s++) {
      const ms = m + s * 1000;
      if (ms <= fromMs || ms > toMs) continue;
      if (!matchesWall(fields, ms + offsetMs)) continue;
      if (isFixed && inSecondPass(ms)) continue;
      fires.add(ms);
    }
  });
  for (const tr of transitions) {
    const delta = tr.afterMs - tr.beforeMs;
    if (!isFixed || delta <= 0 || delta > DST_LIKE_MS_MAX) continue;
    if (tr.atMs <= fromMs || tr.atMs > toMs) continue;
    for (let w = tr.atMs + tr.beforeMs; w < tr.atMs + tr.afterMs; w += 1000) {
      if (matchesWall(fields, w)) {
        fires.add(tr.atMs);
        break;
      }
    }
  }
  return [...fires].sort((a, b) => a - b);
}
