/**
 * The one ISO 8601 subset the schedule layer reads: `YYYY-MM-DDTHH:MM[:SS[.mmm]]`, optionally
 * followed by `Z` or `±HH:MM`. `at` one-offs use it with or without an offset; query instants
 * (`--from`, anchors, the conformance vectors) require the offset. A hand-written scanner rather
 * than `Date.parse` or `Temporal.Instant.from`, because those accept far more (week dates,
 * nanoseconds, bracketed annotations) and cannot say which character is wrong.
 */
import { DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS, daysFromCivil, daysInMonth } from './civil.js';

export interface IsoDateTime {
  readonly year: number;
  readonly month: number;
  readonly day: number;
  readonly hour: number;
  readonly minute: number;
  readonly second: number;
  readonly millisecond: number;
  /** Present when the text ends in `Z` or `±HH:MM`: the text then names an exact instant. */
  readonly offsetMs: number | undefined;
}

/** What is wrong, and where: `[charIndex, charIndex + charCount)` of the scanned text. */
export interface IsoProblem {
  readonly charIndex: number;
  readonly charCount: number;
  readonly reason: string;
}

export type IsoParseResult =
  | { readonly ok: true; readonly value: IsoDateTime }
  | { readonly ok: false; readonly problems: readonly IsoProblem[] };

export const ISO_SHAPE = 'YYYY-MM-DDTHH:MM[:SS[.mmm]] followed by Z or ±HH:MM';

const isDigit = (c: string | undefined): boolean => c !== undefined && c >= '0' && c <= '9';

interface Scanner {
  readonly text: string;
  index: number;
}

/** Reads exactly `count` digits, or returns undefined with the scanner left on the bad char. */
function readDigits(s: Scanner, count: number): number | undefined {
  for (let k = 0; k < count; k++) {
    if (!isDigit(s.text[s.index + k])) {
      s.index += k;
      return undefined;
    }
  }
  const value = Number(s.text.slice(s.index, s.index + count));
  s.index += count;
  return value;
}

function structureProblem(s: Scanner, expected: string): IsoParseResult {
  const found = s.text[s.index];
  const reason =
    found === undefined
      ? `ends early: expected ${expected} (format ${ISO_SHAPE})`
      : `unexpected '${found}': expected ${expected} (format ${ISO_SHAPE})`;
  return { ok: false, problems: [{ charIndex: s.index, charCount: 1, reason }] };
}

interface Part {
  readonly value: number;
  readonly charIndex: number;
}

/** The fields as scanned, before any range check. */
interface Scanned {
  readonly parts: readonly Part[];
  readonly millisecond: number;
  readonly offsetMs: number | undefined;
}

const DATE_TIME_LAYOUT: readonly (readonly [number, string, string])[] = [
  [4, '', 'a 4-digit year'],
  [2, '-', 'a 2-digit month'],
  [2, '-', 'a 2-digit day'],
  [2, 'T', 'a 2-digit hour'],
  [2, ':', 'a 2-digit minute'],
];

function failAt(charIndex: number, charCount: number, reason: string): IsoParseResult {
  return { ok: false, problems: [{ charIndex, charCount, reason }] };
}

/** Date, hour and minute, then optional seconds and fraction: parts are [Y, M, D, h, m, s]. */
function scanDateTime(s: Scanner): { parts: Part[]; millisecond: number } | IsoParseResult {
  const parts: Part[] = [];
  for (const [width, separator, what] of DATE_TIME_LAYOUT) {
    if (separator !== '') {
      const c = s.text[s.index];
      if (c !== separator && !(separator === 'T' && c === 't')) {
        return structureProblem(s, `'${separator}'`);
      }
      s.index++;
    }
    const charIndex = s.index;
    const value = readDigits(s, width);
    if (value === undefined) return structureProblem(s, what);
    parts.push({ value, charIndex });
  }
  let millisecond = 0;
  if (s.text[s.index] !== ':') {
    parts.push({ value: 0, charIndex: s.index });
    return { parts, millisecond };
  }
  s.index++;
  const charIndex = s.index;
  const second = readDigits(s, 2);
  if (second === undefined) return structureProblem(s, 'a 2-digit second');
  parts.push({ value: second, charIndex });
  if (s.text[s.index] === '.') {
    s.index++;
    const start = s.index;
    while (isDigit(s.text[s.index])) s.index++;
    const digits = s.text.slice(start, s.index);
    if (digits.length === 0) return structureProblem(s, 'fraction digits');
    if (digits.length > 3) {
      return failAt(
        start,
        digits.length,
        'finer than a millisecond: use at most 3 fraction digits',
      );
    }
    millisecond = Number(digits.padEnd(3, '0'));
  }
  return { parts, millisecond };
}

