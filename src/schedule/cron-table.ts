/**
 * The compiled form of a cron expression's fields and the wall-time search over it.
 *
 * Matching is done on wall time only (the zone enters in next-fire.ts). The search never walks
 * minute by minute: the time of day comes from "next allowed value ≥ i" tables, and the days of
 * a month are one 32-bit mask built from the day-of-month bits, a precomputed weekday mask per
 * weekday of the 1st, and the `L`, `nL` and `n#k` days. Skipping a month costs a few integer
 * operations, so even a full 400-year Gregorian cycle (after which the calendar repeats, and
 * with it every match) is scanned in well under a millisecond.
 */
import {
  DAY_MS,
  SECOND_MS,
  SECONDS_PER_DAY,
  civilFromDays,
  daysInMonth,
  weekdayOfDays,
} from './civil.js';

/** The value sets of a parsed cron expression: what each field selects, after names and steps. */
export interface CronFields {
  readonly seconds: readonly number[];
  readonly minutes: readonly number[];
  readonly hours: readonly number[];
  /** Plain days 1–31 (not `L`). */
  readonly daysOfMonth: readonly number[];
  /** `L` in the day-of-month field. */
  readonly hasLastDayOfMonth: boolean;
  readonly months: readonly number[];
  /** Plain weekdays, 0 = Sunday … 6 = Saturday (7 is folded into 0). */
  readonly daysOfWeek: readonly number[];
  /** `nL` terms: the last such weekday of the month. */
  readonly lastDaysOfWeek: readonly number[];
  /** The `n#k` term, when the day-of-week field is one. */
  readonly nthDayOfWeek: { readonly weekday: number; readonly nth: number } | undefined;
  /** The Vixie rule: a day field is unrestricted when its text starts with `*` or `?`. */
  readonly isDayOfMonthRestricted: boolean;
  readonly isDayOfWeekRestricted: boolean;
}

export interface CronTable {
  /** `nextSecond[i]` = smallest allowed second ≥ i, or -1; index 60 is always -1. */
  readonly nextSecond: Int8Array;
  readonly nextMinute: Int8Array;
  readonly nextHour: Int8Array;
  readonly firstSecond: number;
  readonly firstMinute: number;
  readonly firstHour: number;
  /** Bit m set when month m (1–12) is allowed. */
  readonly monthBits: number;
  /** Bit d set when day d (1–31) is a plain day-of-month value. */
  readonly dayOfMonthBits: number;
  readonly hasLastDayOfMonth: boolean;
  /** Index w: days 1–31 of a month whose 1st is weekday w that fall on a plain weekday value. */
  readonly weekdayBitsByFirstWeekday: Int32Array;
  readonly lastDaysOfWeek: readonly number[];
  readonly nthWeekday: number;
  readonly nth: number;
  /** Both day fields restricted: a day matches when either does (otherwise both must). */
  readonly isEitherDayRule: boolean;
}

/** Months in a 400-year cycle plus one: a search this long that finds nothing never will. */
export const MONTH_SCAN_LIMIT = 4_801;

function nextTable(values: readonly number[], size: number): Int8Array {
  const table = new Int8Array(size + 1).fill(-1);
  const allowed = new Set(values);
  let next = -1;
  for (let i = size - 1; i >= 0; i--) {
    if (allowed.has(i)) next = i;
    table[i] = next;
  }
  return table;
}

function bitsOf(values: readonly number[]): number {
  let bits = 0;
  for (const v of values) bits |= 1 << v;
  return bits;
}

export function compileCronTable(fields: CronFields): CronTable {
  const nextSecond = nextTable(fields.seconds, 60);
  const nextMinute = nextTable(fields.minutes, 60);
  const nextHour = nextTable(fields.hours, 24);
  const weekdays = new Set(fields.daysOfWeek);
  const weekdayBitsByFirstWeekday = new Int32Array(7);
  for (let first = 0; first < 7; first++) {
    let bits = 0;
    for (let day = 1; day <= 31; day++) {
      if (weekdays.has((first + day - 1) % 7)) bits |= 1 << day;
    }
    weekdayBitsByFirstWeekday[first] = bits;
  }
  return {
    nextSecond,
    nextMinute,
    nextHour,
    firstSecond: nextSecond[0] ?? -1,
    firstMinute: nextMinute[0] ?? -1,
    firstHour: nextHour[0] ?? -1,
    monthBits: bitsOf(fields.months),
    dayOfMonthBits: bitsOf(fields.daysOfMonth),
    hasLastDayOfMonth: fields.hasLastDayOfMonth,
    weekdayBitsByFirstWeekday,
    lastDaysOfWeek: fields.lastDaysOfWeek,
    nthWeekday: fields.nthDayOfWeek?.weekday ?? -1,
    nth: fields.nthDayOfWeek?.nth ?? 0,
    isEitherDayRule: fields.isDayOfMonthRestricted && fields.isDayOfWeekRestricted,
  };
}

