// Differential test of nextFire against a brute-force oracle (oracle.ts), with seeded random
// cron expressions in zones chosen for their transitions: DST gaps and overlaps of 30 min, 1 h,
// 2 h and 3 h, transitions at :45 and at midnight, permanent offset changes, and calendar jumps
// of a whole day. Method: pick a transition, a window of hours around it and an expression biased
// towards the local hours and dates of that window; the chain of nextFire calls from the window
// start must equal the oracle's minute-by-minute (or second-by-second) set, and nextFire from a
// few random probe instants must return the first oracle fire after the probe. The seed is in
// every message; SCHEDULE_ORACLE_SEED=<n> replays a run, SCHEDULE_ORACLE_CASES=<n> widens it.
import { Temporal } from '@js-temporal/polyfill';
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { formatInstant } from '../../../src/schedule/civil.js';
import { nextFire } from '../../../src/schedule/next-fire.js';
import { tryParseSchedule } from '../../../src/schedule/parse.js';
import type { CronSchedule } from '../../../src/schedule/parse.js';
import { intlOffsetMs, oracleFires } from './oracle.js';

const SEED = Number(process.env['SCHEDULE_ORACLE_SEED'] ?? 20_250_309);
const CASES = Number(process.env['SCHEDULE_ORACLE_CASES'] ?? 360);
const HOUR_MS = 3_600_000;

/** Zones and the years whose transitions are interesting in them. */
const ZONES: readonly (readonly [string, number, number])[] = [
  ['America/New_York', 2005, 2035],
  ['America/New_York', 1950, 1969],
  ['Europe/London', 1960, 1975],
  ['Europe/London', 2000, 2035],
  ['Australia/Lord_Howe', 2000, 2035],
  ['Pacific/Chatham', 2000, 2035],
  ['America/Santiago', 2010, 2030],
  ['America/Havana', 2010, 2030],
  ['Antarctica/Troll', 2010, 2035],
  ['Antarctica/Troll', 2010, 2035],
  ['Antarctica/Casey', 2009, 2021],
  ['Antarctica/Casey', 2009, 2021],
  ['Africa/Casablanca', 2012, 2030],
  ['America/St_Johns', 2005, 2030],
  ['Asia/Tehran', 2010, 2022],
  ['Europe/Moscow', 2010, 2015],
  ['Asia/Pyongyang', 2015, 2019],
  ['Pacific/Apia', 2011, 2012],
  ['Pacific/Kwajalein', 1993, 1994],
  ['Asia/Kolkata', 2000, 2035],
  ['UTC', 2000, 2035],
];

const transitionCache = new Map<string, number[]>();

function transitionsOf(zone: string, fromYear: number, toYear: number): number[] {
  const key = `${zone}:${fromYear}`;
  const cached = transitionCache.get(key);
  if (cached !== undefined) return cached;
  const list: number[] = [];
  let cursor: Temporal.ZonedDateTime | null = Temporal.Instant.fromEpochMilliseconds(
    Date.UTC(fromYear, 0, 1),
  ).toZonedDateTimeISO(zone);
  const endMs = Date.UTC(toYear + 1, 0, 1);
  for (;;) {
    cursor = cursor.getTimeZoneTransition('next');
    if (cursor === null || cursor.epochMilliseconds >= endMs) break;
    list.push(cursor.epochMilliseconds);
  }
  transitionCache.set(key, list);
  return list;
}

function pick<T>(r: SeededRand, items: readonly T[]): T {
  const item = items[r.int(items.length)];
  if (item === undefined) throw new Error('pick from an empty list');
  return item;
}

const DAY_NAMES = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];
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

/**
 * A random field over [lo, hi], preferring `hot` values (the window's local hours, dates …).
 * `star` is the chance of `*`/`?`; with `isFixed` only values, lists and plain ranges are drawn.
 */
function field(
  r: SeededRand,
  lo: number,
  hi: number,
  hot: readonly number[],
  star: number,
  isFixed = false,
): string {
  const value = (): number =>
    r.chance(0.75) && hot.length > 0 ? pick(r, hot) : lo + r.int(hi - lo + 1);
  if (!isFixed && r.chance(star)) return r.chance(0.1) ? '?' : '*';
  switch (r.int(isFixed ? 3 : 6)) {
    case 0:
      return String(value());
    case 1: {
      const values = [...new Set([value(), value(), value()])].sort((a, b) => a - b);
      return values.join(',');
    }
    case 2: {
      const a = value();
      const b = Math.min(hi, a + r.int(4));
      return `${Math.max(lo, a - r.int(2))}-${b}`;
    }
    case 3:
      return `*/${1 + r.int(Math.max(1, Math.floor((hi - lo) / 2)))}`;
    case 4: {
      const a = Math.max(lo, value() - r.int(3));
      return `${a}-${Math.min(hi, a + 2 + r.int(10))}/${1 + r.int(4)}`;
    }
    default:
      return `${value()}/${1 + r.int(Math.max(1, hi - lo))}`;
  }
}

interface Window {
  readonly zone: string;
  readonly fromMs: number;
  readonly toMs: number;
  /** Local wall times around the transition, to aim the expression at. */
  readonly hotWallsMs: readonly number[];
}

