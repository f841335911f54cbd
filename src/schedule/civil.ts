/**
 * Proleptic Gregorian calendar arithmetic on plain numbers. The schedule code works on "wall
 * milliseconds": a local date and time encoded as if it were a UTC instant, so a wall time and an
 * instant differ by exactly the zone offset. Doing this with integer maths instead of `Date` or
 * Temporal objects keeps the hot path of next-fire free of allocations and of the ambient clock.
 * The day-number conversions are Howard Hinnant's `days_from_civil` / `civil_from_days`.
 */

export const SECOND_MS = 1_000;
export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;
export const SECONDS_PER_DAY = 86_400;

/** A calendar date: `month` 1–12, `day` 1–31. */
export interface CivilDate {
  readonly year: number;
  readonly month: number;
  readonly day: number;
}

/** Days since 1970-01-01 of a proleptic Gregorian date. */
export function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const dayOfEra =
    yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}

/** The date of a day number (days since 1970-01-01). */
export function civilFromDays(days: number): CivilDate {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra -
      Math.floor(dayOfEra / 1460) +
      Math.floor(dayOfEra / 36_524) -
      Math.floor(dayOfEra / 146_096)) /
      365,
  );
  const dayOfYear =
    dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const mp = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  return { year, month, day };
}

export function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** Length of a month (1–12) in a given year. */
export function daysInMonth(year: number, month: number): number {
  if (month === 2 && isLeapYear(year)) return 29;
  return MONTH_DAYS[month - 1] ?? 0;
}

/** The longest a month can be in any year: February counts 29. */
export function maxDaysInMonth(month: number): number {
  return month === 2 ? 29 : (MONTH_DAYS[month - 1] ?? 0);
}

/** 0 = Sunday … 6 = Saturday, for a day number. 1970-01-01 was a Thursday. */
export function weekdayOfDays(days: number): number {
  return (((days + 4) % 7) + 7) % 7;
}

function pad(value: number, width: number): string {
  return String(value).padStart(width, '0');
}

/**
 * Formats UTC milliseconds exactly as `Date.prototype.toISOString()` does (the wire format of
 * the spec and of `tickctl preview`), including the six-digit signed years outside 0000–9999.
 */
export function formatInstant(ms: number): string {
  const days = Math.floor(ms / DAY_MS);
  const msOfDay = ms - days * DAY_MS;
  const { year, month, day } = civilFromDays(days);
  const yearText =
    year >= 0 && year <= 9999 ? pad(year, 4) : (year < 0 ? '-' : '+') + pad(Math.abs(year), 6);
  const hour = Math.floor(msOfDay / HOUR_MS);
  const minute = Math.floor((msOfDay % HOUR_MS) / MINUTE_MS);
  const second = Math.floor((msOfDay % MINUTE_MS) / SECOND_MS);
  const milli = msOfDay % SECOND_MS;
  return (
    `${yearText}-${pad(month, 2)}-${pad(day, 2)}` +
    `T${pad(hour, 2)}:${pad(minute, 2)}:${pad(second, 2)}.${pad(milli, 3)}Z`
  );
}
