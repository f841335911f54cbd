// Parsing and validation of schedule text. Method: tables. Accepted inputs are checked against
// the value sets they must expand to (names, steps, 7 = Sunday, L, nL, n#k, macros, the
// fixed/periodic split); rejected inputs are checked for the field, a reason substring and,
// where the text is at fault, the token and character position. Multi-error inputs check that
// every violation is reported, not only the first.
import t from 'tap';
import { ValidationError } from '../../../src/base/errors.js';
import { tryParseSchedule, parseSchedule } from '../../../src/schedule/parse.js';
import type { CronSchedule, ParseScheduleOptions } from '../../../src/schedule/parse.js';
import { describeViolation, positionOf } from '../../../src/schedule/violations.js';

const ANCHOR_MS = Date.UTC(2025, 0, 1);
const utc: ParseScheduleOptions = { timezone: 'UTC', anchorMs: ANCHOR_MS };

function cron(expression: string, timezone = 'UTC'): CronSchedule {
  const schedule = parseSchedule(expression, { timezone });
  if (schedule.kind !== 'cron') throw new Error(`${expression} is not cron`);
  return schedule;
}

const range = (lo: number, hi: number, step = 1): number[] => {
  const values: number[] = [];
  for (let v = lo; v <= hi; v += step) values.push(v);
  return values;
};

t.test('cron fields expand to the values the spec gives them', (t) => {
  const cases: readonly [string, keyof CronSchedule['fields'], unknown][] = [
    ['*/15 * * * *', 'minutes', [0, 15, 30, 45]],
    ['5/20 * * * *', 'minutes', [5, 25, 45]],
    ['*/90 * * * *', 'minutes', [0]],
    ['0-10/5,58 * * * *', 'minutes', [0, 5, 10, 58]],
    ['0 6-18/4 * * *', 'hours', [6, 10, 14, 18]],
    ['0 0 ? * *', 'daysOfMonth', range(1, 31)],
    ['0 0 */10 * *', 'daysOfMonth', [1, 11, 21, 31]],
    ['0 0 2-30/7 * *', 'daysOfMonth', [2, 9, 16, 23, 30]],
    ['0 0 1 JAN-DEC/3 *', 'months', [1, 4, 7, 10]],
    ['0 0 1 jan,Jul *', 'months', [1, 7]],
    ['0 0 1,15 * *', 'daysOfMonth', [1, 15]],
    ['0 0 * * */2', 'daysOfWeek', [0, 2, 4, 6]],
    ['0 0 * * 7', 'daysOfWeek', [0]],
    ['0 0 * * 5-7', 'daysOfWeek', [0, 5, 6]],
    ['0 0 * * 1/2', 'daysOfWeek', [0, 1, 3, 5]],
    ['0 0 * * mon-FRI', 'daysOfWeek', [1, 2, 3, 4, 5]],
    ['0 0 * * 5L,0L', 'lastDaysOfWeek', [0, 5]],
    ['0 0 * * 7L', 'lastDaysOfWeek', [0]],
    ['0 0 * * FRIL', 'lastDaysOfWeek', [5]],
    ['0 0 * * TUE#2', 'nthDayOfWeek', { weekday: 2, nth: 2 }],
    ['0 0 * * 7#5', 'nthDayOfWeek', { weekday: 0, nth: 5 }],
    ['0 0 L * *', 'hasLastDayOfMonth', true],
    ['0 0 L,15 * *', 'daysOfMonth', [15]],
    ['00 09 * * 01', 'hours', [9]],
    ['*/20 * * * * *', 'seconds', [0, 20, 40]],
    ['0 0 * * *', 'seconds', [0]],
  ];
  for (const [expression, key, expected] of cases) {
    t.same(cron(expression).fields[key], expected, `${expression}: ${key}`);
  }
  t.end();
});

