/**
 * Cron field syntax: tokens → value sets (CronFields), with every problem collected as a
 * violation that names the field, the token, the characters and the reason. Semantics that need
 * more than one field (the never-fires check) run only when the fields involved parsed cleanly,
 * so one typo does not produce a cascade of derived complaints.
 */
import { maxDaysInMonth } from './civil.js';
import type { CronFields } from './cron-table.js';
import type { ScheduleViolation } from './violations.js';

export type CronFieldKey = 'second' | 'minute' | 'hour' | 'dayOfMonth' | 'month' | 'dayOfWeek';

export interface CronToken {
  readonly text: string;
  readonly charIndex: number;
  readonly tokenIndex: number;
}

interface FieldSpec {
  readonly key: CronFieldKey;
  readonly label: string;
  readonly min: number;
  readonly max: number;
  /** 3-letter names for min, min+1, …, upper case. */
  readonly names: readonly string[];
}

const MONTH_NAMES = [
  'JAN',
  'FEB',
  'MAR',
  'APR',
  'MAY',
  'JUN',
  'JUL',
  'AUG',
  'SEP',
  'OCT',
  'NOV',
  'DEC',
];
const DAY_NAMES = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];
const FULL_MONTH_NAMES = [
  'JANUARY',
  'FEBRUARY',
  'MARCH',
  'APRIL',
  'JUNE',
  'JULY',
  'AUGUST',
  'SEPTEMBER',
  'OCTOBER',
  'NOVEMBER',
  'DECEMBER',
];
const FULL_DAY_NAMES = [
  'SUNDAY',
  'MONDAY',
  'TUESDAY',
  'WEDNESDAY',
  'THURSDAY',
  'FRIDAY',
  'SATURDAY',
];

const SECOND: FieldSpec = { key: 'second', label: 'second', min: 0, max: 59, names: [] };
const MINUTE: FieldSpec = { key: 'minute', label: 'minute', min: 0, max: 59, names: [] };
const HOUR: FieldSpec = { key: 'hour', label: 'hour', min: 0, max: 23, names: [] };
const DAY_OF_MONTH: FieldSpec = {
  key: 'dayOfMonth',
  label: 'day of month',
  min: 1,
  max: 31,
  names: [],
};
const MONTH: FieldSpec = { key: 'month', label: 'month', min: 1, max: 12, names: MONTH_NAMES };
const DAY_OF_WEEK: FieldSpec = {
  key: 'dayOfWeek',
  label: 'day of week',
  min: 0,
  max: 7,
  names: DAY_NAMES,
};

/** Field specs in 6-field order; the 5-field form drops the first. */
const SPECS_6 = [SECOND, MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK];

/** Collects the values and extras of one field while its terms are parsed. */
interface FieldAccumulator {
  readonly values: Set<number>;
  isLastDay: boolean;
  readonly lastWeekdays: Set<number>;
  nth: { weekday: number; nth: number } | undefined;
}

class TermContext {
  constructor(
    readonly spec: FieldSpec,
    readonly token: CronToken,
    readonly violations: ScheduleViolation[],
  ) {}

  /** Records a violation over `[offset, offset + count)` of this token. */
  fail(offset: number, count: number, reason: string): undefined {
    this.violations.push({
      field: `schedule.${this.spec.key}`,
      reason,
      position: {
        tokenIndex: this.token.tokenIndex,
        charIndex: this.token.charIndex + offset,
        charCount: count,
      },
    });
    return undefined;
  }

  rangeText(): string {
    const { min, max, names } = this.spec;
    const first = names[0];
    const last = names[names.length - 1];
    return first !== undefined && last !== undefined
      ? `${min}-${max} or ${first}-${last}`
      : `${min}-${max}`;
  }

  /** A number or a 3-letter name at `[offset, offset + text.length)`. */
  value(text: string, offset: number): number | undefined {
    const { spec } = this;
    if (text === '') return this.fail(offset, 0, `missing value: expected ${this.rangeText()}`);
    if (/^\d+$/.test(text)) {
      const value = Number(text);
      if (value < spec.min || value > spec.max) {
        return this.fail(
          offset,
          text.length,
          `${text} is out of range for the ${spec.label} (${this.rangeText()})`,
        );
      }
      return value;
    }
    const upper = text.toUpperCase();
    const index = spec.names.indexOf(upper);
    if (index >= 0) return spec.min + index;
    return this.fail(offset, text.length, this.unknownValueReason(text, upper));
  }

  private unknownValueReason(text: string, upper: string): string {
    const { spec } = this;
    const fullMonth = FULL_MONTH_NAMES.indexOf(upper);
    const fullDay = FULL_DAY_NAMES.indexOf(upper);
    if (spec === MONTH && fullMonth >= 0) {
      return `full month names are not supported: write ${upper.slice(0, 3)}`;
    }
    if (spec === DAY_OF_WEEK && fullDay >= 0) {
      return `full day names are not supported: write ${upper.slice(0, 3)}`;
    }
    if (spec !== DAY_OF_WEEK && (DAY_NAMES.includes(upper) || fullDay >= 0)) {
      return `'${text}' is a day-of-week name; the ${spec.label} takes ${this.rangeText()}`;
    }
    if (spec !== MONTH && (MONTH_NAMES.includes(upper) || fullMonth >= 0)) {
      return `'${text}' is a month name; the ${spec.label} takes ${this.rangeText()}`;
    }
    return `'${text}' is not a valid ${spec.label}: expected ${this.rangeText()}`;
  }
}