/** Bits 1..dim set, as an int32 (bit 31 is the sign bit, which the masks use like any other). */
const VALID_DAY_BITS = Array.from({ length: 32 }, (_, dim) => (2 ** (dim + 1) - 2) | 0);

/** The matching days of one month as bits 1–31. */
export function monthDayBits(
  table: CronTable,
  year: number,
  month: number,
  firstDays: number,
): number {
  const dim = daysInMonth(year, month);
  const firstWeekday = weekdayOfDays(firstDays);
  let dayOfMonth = table.dayOfMonthBits;
  if (table.hasLastDayOfMonth) dayOfMonth |= 1 << dim;
  let dayOfWeek = table.weekdayBitsByFirstWeekday[firstWeekday] ?? 0;
  if (table.lastDaysOfWeek.length > 0) {
    const lastWeekday = (firstWeekday + dim - 1) % 7;
    for (const weekday of table.lastDaysOfWeek) {
      dayOfWeek |= 1 << (dim - ((lastWeekday - weekday + 7) % 7));
    }
  }
  if (table.nthWeekday >= 0) {
    const day = 1 + ((table.nthWeekday - firstWeekday + 7) % 7) + 7 * (table.nth - 1);
    if (day <= dim) dayOfWeek |= 1 << day;
  }
  const days = table.isEitherDayRule ? dayOfMonth | dayOfWeek : dayOfMonth & dayOfWeek;
  return days & (VALID_DAY_BITS[dim] ?? 0);
}

/** Seconds into the day of the first allowed time ≥ `secondOfDay`, or -1 if none is left. */
function timeOfDayAtOrAfter(table: CronTable, secondOfDay: number): number {
  const h = Math.floor(secondOfDay / 3600);
  const m = Math.floor(secondOfDay / 60) % 60;
  const s = secondOfDay % 60;
  const hour = table.nextHour[h] ?? -1;
  if (hour < 0) return -1;
  if (hour > h) return hour * 3600 + table.firstMinute * 60 + table.firstSecond;
  const minute = table.nextMinute[m] ?? -1;
  if (minute > m) return h * 3600 + minute * 60 + table.firstSecond;
  if (minute === m) {
    const second = table.nextSecond[s] ?? -1;
    if (second >= 0) return h * 3600 + m * 60 + second;
    const laterMinute = table.nextMinute[m + 1] ?? -1;
    if (laterMinute >= 0) return h * 3600 + laterMinute * 60 + table.firstSecond;
  }
  const laterHour = table.nextHour[h + 1] ?? -1;
  if (laterHour < 0) return -1;
  return laterHour * 3600 + table.firstMinute * 60 + table.firstSecond;
}

/**
 * The smallest matching wall time ≥ `fromWallMs` (rounded up to a whole second), or undefined
 * when no wall time matches within a whole Gregorian cycle, which means none ever will.
 */
export function nextMatchingWallMs(table: CronTable, fromWallMs: number): number | undefined {
  let days = Math.floor(fromWallMs / DAY_MS);
  let secondOfDay = Math.ceil((fromWallMs - days * DAY_MS) / SECOND_MS);
  if (secondOfDay >= SECONDS_PER_DAY) {
    days += 1;
    secondOfDay = 0;
  }
  let { year, month, day } = civilFromDays(days);
  let firstDays = days - (day - 1);
  const firstTimeOfDay = table.firstHour * 3600 + table.firstMinute * 60 + table.firstSecond;
  for (let scanned = 0; scanned < MONTH_SCAN_LIMIT; scanned++) {
    if ((table.monthBits >>> month) & 1) {
      // Days before the start day are past; `2 ** day - 1` covers bits 0..day-1.
      let mask = monthDayBits(table, year, month, firstDays) & ~((2 ** day - 1) | 0);
      if (mask !== 0) {
        let low = mask & -mask;
        let found = 31 - Math.clz32(low);
        if (found === day && secondOfDay > 0) {
          const time = timeOfDayAtOrAfter(table, secondOfDay);
          if (time >= 0) return (firstDays + found - 1) * DAY_MS + time * SECOND_MS;
          mask &= ~low;
          low = mask & -mask;
          found = 31 - Math.clz32(low);
        }
        if (mask !== 0) return (firstDays + found - 1) * DAY_MS + firstTimeOfDay * SECOND_MS;
      }
    }
    firstDays += daysInMonth(year, month);
    month += 1;
    if (month > 12) {
      month = 1;
      year += 1;
    }
    day = 1;
    secondOfDay = 0;
  }
  return undefined;
}