t.test('a day field is unrestricted only when its text starts with * or ?', (t) => {
  const cases: readonly [string, boolean, boolean][] = [
    ['0 0 * * *', false, false],
    ['0 0 ? * ?', false, false],
    ['0 0 */2 * 1', false, true],
    ['0 0 13 * 5', true, true],
    ['0 0 L * *', true, false],
    ['0 0 1,15 * */2', true, false],
    ['0 0 * * 1#1', false, true],
  ];
  for (const [expression, dom, dow] of cases) {
    const { fields } = cron(expression);
    t.same(
      [fields.isDayOfMonthRestricted, fields.isDayOfWeekRestricted],
      [dom, dow],
      `${expression}: restricted (dom, dow)`,
    );
  }
  t.end();
});

t.test('fixed and periodic schedules are told apart as in the spec', (t) => {
  const fixed = ['30 2 * * *', '0,30 1 * * *', '0 1-3 * * *', '0 30 2 * * *', '@daily', '@weekly'];
  const periodic = [
    '*/15 * * * *',
    '0 * * * *',
    '*/20 1 * * *',
    '0/30 1 * * *',
    '0 */2 * * *',
    '*/10 30 2 * * *',
    '@hourly',
    '? 1 * * *',
  ];
  for (const e of fixed) t.equal(cron(e).isFixed, true, `${e} is fixed`);
  for (const e of periodic) t.equal(cron(e).isFixed, false, `${e} is periodic`);
  t.end();
});

t.test('macros expand case-insensitively', (t) => {
  const cases: readonly [string, string][] = [
    ['@yearly', '0 0 1 1 *'],
    ['@ANNUALLY', '0 0 1 1 *'],
    ['@Monthly', '0 0 1 * *'],
    ['@weekly', '0 0 * * 0'],
    ['@Daily', '0 0 * * *'],
    ['@midnight', '0 0 * * *'],
    ['@hourly', '0 * * * *'],
  ];
  for (const [macro, same] of cases) {
    t.same(cron(macro).fields, cron(same).fields, `${macro} = ${same}`);
  }
  t.end();
});

t.test('whitespace: runs of spaces and tabs separate fields; the ends are trimmed', (t) => {
  const schedule = cron(' \t0  9\t* *   1-5 \n');
  t.equal(schedule.expression, '0  9\t* *   1-5');
  t.same(schedule.fields.hours, [9]);
  t.same(schedule.fields.daysOfWeek, [1, 2, 3, 4, 5]);
  t.end();
});

t.test('intervals and one-offs', (t) => {
  const every = parseSchedule('every 1h30m', utc);
  t.same(every.kind === 'interval' && [every.periodMs, every.anchorMs], [5_400_000, ANCHOR_MS]);
  const mixed = parseSchedule('EVERY 1d2h3m4s5ms', utc);
  t.equal(mixed.kind === 'interval' && mixed.periodMs, 93_784_005, 'every unit adds up');
  const ms = parseSchedule('every 250ms', utc);
  t.equal(ms.kind === 'interval' && ms.periodMs, 250);
  const at = parseSchedule('at 2025-07-01T09:00', { timezone: 'America/New_York' });
  t.equal(at.kind === 'at' && at.slotMs, Date.UTC(2025, 6, 1, 13), 'wall time in the zone');
  const exact = parseSchedule('at 2025-07-01T09:00:30.5+02:00', { timezone: 'Asia/Tokyo' });
  t.equal(exact.kind === 'at' && exact.slotMs, Date.UTC(2025, 6, 1, 7, 0, 30, 500), 'offset wins');
  const jump = parseSchedule('at 2011-12-30T12:00', { timezone: 'Pacific/Apia' });
  t.equal(
    jump.kind === 'at' && jump.slotMs,
    Date.UTC(2011, 11, 30, 10),
    'a date skipped by a calendar jump resolves to the transition',
  );
  t.end();
});

t.test('zones: ids are case-normalised, links accepted', (t) => {
  t.equal(cron('0 9 * * *', 'america/new_york').timezone, 'America/New_York');
  t.equal(cron('0 9 * * *', 'US/Eastern').timezone, 'US/Eastern');
  t.equal(cron('0 9 * * *', 'Etc/GMT+5').timezone, 'Etc/GMT+5');
  t.end();
});