function parseStep(ctx: TermContext, text: string, offset: number): number | undefined {
  if (text === '') return ctx.fail(offset, 0, "missing step after '/'");
  if (!/^\d+$/.test(text)) {
    return ctx.fail(offset, text.length, `step '${text}' must be a whole number`);
  }
  const step = Number(text);
  if (step === 0) return ctx.fail(offset, text.length, 'step 0 never advances: use 1 or more');
  return step;
}

function addRange(acc: FieldAccumulator, spec: FieldSpec, lo: number, hi: number, step: number) {
  for (let v = lo; v <= hi; v += step) acc.values.add(spec === DAY_OF_WEEK ? v % 7 : v);
}

/** Forms only the day fields know: `L`, `nL`, `n#k`, and the Quartz forms we reject. */
function parseDayExtras(
  ctx: TermContext,
  acc: FieldAccumulator,
  base: string,
  offset: number,
  hasStep: boolean,
): boolean {
  const upper = base.toUpperCase();
  const { spec } = ctx;
  if (spec === DAY_OF_MONTH) {
    if (upper === 'L') {
      if (hasStep) ctx.fail(offset, base.length, 'L takes no step');
      else acc.isLastDay = true;
      return true;
    }
    if (upper.startsWith('L-')) {
      ctx.fail(offset, base.length, 'L-n (n days before the end of the month) is not supported');
      return true;
    }
    if (upper === 'LW') {
      ctx.fail(offset, base.length, 'LW (last weekday of the month) is not supported');
      return true;
    }
    if (upper.endsWith('W')) {
      ctx.fail(offset, base.length, 'nW (nearest weekday) is not supported');
      return true;
    }
    return false;
  }
  if (spec !== DAY_OF_WEEK) return false;
  if (upper === 'L') {
    ctx.fail(offset, 1, 'L alone is not a day of week: write nL, e.g. 5L for the last Friday');
    return true;
  }
  const hash = base.indexOf('#');
  if (hash >= 0) {
    const weekday = ctx.value(base.slice(0, hash), offset);
    const nthText = base.slice(hash + 1);
    let nth: number | undefined;
    if (!/^\d+$/.test(nthText) || Number(nthText) < 1 || Number(nthText) > 5) {
      ctx.fail(offset + hash + 1, nthText.length, `k in n#k must be 1-5, got '${nthText}'`);
    } else {
      nth = Number(nthText);
    }
    if (hasStep) ctx.fail(offset, base.length, 'n#k takes no step');
    else if (weekday !== undefined && nth !== undefined) acc.nth = { weekday: weekday % 7, nth };
    return true;
  }
  if (upper.endsWith('L')) {
    const weekday = ctx.value(base.slice(0, -1), offset);
    if (hasStep) ctx.fail(offset, base.length, 'nL takes no step');
    else if (weekday !== undefined) acc.lastWeekdays.add(weekday % 7);
    return true;
  }
  return false;
}

function parseTerm(ctx: TermContext, acc: FieldAccumulator, term: string, offset: number): void {
  const { spec } = ctx;
  const slash = term.indexOf('/');
  if (slash >= 0 && term.indexOf('/', slash + 1) >= 0) {
    ctx.fail(offset, term.length, "more than one '/' in a term");
    return;
  }
  const base = slash >= 0 ? term.slice(0, slash) : term;
  const step = slash >= 0 ? parseStep(ctx, term.slice(slash + 1), offset + slash + 1) : 1;
  if (/^H($|[^A-Z])/i.test(base)) {
    ctx.fail(offset, base.length, 'H (hashed values) is not supported');
    return;
  }
  if (parseDayExtras(ctx, acc, base, offset, slash >= 0)) return;
  if (base.includes('#')) {
    ctx.fail(offset + base.indexOf('#'), 1, "'#' is only allowed in the day of week (n#k)");
    return;
  }
  if (base === '') {
    ctx.fail(offset, 0, `missing start before '/': write */${term.slice(slash + 1)}`);
    return;
  }
  let lo: number | undefined;
  let hi: number | undefined;
  if (base === '*' || base === '?') {
    lo = spec.min;
    hi = spec.max;
  } else {
    const dash = base.indexOf('-');
    if (dash >= 0) {
      if (dash === 0 || dash === base.length - 1) {
        ctx.fail(offset, base.length, `incomplete range '${base}': write a-b`);
        return;
      }
      lo = ctx.value(base.slice(0, dash), offset);
      hi = ctx.value(base.slice(dash + 1), offset + dash + 1);
      if (lo !== undefined && hi !== undefined && lo > hi) {
        const hint =
          spec === DAY_OF_WEEK
            ? ': a week does not wrap, list the days instead (SAT,SUN or 6-7)'
            : ': write the smaller value first, or list the values';
        ctx.fail(offset, base.length, `reversed range ${base} (${lo}-${hi})${hint}`);
        return;
      }
    } else {
      lo = ctx.value(base, offset);
      // `a/s` means `a-max/s`; a lone value is just itself.
      hi = slash >= 0 ? spec.max : lo;
    }
  }
  if (lo === undefined || hi === undefined || step === undefined) return;
  addRange(acc, spec, lo, hi, step);
}

