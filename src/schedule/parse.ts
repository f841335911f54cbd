/**
 * Schedule text + IANA zone → a compiled Schedule, or every violation found.
 *
 * Three kinds of text are accepted (docs/schedules.md is the user-facing description):
 * - cron: 5 or 6 fields, or one of the `@` macros;
 * - `every <duration>`: a fixed period from an anchor instant;
 * - `at <date-time>`: a one-off, a wall time in the zone or an exact instant.
 *
 * Compilation happens once, here: a cron schedule carries its lookup tables and a handle on its
 * zone's offset table, so next-fire does no parsing and no string work.
 */
import { Temporal } from '@js-temporal/polyfill';
import { ValidationError } from '../base/errors.js';
import { DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS } from './civil.js';
import { parseCronTokens } from './cron-syntax.js';
import type { CronToken } from './cron-syntax.js';
import { compileCronTable } from './cron-table.js';
import type { CronFields, CronTable } from './cron-table.js';
import { ISO_SHAPE, isoWallMs, parseIsoDateTime } from './iso.js';
import type { IsoDateTime } from './iso.js';
import type { ScheduleErrorCode, ScheduleViolation } from './violations.js';
import { ZoneRules } from './zone-rules.js';

export interface ParseScheduleOptions {
  /** The IANA zone cron fields and `at` wall times are read in (`UTC`, `Europe/Paris`, …). */
  readonly timezone: string;
  /**
   * The anchor A of an `every` schedule, UTC ms: fires are A + k·period, k ≥ 0. Required for
   * intervals (the API passes the job's creation time unless the user gave one); ignored otherwise.
   */
  readonly anchorMs?: number | undefined;
}

interface ScheduleBase {
  /** The text as given, without surrounding whitespace. */
  readonly expression: string;
  /** The zone id as Temporal spells it (case-normalised). */
  readonly timezone: string;
}

export interface CronSchedule extends ScheduleBase {
  readonly kind: 'cron';
  readonly fieldCount: 5 | 6;
  readonly fields: CronFields;
  /** Vixie's fixed-time job: DST gaps fire once at the transition, overlaps fire once. */
  readonly isFixed: boolean;
  readonly table: CronTable;
  readonly zone: ZoneRules;
}

export interface IntervalSchedule extends ScheduleBase {
  readonly kind: 'interval';
  readonly periodMs: number;
  readonly anchorMs: number;
}

export interface AtSchedule extends ScheduleBase {
  readonly kind: 'at';
  readonly slotMs: number;
}

export type Schedule = CronSchedule | IntervalSchedule | AtSchedule;

export type ParseScheduleResult =
  | { readonly ok: true; readonly schedule: Schedule }
  | {
      readonly ok: false;
      readonly code: ScheduleErrorCode;
      readonly violations: readonly ScheduleViolation[];
    };

/** Longer input is rejected before any parsing: a schedule is a line, not a document. */
export const EXPRESSION_CHARS_MAX = 1024;

/** The longest interval period: the span of instants JavaScript can represent at all. */
export const PERIOD_MS_MAX = 8.64e15;

const MACROS: ReadonlyMap<string, string> = new Map([
  ['@yearly', '0 0 1 1 *'],
  ['@annually', '0 0 1 1 *'],
  ['@monthly', '0 0 1 * *'],
  ['@weekly', '0 0 * * 0'],
  ['@daily', '0 0 * * *'],
  ['@midnight', '0 0 * * *'],
  ['@hourly', '0 * * * *'],
]);

const MACRO_HINTS: ReadonlyMap<string, string> = new Map([
  ['@reboot', 'a cluster has no single reboot to run at'],
  ['@every', "write 'every <duration>' without the '@', e.g. every 90s"],
]);

const UNIT_MS: ReadonlyMap<string, number> = new Map([
  ['ms', 1],
  ['s', SECOND_MS],
  ['m', MINUTE_MS],
  ['h', HOUR_MS],
  ['d', DAY_MS],
]);

/** Splits on runs of spaces and tabs, remembering where each token starts. */
function tokenize(text: string): CronToken[] {
  const tokens: CronToken[] = [];
  for (const match of text.matchAll(/[^ \t]+/g)) {
    tokens.push({ text: match[0], charIndex: match.index, tokenIndex: tokens.length });
  }
  return tokens;
}