t.test('rare but valid expressions are accepted', (t) => {
  for (const e of ['0 0 29 2 *', '0 0 30 2 5', '0 0 31 1-12 *', '0 0 * 2 1#5', '0 0 L 2 *']) {
    t.ok(tryParseSchedule(e, utc).ok, `${e} is accepted`);
  }
  t.end();
});

/** [expression, timezone, field, reason substring, token index?, char index?] */
type Rejection = readonly [string, string, string, string, number?, number?];

const REJECTED: readonly Rejection[] = [
  ['', 'UTC', 'schedule', 'empty'],
  ['  \t ', 'UTC', 'schedule', 'empty'],
  ['* * * *', 'UTC', 'schedule', 'got 4'],
  ['* * * * * * *', 'UTC', 'schedule', 'year field'],
  ['60 * * * *', 'UTC', 'schedule.minute', 'out of range', 0, 0],
  ['* 24 * * *', 'UTC', 'schedule.hour', 'out of range', 1, 2],
  ['* * 0 * *', 'UTC', 'schedule.dayOfMonth', 'out of range', 2, 4],
  ['0 0 32 * *', 'UTC', 'schedule.dayOfMonth', '32 is out of range', 2, 4],
  ['* * * 13 *', 'UTC', 'schedule.month', 'out of range', 3, 6],
  ['* * * * 8', 'UTC', 'schedule.dayOfWeek', 'out of range', 4, 8],
  ['60 * * * * *', 'UTC', 'schedule.second', 'out of range', 0, 0],
  ['0 0 * * SAT-SUN', 'UTC', 'schedule.dayOfWeek', 'reversed range', 4, 8],
  ['0 30-10 * * *', 'UTC', 'schedule.hour', 'out of range', 1, 2],
  ['30-10 * * * *', 'UTC', 'schedule.minute', 'reversed range', 0, 0],
  ['*/0 * * * *', 'UTC', 'schedule.minute', 'step 0', 0, 2],
  ['1,,2 * * * *', 'UTC', 'schedule.minute', 'empty list item', 0, 2],
  [',1 * * * *', 'UTC', 'schedule.minute', 'empty list item', 0, 0],
  ['0 0 1, * *', 'UTC', 'schedule.dayOfMonth', 'empty list item', 2, 6],
  ['0 0 15W * *', 'UTC', 'schedule.dayOfMonth', 'nearest weekday', 2, 4],
  ['0 0 W * *', 'UTC', 'schedule.dayOfMonth', 'nearest weekday', 2, 4],
  ['0 0 L-3 * *', 'UTC', 'schedule.dayOfMonth', 'L-n', 2, 4],
  ['0 0 LW * *', 'UTC', 'schedule.dayOfMonth', 'LW', 2, 4],
  ['0 0 L/2 * *', 'UTC', 'schedule.dayOfMonth', 'L takes no step', 2, 4],
  ['0 0 * * L', 'UTC', 'schedule.dayOfWeek', 'L alone', 4, 8],
  ['0 0 * * 5L/2', 'UTC', 'schedule.dayOfWeek', 'nL takes no step', 4, 8],
  ['0 0 * * 1#1,2', 'UTC', 'schedule.dayOfWeek', 'whole day-of-week field', 4, 8],
  ['0 0 * * 1,2#2', 'UTC', 'schedule.dayOfWeek', 'whole day-of-week field', 4, 8],
  ['0 0 * * 1#6', 'UTC', 'schedule.dayOfWeek', 'must be 1-5', 4, 10],
  ['0 0 * * 1#0', 'UTC', 'schedule.dayOfWeek', 'must be 1-5', 4, 10],
  ['0 0 * * 8#1', 'UTC', 'schedule.dayOfWeek', 'out of range', 4, 8],
  ['0 0 * * 1#2/2', 'UTC', 'schedule.dayOfWeek', 'n#k takes no step', 4, 8],
  ['0 0 1#2 * *', 'UTC', 'schedule.dayOfMonth', "'#' is only allowed", 2, 5],
  ['0 0 * * 5L-1', 'UTC', 'schedule.dayOfWeek', "'5L' is not a valid day of week", 4, 8],
  ['H * * * *', 'UTC', 'schedule.minute', 'hashed', 0, 0],
  ['0 H(0-5) * * *', 'UTC', 'schedule.hour', 'hashed', 1, 2],
  ['0 0 * * MONDAY', 'UTC', 'schedule.dayOfWeek', 'full day names', 4, 8],
  ['0 0 1 JANUARY *', 'UTC', 'schedule.month', 'full month names', 3, 6],
  ['0 0 * MON *', 'UTC', 'schedule.month', 'day-of-week name', 3, 6],
  ['0 0 * * JAN', 'UTC', 'schedule.dayOfWeek', 'month name', 4, 8],
  ['0 0 JAN * *', 'UTC', 'schedule.dayOfMonth', 'month name', 2, 4],
  ['0 0 * FOO *', 'UTC', 'schedule.month', "'FOO' is not a valid month", 3, 6],
  ['a * * * *', 'UTC', 'schedule.minute', 'not a valid minute', 0, 0],
  ['-5 * * * *', 'UTC', 'schedule.minute', 'incomplete range', 0, 0],
  ['5- * * * *', 'UTC', 'schedule.minute', 'incomplete range', 0, 0],
  ['1-2-3 * * * *', 'UTC', 'schedule.minute', "'2-3' is not a valid minute", 0, 2],
  ['1/2/3 * * * *', 'UTC', 'schedule.minute', "more than one '/'", 0, 0],
  ['/5 * * * *', 'UTC', 'schedule.minute', 'missing start', 0, 0],
  ['*/ * * * *', 'UTC', 'schedule.minute', 'missing step', 0, 2],
  ['*/x * * * *', 'UTC', 'schedule.minute', 'whole number', 0, 2],
  ['1.5 * * * *', 'UTC', 'schedule.minute', 'not a valid minute', 0, 0],
  ['@reboot', 'UTC', 'schedule', 'unsupported macro', 0, 0],
  ['@every 5m', 'UTC', 'schedule', "'every <duration>'", 0, 0],
  ['@weekdays', 'UTC', 'schedule', 'unsupported macro', 0, 0],
  ['@weekends', 'UTC', 'schedule', 'unsupported macro', 0, 0],
  ['@minutely', 'UTC', 'schedule', 'unsupported macro', 0, 0],
  ['@secondly', 'UTC', 'schedule', 'unsupported macro', 0, 0],
  ['@daily 0', 'UTC', 'schedule', 'whole expression', 0, 0],
  ['0 0 30 2 *', 'UTC', 'schedule.dayOfMonth', 'never fires', 2, 4],
  ['0 0 31 4,6,9,11 *', 'UTC', 'schedule.dayOfMonth', 'never fires', 2, 4],
  ['0 0 30 2 */2', 'UTC', 'schedule.dayOfMonth', 'never fires', 2, 4],
  ['0 0 30,31 FEB ?', 'UTC', 'schedule.dayOfMonth', 'never fires', 2, 4],
  ['0 0 * * *', 'Foo/Bar', 'timezone', 'unknown time zone'],
  ['0 0 * * *', '', 'timezone', 'required'],
  ['0 0 * * *', '+05:00', 'timezone', 'offset'],
  ['0 0 * * *', 'UTC+3', 'timezone', 'offset'],
  ['every', 'UTC', 'schedule.every', 'missing duration', 1, 5],
  ['every 0s', 'UTC', 'schedule.every', 'longer than zero', 1, 6],
  ['every 0h0m', 'UTC', 'schedule.every', 'longer than zero', 1, 6],
  ['every 90', 'UTC', 'schedule.every', 'missing unit', 1, 8],
  ['every 5w', 'UTC', 'schedule.every', "unknown unit 'w'", 1, 7],
  ['every 5M', 'UTC', 'schedule.every', "unknown unit 'M'", 1, 7],
  ['every 1h30x', 'UTC', 'schedule.every', "unknown unit 'x'", 1, 10],
  ['every h', 'UTC', 'schedule.every', 'expected a number', 1, 6],
  ['every -5s', 'UTC', 'schedule.every', 'expected a number', 1, 6],
  ['every 1h 30m', 'UTC', 'schedule.every', 'without spaces', 2, 9],
  ['every 99999999999d', 'UTC', 'schedule.every', 'too long', 1, 6],
  ['at', 'UTC', 'schedule.at', 'missing date-time', 1, 2],
  ['at 2025-02-29T09:00', 'UTC', 'schedule.at', 'does not exist in 2025-02', 1, 11],
  ['at 2025-13-01T09:00', 'UTC', 'schedule.at', 'month 13', 1, 8],
  ['at 2025-07-01T24:00', 'UTC', 'schedule.at', 'hour 24', 1, 14],
  ['at 2025-07-01T09:60', 'UTC', 'schedule.at', 'minute 60', 1, 17],
  ['at 2025-07-01T09:00:60', 'UTC', 'schedule.at', 'leap seconds', 1, 20],
  ['at 2025-07-01 09:00', 'UTC', 'schedule.at', "expected 'T'", 1, 13],
  ['at 2025-07-01T09:00.5', 'UTC', 'schedule.at', "unexpected '.'", 1, 19],
  ['at 2025-07-01T09:00:00.1234', 'UTC', 'schedule.at', 'finer than a millisecond', 1, 23],
  ['at 2025-07-01T09:00+25:00', 'UTC', 'schedule.at', 'out of range', 1, 19],
  ['at 2025-07-01T09:00+0500', 'UTC', 'schedule.at', "':' in the offset", 1, 22],
  ['at 07/01/2025', 'UTC', 'schedule.at', '4-digit year', 1, 5],
  ['at 2025-07-01T09:00', 'Mars/Olympus', 'timezone', 'unknown time zone'],
  ['x'.repeat(2000), 'UTC', 'schedule', 'limit'],
];