interface ParsedField {
  readonly acc: FieldAccumulator;
  readonly isRestricted: boolean;
  readonly isClean: boolean;
}

function parseField(
  spec: FieldSpec,
  token: CronToken,
  violations: ScheduleViolation[],
): ParsedField {
  const before = violations.length;
  const ctx = new TermContext(spec, token, violations);
  const acc: FieldAccumulator = {
    values: new Set(),
    isLastDay: false,
    lastWeekdays: new Set(),
    nth: undefined,
  };
  const terms = token.text.split(',');
  if (spec === DAY_OF_WEEK && terms.length > 1 && token.text.includes('#')) {
    ctx.fail(0, token.text.length, 'n#k must be the whole day-of-week field (no lists)');
  } else {
    let offset = 0;
    for (const term of terms) {
      if (term === '') ctx.fail(offset, 0, 'empty list item');
      else parseTerm(ctx, acc, term, offset);
      offset += term.length + 1;
    }
  }
  const first = token.text[0];
  return {
    acc,
    isRestricted: first !== '*' && first !== '?',
    isClean: violations.length === before,
  };
}

const sorted = (values: Set<number>): number[] => [...values].sort((a, b) => a - b);

export interface ParsedCron {
  readonly fields: CronFields;
  /** Vixie's fixed-time job: no `*`, `?` or `/` in the second, minute or hour field. */
  readonly isFixed: boolean;
}

/**
 * Parses 5 or 6 field tokens (the caller has checked the count). Returns undefined when any
 * violation was recorded.
 */
export function parseCronTokens(
  tokens: readonly CronToken[],
  violations: ScheduleViolation[],
): ParsedCron | undefined {
  const before = violations.length;
  const specs = tokens.length === 6 ? SPECS_6 : SPECS_6.slice(1);
  const parsed = new Map<CronFieldKey, ParsedField>();
  let isFixed = true;
  specs.forEach((spec, i) => {
    const token = tokens[i];
    if (token === undefined) return;
    parsed.set(spec.key, parseField(spec, token, violations));
    if (spec === SECOND || spec === MINUTE || spec === HOUR) {
      if (/[*?/]/.test(token.text)) isFixed = false;
    }
  });
  const none: ParsedField = {
    acc: { values: new Set([0]), isLastDay: false, lastWeekdays: new Set(), nth: undefined },
    isRestricted: false,
    isClean: true,
  };
  const get = (key: CronFieldKey): ParsedField => parsed.get(key) ?? none;
  const dom = get('dayOfMonth');
  const month = get('month');
  const dow = get('dayOfWeek');
  const fields: CronFields = {
    seconds: sorted(get('second').acc.values),
    minutes: sorted(get('minute').acc.values),
    hours: sorted(get('hour').acc.values),
    daysOfMonth: sorted(dom.acc.values),
    hasLastDayOfMonth: dom.acc.isLastDay,
    months: sorted(month.acc.values),
    daysOfWeek: sorted(dow.acc.values),
    lastDaysOfWeek: sorted(dow.acc.lastWeekdays),
    nthDayOfWeek: dow.acc.nth,
    isDayOfMonthRestricted: dom.isRestricted,
    isDayOfWeekRestricted: dow.isRestricted,
  };
  if (dom.isClean && month.isClean && dow.isClean) {
    const domToken = tokens[specs.indexOf(DAY_OF_MONTH)];
    if (domToken !== undefined) checkCanFire(fields, domToken, violations);
  }
  return violations.length === before ? { fields, isFixed } : undefined;
}

/**
 * Under the AND rule (or with an unrestricted day of week) a day-of-month list whose smallest
 * day is beyond every selected month's longest length can never match: reject it at creation
 * rather than let a job sit silent forever. `L` always exists, so it exempts the field.
 */
function checkCanFire(
  fields: CronFields,
  domToken: CronToken,
  violations: ScheduleViolation[],
): void {
  if (fields.isDayOfMonthRestricted && fields.isDayOfWeekRestricted) return;
  if (fields.hasLastDayOfMonth) return;
  const smallestDay = fields.daysOfMonth[0];
  if (smallestDay === undefined) return;
  const longest = Math.max(...fields.months.map(maxDaysInMonth));
  if (smallestDay <= longest) return;
  const monthList = fields.months.map((m) => MONTH_NAMES[m - 1] ?? String(m)).join(',');
  violations.push({
    field: 'schedule.dayOfMonth',
    reason:
      `never fires: day ${smallestDay} does not exist in ${monthList} ` +
      `(at most ${longest} days)`,
    position: {
      tokenIndex: domToken.tokenIndex,
      charIndex: domToken.charIndex,
      charCount: domToken.text.length,
    },
  });
}