function pickWindow(r: SeededRand, sixFields: boolean): Window {
  const [zone, fromYear, toYear] = pick(r, ZONES);
  const transitions = transitionsOf(zone, fromYear, toYear);
  const lengthMs = (sixFields ? 6 : 30) * HOUR_MS;
  const centreMs =
    transitions.length > 0
      ? pick(r, transitions)
      : Date.UTC(fromYear + r.int(toYear - fromYear + 1), r.int(12), 1 + r.int(28), r.int(24));
  // Start before the transition most of the time, sometimes just after it (in a second pass).
  const fromMs = centreMs - r.int(lengthMs - HOUR_MS) - (sixFields ? 0 : HOUR_MS) + r.int(60_000);
  const before = intlOffsetMs(zone, centreMs - 1);
  const after = intlOffsetMs(zone, centreMs);
  const hotWallsMs = [
    centreMs + before - 60_000,
    centreMs + before,
    centreMs + after,
    fromMs + before,
  ];
  return { zone, fromMs, toMs: fromMs + lengthMs, hotWallsMs };
}

function expressionFor(r: SeededRand, window: Window, sixFields: boolean): string {
  const walls = window.hotWallsMs.map((ms) => new Date(ms));
  const hours = walls.flatMap((d) => [d.getUTCHours(), (d.getUTCHours() + 1) % 24]);
  const minutes = [0, 15, 30, 45, 59, ...walls.map((d) => d.getUTCMinutes())];
  const days = walls.map((d) => d.getUTCDate());
  const weekdays = walls.map((d) => d.getUTCDay());
  const months = walls.map((d) => d.getUTCMonth() + 1);
  const parts: string[] = [];
  // Half the expressions are fixed-time, the ones the DST gap and overlap rules apply to.
  const isFixed = r.chance(0.5);
  const fixedSeconds = ['0', '30', '0,30', '5-10', '59'];
  if (sixFields)
    parts.push(pick(r, isFixed ? fixedSeconds : [...fixedSeconds, '*/15', '*/20', '*']));
  parts.push(field(r, 0, 59, minutes, 0.15, isFixed));
  parts.push(field(r, 0, 23, hours, 0.2, isFixed));
  const dom = r.chance(0.08) ? 'L' : field(r, 1, 31, days, 0.65);
  parts.push(dom);
  let month = field(r, 1, 12, months, 0.8);
  if (month !== '*' && r.chance(0.3))
    month = month.replace(/\d+/g, (n) => MONTH_NAMES[Number(n) - 1] ?? n);
  parts.push(month);
  let dow: string;
  const weekday = pick(r, weekdays);
  const roll = r.float();
  if (roll < 0.06) dow = `${weekday}L`;
  else if (roll < 0.12) dow = `${pick(r, DAY_NAMES.concat(['7']))}#${1 + r.int(5)}`;
  else if (roll < 0.18) dow = `${DAY_NAMES[weekday] ?? 'SUN'}#${1 + r.int(5)}`;
  else dow = field(r, 0, 7, weekdays, 0.6);
  parts.push(r.chance(0.2) ? dow.replace(/^\d$/, (n) => DAY_NAMES[Number(n) % 7] ?? n) : dow);
  return parts.join(' ');
}

function chain(schedule: CronSchedule, fromMs: number, toMs: number): number[] {
  const fires: number[] = [];
  let cursor = fromMs;
  for (;;) {
    const next = nextFire(schedule, cursor);
    if (next === undefined || next > toMs) return fires;
    fires.push(next);
    cursor = next;
  }
}

const iso = (list: readonly number[]): string[] => list.map(formatInstant);

t.test('nextFire matches the brute-force oracle around transitions', (t) => {
  const r = new SeededRand(SEED);
  let compared = 0;
  let withFires = 0;
  while (compared < CASES) {
    const sixFields = r.chance(0.25);
    const window = pickWindow(r, sixFields);
    const expression = expressionFor(r, window, sixFields);
    const parsed = tryParseSchedule(expression, { timezone: window.zone });
    if (!parsed.ok) continue; // e.g. day 31 in a 30-day month only: rejected, draw again
    const schedule = parsed.schedule;
    if (schedule.kind !== 'cron') throw new Error('cron expected');
    compared++;
    const expected = oracleFires(schedule, window.fromMs, window.toMs);
    if (expected.length > 0) withFires++;
    const probes = [0, 1, 2].map(() => window.fromMs + r.int(window.toMs - window.fromMs));
    const probeAnswers = probes.map((p) => {
      const next = nextFire(schedule, p);
      return next === undefined || next > window.toMs ? 'none in window' : formatInstant(next);
    });
    const probeExpected = probes.map((p) => {
      const next = expected.find((f) => f > p);
      return next === undefined ? 'none in window' : formatInstant(next);
    });
    t.same(
      { fires: iso(chain(schedule, window.fromMs, window.toMs)), probes: probeAnswers },
      { fires: iso(expected), probes: probeExpected },
      `seed ${SEED} case ${compared}: '${expression}' in ${window.zone} ` +
        `(${formatInstant(window.fromMs)}, ${formatInstant(window.toMs)}]`,
    );
  }
  // The generator must aim well enough that most comparisons are about actual fires.
  t.ok(withFires > CASES / 2, `${withFires} of ${CASES} windows hold fires`);
  t.end();
});