t.test('rejected input names the field, the reason and the position', (t) => {
  for (const [expression, timezone, field, reason, tokenIndex, charIndex] of REJECTED) {
    const label = `'${expression.slice(0, 40)}' in '${timezone}'`;
    const result = tryParseSchedule(expression, { timezone, anchorMs: ANCHOR_MS });
    if (result.ok) {
      t.fail(`${label} must be rejected`);
      continue;
    }
    const match = result.violations.find((v) => v.field === field && v.reason.includes(reason));
    t.ok(match, `${label}: ${field} ~ '${reason}' in ${JSON.stringify(result.violations)}`);
    if (match !== undefined && charIndex !== undefined) {
      t.same(
        [positionOf(match)?.tokenIndex, positionOf(match)?.charIndex],
        [tokenIndex, charIndex],
        `${label}: position of ${field}`,
      );
    }
  }
  t.end();
});

t.test('an interval without an anchor is rejected, naming the anchor', (t) => {
  const result = tryParseSchedule('every 5m', { timezone: 'UTC' });
  t.equal(result.ok, false);
  t.match(!result.ok && result.violations, [{ field: 'anchorMs', reason: /anchor instant/ }]);
  t.equal(!result.ok && result.code, 'SCHEDULE_INVALID_INTERVAL');
  t.end();
});