/** `Z`, `±HH:MM` or nothing. */
function scanOffset(s: Scanner): { offsetMs: number | undefined } | IsoParseResult {
  const start = s.index;
  const sign = s.text[s.index];
  if (sign === 'Z' || sign === 'z') {
    s.index++;
    return { offsetMs: 0 };
  }
  if (sign !== '+' && sign !== '-') return { offsetMs: undefined };
  s.index++;
  const hours = readDigits(s, 2);
  if (hours === undefined) return structureProblem(s, 'a 2-digit offset hour');
  if (s.text[s.index] !== ':') return structureProblem(s, "':' in the offset (±HH:MM)");
  s.index++;
  const minutes = readDigits(s, 2);
  if (minutes === undefined) return structureProblem(s, '2-digit offset minutes');
  if (hours > 23 || minutes > 59) {
    const text = s.text.slice(start, s.index);
    return failAt(start, s.index - start, `offset ${text} is out of range (at most ±23:59)`);
  }
  return { offsetMs: (sign === '-' ? -1 : 1) * (hours * HOUR_MS + minutes * MINUTE_MS) };
}

function scan(text: string): Scanned | IsoParseResult {
  const s: Scanner = { text, index: 0 };
  const dateTime = scanDateTime(s);
  if ('ok' in dateTime) return dateTime;
  const offset = scanOffset(s);
  if ('ok' in offset) return offset;
  if (s.index !== text.length) return structureProblem(s, 'the end, Z or an offset ±HH:MM');
  return { parts: dateTime.parts, millisecond: dateTime.millisecond, offsetMs: offset.offsetMs };
}

const pad2 = (value: number): string => String(value).padStart(2, '0');

/**
 * Scans `text` (no surrounding whitespace). Structure errors stop the scan with one problem;
 * range errors (month 13, 25:00, 2025-02-29) are all collected.
 */
export function parseIsoDateTime(text: string): IsoParseResult {
  const scanned = scan(text);
  if ('ok' in scanned) return scanned;
  const [year, month, day, hour, minute, second] = scanned.parts;
  if (!year || !month || !day || !hour || !minute || !second) {
    return failAt(0, text.length, `expected ${ISO_SHAPE}`);
  }
  const problems: IsoProblem[] = [];
  const check = (part: Part, ok: boolean, reason: string): void => {
    if (!ok) problems.push({ charIndex: part.charIndex, charCount: 2, reason });
  };
  check(month, month.value >= 1 && month.value <= 12, `month ${month.value} is out of range 01-12`);
  if (month.value >= 1 && month.value <= 12) {
    const dim = daysInMonth(year.value, month.value);
    const yearMonth = `${String(year.value).padStart(4, '0')}-${pad2(month.value)}`;
    check(
      day,
      day.value >= 1 && day.value <= dim,
      `day ${day.value} does not exist in ${yearMonth} (it has ${dim} days)`,
    );
  }
  check(hour, hour.value <= 23, `hour ${hour.value} is out of range 00-23`);
  check(minute, minute.value <= 59, `minute ${minute.value} is out of range 00-59`);
  check(
    second,
    second.value <= 59,
    `second ${second.value} is out of range 00-59 (no leap seconds)`,
  );
  if (problems.length > 0) return { ok: false, problems };
  return {
    ok: true,
    value: {
      year: year.value,
      month: month.value,
      day: day.value,
      hour: hour.value,
      minute: minute.value,
      second: second.value,
      millisecond: scanned.millisecond,
      offsetMs: scanned.offsetMs,
    },
  };
}

/** The wall time of an ISO value as wall milliseconds (the local time read as if it were UTC). */
export function isoWallMs(value: IsoDateTime): number {
  return (
    daysFromCivil(value.year, value.month, value.day) * DAY_MS +
    value.hour * HOUR_MS +
    value.minute * MINUTE_MS +
    value.second * SECOND_MS +
    value.millisecond
  );
}

export type InstantParseResult =
  | { readonly ok: true; readonly ms: number }
  | { readonly ok: false; readonly problems: readonly IsoProblem[] };

/**
 * Parses an exact instant: the ISO subset above with a mandatory `Z` or offset. Surrounding
 * whitespace is ignored.
 */
export function parseInstant(text: string): InstantParseResult {
  const trimmed = text.trim();
  const lead = text.length - text.trimStart().length;
  const result = parseIsoDateTime(trimmed);
  if (!result.ok) {
    return {
      ok: false,
      problems: result.problems.map((p) => ({ ...p, charIndex: p.charIndex + lead })),
    };
  }
  if (result.value.offsetMs === undefined) {
    return {
      ok: false,
      problems: [
        {
          charIndex: lead + trimmed.length,
          charCount: 0,
          reason: 'an instant needs Z or an offset ±HH:MM at the end',
        },
      ],
    };
  }
  return { ok: true, ms: isoWallMs(result.value) - result.value.offsetMs };
}
