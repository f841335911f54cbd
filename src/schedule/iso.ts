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

/**
 * Scans `text` (no surrounding whitespace). Structure errors stop the scan with one problem;
 * range errors (month 13, 25:00, 2025-02-29) are all collected.
 */
export function parseIsoDateTime(text: string): IsoParseResult {
  const s: Scanner = { text, index: 0 };
  const parts: Part[] = [];
  const layout: readonly (readonly [number, string, string])[] = [
    [4, '', 'a 4-digit year'],
    [2, '-', 'a 2-digit month'],
    [2, '-', 'a 2-digit day'],
    [2, 'T', 'a 2-digit hour'],
    [2, ':', 'a 2-digit minute'],
  ];
  for (const [width, separator, what] of layout) {
    if (separator !== '') {
      const c = text[s.index];
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
  let second: Part = { value: 0, charIndex: s.index };
  let millisecond = 0;
  if (text[s.index] === ':') {
    s.index++;
    const charIndex = s.index;
    const value = readDigits(s, 2);
    if (value === undefined) return structureProblem(s, 'a 2-digit second');
    second = { value, charIndex };
    if (text[s.index] === '.') {
      s.index++;
      const start = s.index;
      while (isDigit(text[s.index])) s.index++;
      const digits = text.slice(start, s.index);
      if (digits.length === 0) return structureProblem(s, 'fraction digits');
      if (digits.length > 3) {
        return {
          ok: false,
          problems: [
            {
              charIndex: start,
              charCount: digits.length,
              reason: 'finer than a millisecond: use at most 3 fraction digits',
            },
          ],
        };
      }
      millisecond = Number(digits.padEnd(3, '0'));
    }
  }
  let offsetMs: number | undefined;
  const offsetStart = s.index;
  const sign = text[s.index];
  if (sign === 'Z' || sign === 'z') {
    offsetMs = 0;
    s.index++;
  } else if (sign === '+' || sign === '-') {
    s.index++;
    const hours = readDigits(s, 2);
    if (hours === undefined) return structureProblem(s, 'a 2-digit offset hour');
    if (text[s.index] !== ':') return structureProblem(s, "':' in the offset (±HH:MM)");
    s.index++;
    const minutes = readDigits(s, 2);
    if (minutes === undefined) return structureProblem(s, '2-digit offset minutes');
    if (hours > 23 || minutes > 59) {
      return {
        ok: false,
        problems: [
          {
            charIndex: offsetStart,
            charCount: 6,
            reason: `offset ${text.slice(offsetStart, s.index)} is out of range (at most ±23:59)`,
          },
        ],
      };
    }
    offsetMs = (sign === '-' ? -1 : 1) * (hours * HOUR_MS + minutes * MINUTE_MS);
  }
  if (s.index !== text.length) {
    return structureProblem(s, 'the end, Z or an offset ±HH:MM');
  }
  const [yearPart, monthPart, dayPart, hourPart, minutePart] = parts;
  if (!yearPart || !monthPart || !dayPart || !hourPart || !minutePart) {
    return structureProblem(s, ISO_SHAPE);
  }
  const problems: IsoProblem[] = [];
  const check = (part: Part, ok: boolean, reason: string): void => {
    if (!ok) problems.push({ charIndex: part.charIndex, charCount: 2, reason });
  };
  const month = monthPart.value;
  check(monthPart, month >= 1 && month <= 12, `month ${month} is out of range 01-12`);
  if (month >= 1 && month <= 12) {
    const dim = daysInMonth(yearPart.value, month);
    check(
      dayPart,
      dayPart.value >= 1 && dayPart.value <= dim,
      `day ${dayPart.value} does not exist in ${String(yearPart.value).padStart(4, '0')}-` +
        `${String(month).padStart(2, '0')} (it has ${dim} days)`,
    );
  }
  check(hourPart, hourPart.value <= 23, `hour ${hourPart.value} is out of range 00-23`);
  check(minutePart, minutePart.value <= 59, `minute ${minutePart.value} is out of range 00-59`);
  check(
    second,
    second.value <= 59,
    `second ${second.value} is out of range 00-59 (no leap seconds)`,
  );
  if (problems.length > 0) return { ok: false, problems };
  return {
    ok: true,
    value: {
      year: yearPart.value,
      month,
      day: dayPart.value,
      hour: hourPart.value,
      minute: minutePart.value,
      second: second.value,
      millisecond,
      offsetMs,
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