function violationAt(
  field: string,
  reason: string,
  charIndex: number,
  charCount: number,
  tokenIndex?: number,
): ScheduleViolation {
  const position =
    tokenIndex === undefined ? { charIndex, charCount } : { tokenIndex, charIndex, charCount };
  return { field, reason, position };
}

const validZones = new Map<string, string>();

/**
 * Checks an IANA zone id and returns Temporal's spelling of it, or the reason it is refused.
 * Numeric offsets are refused even though Temporal takes them: a schedule names a place, whose
 * rules can change, not a fixed offset.
 */
export function checkTimezone(
  timezone: string,
):
  | { readonly ok: true; readonly timezone: string }
  | { readonly ok: false; readonly reason: string } {
  const known = validZones.get(timezone);
  if (known !== undefined) return { ok: true, timezone: known };
  if (timezone.trim() === '') {
    return { ok: false, reason: 'is required: an IANA zone name such as UTC or Europe/Paris' };
  }
  if (/^[+\-\d]/.test(timezone) || /^(utc|gmt)[+-]/i.test(timezone)) {
    return {
      ok: false,
      reason: `'${timezone}' is an offset, not an IANA zone name such as America/New_York`,
    };
  }
  try {
    const id = Temporal.Instant.fromEpochMilliseconds(0).toZonedDateTimeISO(timezone).timeZoneId;
    validZones.set(timezone, id);
    return { ok: true, timezone: id };
  } catch {
    // Temporal throws RangeError for an id missing from the runtime's tz data; that is the answer.
    return { ok: false, reason: `unknown time zone '${timezone}': expected an IANA name` };
  }
}

function parseCron(
  expression: string,
  timezone: string,
  violations: ScheduleViolation[],
): CronSchedule | undefined {
  let text = expression;
  if (expression.startsWith('@')) {
    const lower = expression.toLowerCase();
    const expansion = MACROS.get(lower);
    if (expansion === undefined) {
      const word = lower.split(/[ \t]/)[0] ?? lower;
      const hint =
        MACRO_HINTS.get(word) ??
        (MACROS.has(word)
          ? 'a macro must be the whole expression'
          : `supported: ${[...MACROS.keys()].join(', ')}`);
      violations.push(
        violationAt('schedule', `unsupported macro '${word}': ${hint}`, 0, word.length, 0),
      );
      return undefined;
    }
    text = expansion;
  }
  const tokens = tokenize(text);
  if (tokens.length !== 5 && tokens.length !== 6) {
    const extra = tokens.length === 7 ? ' (a year field is not supported)' : '';
    violations.push(
      violationAt(
        'schedule',
        `expected 5 or 6 cron fields, got ${tokens.length}${extra}`,
        0,
        expression.length,
      ),
    );
    return undefined;
  }
  const parsed = parseCronTokens(tokens, violations);
  if (parsed === undefined) return undefined;
  return {
    kind: 'cron',
    expression,
    timezone,
    fieldCount: tokens.length === 6 ? 6 : 5,
    fields: parsed.fields,
    isFixed: parsed.isFixed,
    table: compileCronTable(parsed.fields),
    zone: ZoneRules.forZone(timezone),
  };
}

/** Reads `<integer><unit>` groups; one violation at the first character that does not fit. */
function parseDuration(token: CronToken, violations: ScheduleViolation[]): number | undefined {
  const fail = (offset: number, count: number, reason: string): undefined => {
    violations.push(
      violationAt('schedule.every', reason, token.charIndex + offset, count, token.tokenIndex),
    );
    return undefined;
  };
  const { text } = token;
  let totalMs = 0;
  let i = 0;
  while (i < text.length) {
    const digits = /^\d+/.exec(text.slice(i))?.[0] ?? '';
    if (digits === '') {
      return fail(i, 1, `expected a number at '${text.slice(i)}': e.g. every 90s, every 1h30m`);
    }
    const unit = /^[a-zA-Z]+/.exec(text.slice(i + digits.length))?.[0] ?? '';
    const unitMs = UNIT_MS.get(unit);
    if (unitMs === undefined) {
      const where = i + digits.length;
      return unit === ''
        ? fail(where, 0, `missing unit after ${digits}: use ms, s, m, h or d`)
        : fail(where, unit.length, `unknown unit '${unit}': use ms, s, m, h or d`);
    }
    totalMs += Number(digits) * unitMs;
    i += digits.length + unit.length;
  }
  if (totalMs === 0) return fail(0, text.length, 'the period must be longer than zero');
  if (!(totalMs <= PERIOD_MS_MAX)) {
    return fail(0, text.length, `the period is too long (at most ${PERIOD_MS_MAX / DAY_MS}d)`);
  }
  return totalMs;
}