t.test('every violation is collected, not just the first', (t) => {
  const result = tryParseSchedule('60 24 32 13 8', { timezone: 'Nowhere/Land' });
  if (result.ok) throw new Error('must be rejected');
  t.same(
    result.violations.map((v) => [v.field, positionOf(v)?.tokenIndex, positionOf(v)?.charIndex]),
    [
      ['schedule.minute', 0, 0],
      ['schedule.hour', 1, 3],
      ['schedule.dayOfMonth', 2, 6],
      ['schedule.month', 3, 9],
      ['schedule.dayOfWeek', 4, 12],
      ['timezone', undefined, undefined],
    ],
  );
  const inField = tryParseSchedule('0,61,-,*/0 * * * *', utc);
  t.equal(!inField.ok && inField.violations.length, 3, 'three bad terms in one field');
  t.end();
});

t.test('positions count from the start of the untrimmed text', (t) => {
  const result = tryParseSchedule('   0 0 32 * *', utc);
  const violation = !result.ok ? result.violations[0] : undefined;
  t.same(positionOf(violation ?? { field: '', reason: '' }), {
    tokenIndex: 2,
    charIndex: 7,
    charCount: 2,
  });
  t.end();
});

t.test('error codes follow the kind of schedule', (t) => {
  const cases: readonly [string, string, string][] = [
    ['0 0 32 * *', 'UTC', 'SCHEDULE_INVALID_CRON'],
    ['* * * *', 'UTC', 'SCHEDULE_INVALID_CRON'],
    ['0 0 32 * *', 'Foo/Bar', 'SCHEDULE_INVALID_CRON'],
    ['every 0s', 'UTC', 'SCHEDULE_INVALID_INTERVAL'],
    ['at 2025-02-30T00:00', 'UTC', 'SCHEDULE_INVALID_AT'],
    ['0 0 * * *', 'Foo/Bar', 'SCHEDULE_INVALID_TIMEZONE'],
  ];
  for (const [expression, timezone, code] of cases) {
    const result = tryParseSchedule(expression, { timezone, anchorMs: ANCHOR_MS });
    t.equal(!result.ok && result.code, code, `${expression} in ${timezone}`);
  }
  t.end();
});