function parseInterval(
  expression: string,
  tokens: readonly CronToken[],
  timezone: string,
  anchorMs: number | undefined,
  violations: ScheduleViolation[],
): IntervalSchedule | undefined {
  const before = violations.length;
  const duration = tokens[1];
  let periodMs: number | undefined;
  if (duration === undefined) {
    violations.push(
      violationAt(
        'schedule.every',
        'missing duration: e.g. every 90s, every 1h30m, every 250ms',
        expression.length,
        0,
        1,
      ),
    );
  } else {
    periodMs = parseDuration(duration, violations);
  }
  const extra = tokens[2];
  if (extra !== undefined) {
    violations.push(
      violationAt(
        'schedule.every',
        'unexpected text after the duration: write the groups without spaces, e.g. 1h30m',
        extra.charIndex,
        expression.length - extra.charIndex,
        2,
      ),
    );
  }
  if (anchorMs === undefined) {
    violations.push({
      field: 'anchorMs',
      reason: "an interval needs an anchor instant (by default the job's creation time)",
    });
  } else if (!Number.isSafeInteger(anchorMs) || Math.abs(anchorMs) > PERIOD_MS_MAX) {
    violations.push({ field: 'anchorMs', reason: `${anchorMs} is not an instant in UTC ms` });
  }
  if (violations.length > before || periodMs === undefined || anchorMs === undefined) {
    return undefined;
  }
  return { kind: 'interval', expression, timezone, periodMs, anchorMs };
}

/**
 * The instant of a wall time: the first pass of an overlap, and the transition instant itself
 * for a wall time that a gap (of any size, calendar jumps included) skipped.
 */
function resolveWallTime(value: IsoDateTime, timezone: string): number {
  const wall = new Temporal.PlainDateTime(
    value.year,
    value.month,
    value.day,
    value.hour,
    value.minute,
    value.second,
    value.millisecond,
  );
  const earlier = wall.toZonedDateTime(timezone, { disambiguation: 'earlier' });
  const later = wall.toZonedDateTime(timezone, { disambiguation: 'later' });
  if (later.toPlainDateTime().equals(wall)) return earlier.epochMilliseconds;
  // In a gap, `earlier` lands before the transition (shifted back by the gap's size).
  const transition = earlier.getTimeZoneTransition('next');
  return transition === null ? later.epochMilliseconds : transition.epochMilliseconds;
}

function parseAt(
  expression: string,
  tokens: readonly CronToken[],
  timezone: string | undefined,
  violations: ScheduleViolation[],
): AtSchedule | undefined {
  const before = violations.length;
  const token = tokens[1];
  if (token === undefined) {
    violations.push(
      violationAt('schedule.at', `missing date-time: at ${ISO_SHAPE}`, expression.length, 0, 1),
    );
    return undefined;
  }
  const extra = tokens[2];
  if (extra !== undefined) {
    violations.push(
      violationAt(
        'schedule.at',
        "unexpected text after the date-time (write it as one token with 'T')",
        extra.charIndex,
        expression.length - extra.charIndex,
        2,
      ),
    );
  }
  const result = parseIsoDateTime(token.text);
  if (!result.ok) {
    for (const p of result.problems) {
      violations.push(
        violationAt(
          'schedule.at',
          p.reason,
          token.charIndex + p.charIndex,
          p.charCount,
          token.tokenIndex,
        ),
      );
    }
    return undefined;
  }
  if (violations.length > before || timezone === undefined) return undefined;
  const { offsetMs } = result.value;
  const slotMs =
    offsetMs === undefined
      ? resolveWallTime(result.value, timezone)
      : isoWallMs(result.value) - offsetMs;
  return { kind: 'at', expression, timezone, slotMs };
}

function codeOf(kind: Schedule['kind'], violations: readonly ScheduleViolation[]) {
  const onlyZone = violations.every((v) => v.field === 'timezone');
  if (onlyZone) return 'SCHEDULE_INVALID_TIMEZONE';
  switch (kind) {
    case 'cron':
      return 'SCHEDULE_INVALID_CRON';
    case 'interval':
      return 'SCHEDULE_INVALID_INTERVAL';
    case 'at':
      return 'SCHEDULE_INVALID_AT';
  }
}

/** How many compiled cron and `at` schedules the parse cache keeps. */
export const SCHEDULE_CACHE_MAX = 4096;

/**
 * Compiled cron and `at` schedules by zone and text. They depend on nothing else, are frozen and
 * are never written to, so jobs that share a schedule (bulk registration, the dispatcher's copy)
 * share one compiled value and skip the parse. Intervals depend on their anchor: not cached.
 * Full, it starts again empty: a bound, not a policy.
 */
const compiled = new Map<string, Map<string, ParseScheduleResult & { ok: true }>>();
let compiledCount = 0;

/** Parses and compiles; never throws on bad input (see parseSchedule for the throwing form). */
export function tryParseSchedule(text: string, options: ParseScheduleOptions): ParseScheduleResult {
  // By zone, then by text: no key string is built per call (bulk registration asks per job).
  let byText = compiled.get(options.timezone);
  const hit = byText?.get(text);
  if (hit !== undefined) return hit;
  const result = parseUncached(text, options);
  if (result.ok && result.schedule.kind !== 'interval') {
    if (compiledCount >= SCHEDULE_CACHE_MAX) {
      compiled.clear();
      compiledCount = 0;
      byText = undefined;
    }
    if (byText === undefined) {
      byText = new Map<string, ParseScheduleResult & { ok: true }>();
      compiled.set(options.timezone, byText);
    }
    byText.set(text, Object.freeze(result));
    compiledCount++;
  }
  return result;
}

function parseUncached(text: string, options: ParseScheduleOptions): ParseScheduleResult {
  const violations: ScheduleViolation[] = [];
  const zone = checkTimezone(options.timezone);
  const timezone = zone.ok ? zone.timezone : undefined;
  // Checked before any scanning, so oversized input costs nothing.
  const isTooLong = text.length > EXPRESSION_CHARS_MAX;
  const lead = isTooLong ? 0 : text.length - text.trimStart().length;
  const expression = isTooLong ? '' : text.trim();
  const tokens = tokenize(expression);
  const keyword = tokens[0]?.text.toLowerCase();
  const kind: Schedule['kind'] =
    keyword === 'every' ? 'interval' : keyword === 'at' ? 'at' : 'cron';

  let schedule: Schedule | undefined;
  if (isTooLong) {
    violations.push({
      field: 'schedule',
      reason: `is ${text.length} characters long; the limit is ${EXPRESSION_CHARS_MAX}`,
    });
  } else if (expression === '') {
    violations.push(
      violationAt(
        'schedule',
        "is empty: expected 5 or 6 cron fields, a macro such as @daily, 'every <duration>' or " +
          "'at <date-time>'",
        0,
        text.length,
      ),
    );
  } else if (kind === 'interval') {
    schedule = parseInterval(expression, tokens, timezone ?? 'UTC', options.anchorMs, violations);
  } else if (kind === 'at') {
    schedule = parseAt(expression, tokens, timezone, violations);
  } else {
    // A cron schedule cannot be compiled without its zone; still report its syntax problems.
    schedule = parseCron(expression, timezone ?? 'UTC', violations);
  }
  if (!zone.ok) violations.push({ field: 'timezone', reason: zone.reason });
  if (violations.length > 0 || schedule === undefined || timezone === undefined) {
    const shifted = violations.map((v) =>
      v.position === undefined
        ? v
        : { ...v, position: { ...v.position, charIndex: v.position.charIndex + lead } },
    );
    return { ok: false, code: codeOf(kind, violations), violations: shifted };
  }
  return { ok: true, schedule: Object.freeze(schedule) };
}

/**
 * Parses and compiles a schedule.
 * @throws ValidationError with code SCHEDULE_INVALID_* and every violation, each naming its field
 *   (`schedule`, `schedule.<cron field>`, `schedule.every`, `schedule.at`, `timezone`, `anchorMs`)
 *   and, for text problems, the position.
 */
export function parseSchedule(text: string, options: ParseScheduleOptions): Schedule {
  const result = tryParseSchedule(text, options);
  if (!result.ok) throw new ValidationError(result.code, result.violations);
  return result.schedule;
}