t.test('parseSchedule throws a ValidationError carrying the violations', (t) => {
  const err = t.throws(() => parseSchedule('0 0 32 * MONDAY', { timezone: 'UTC' }));
  t.ok(err instanceof ValidationError, 'a ValidationError');
  if (err instanceof ValidationError) {
    t.equal(err.code, 'SCHEDULE_INVALID_CRON');
    t.equal(err.violations.length, 2);
    t.match(err.message, /schedule\.dayOfMonth: 32 is out of range/);
    t.equal(
      describeViolation(err.violations[0] ?? { field: '', reason: '' }),
      'schedule.dayOfMonth (token 2, char 4): 32 is out of range for the day of month (1-31)',
    );
  }
  t.end();
});

t.test('a parsed schedule is frozen', (t) => {
  const schedule = parseSchedule('0 9 * * *', utc);
  t.ok(Object.isFrozen(schedule));
  t.end();
});

t.test('cron and at schedules are compiled once per zone and text; intervals per anchor', (t) => {
  const a = parseSchedule('0 9 * * 1-5', { timezone: 'Europe/Paris' });
  t.equal(parseSchedule('0 9 * * 1-5', { timezone: 'Europe/Paris' }), a, 'the same value again');
  const utcOne = parseSchedule('0 9 * * 1-5', { timezone: 'UTC' });
  t.not(utcOne, a, 'another zone is another schedule');
  t.equal(utcOne.timezone, 'UTC');
  t.equal(a.timezone, 'Europe/Paris');
  const at = parseSchedule('at 2030-01-01T09:00', { timezone: 'Asia/Tokyo' });
  t.equal(parseSchedule('at 2030-01-01T09:00', { timezone: 'Asia/Tokyo' }), at);
  t.not(parseSchedule('at 2030-01-01T09:00', { timezone: 'UTC' }), at);
  const i1 = parseSchedule('every 90s', { timezone: 'UTC', anchorMs: 1000 });
  const i2 = parseSchedule('every 90s', { timezone: 'UTC', anchorMs: 2000 });
  t.equal(i1.kind === 'interval' && i1.anchorMs, 1000);
  t.equal(i2.kind === 'interval' && i2.anchorMs, 2000, 'an interval keeps its own anchor');
  // A refused schedule is refused every time, with its violations.
  for (let i = 0; i < 2; i++) {
    const r = tryParseSchedule('0 0 32 * *', { timezone: 'UTC' });
    t.equal(r.ok, false);
    if (!r.ok) t.match(r.violations[0]?.reason, /out of range/);
  }
  t.end();
});
