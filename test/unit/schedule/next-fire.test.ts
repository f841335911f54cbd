// nextFire and nextFires on cases the vectors do not cover: transitions of every kind the spec
// names (2 h and 3 h DST-like changes, midnight overlaps, permanent offset changes, calendar
// jumps), rare and never-firing expressions, the strictly-after rule, intervals, one-offs, the
// slot range limits, and the fire set's independence from query order and restarts. Method:
// fixed inputs with expected instants worked out by hand from the zone's offsets.
import t from 'tap';
import { formatInstant } from '../../../src/schedule/civil.js';
import { SLOT_MS_MAX, nextFire, nextFires } from '../../../src/schedule/next-fire.js';
import { parseSchedule } from '../../../src/schedule/parse.js';
import type { Schedule } from '../../../src/schedule/parse.js';

const ms = (iso: string): number => Date.parse(iso);

function fires(
  expression: string,
  timezone: string,
  fromIso: string,
  count: number,
  anchorIso?: string,
): string[] {
  const anchorMs = anchorIso === undefined ? undefined : ms(anchorIso);
  const schedule = parseSchedule(expression, { timezone, anchorMs });
  return nextFires(schedule, ms(fromIso), count).map(formatInstant);
}

/** [expression, zone, from, expected fires, what it shows] */
type Case = readonly [string, string, string, readonly string[], string];

const CASES: readonly Case[] = [
  [
    '0 9 * * *',
    'Pacific/Apia',
    '2011-12-28T00:00:00Z',
    ['2011-12-28T19:00:00.000Z', '2011-12-29T19:00:00.000Z', '2011-12-30T19:00:00.000Z'],
    'Samoa skips 2011-12-30: a calendar jump, so no catch-up; 12-29 and 12-31 are 24 h apart',
  ],
  [
    '0 9 * * *',
    'Pacific/Kwajalein',
    '1993-08-19T00:00:00Z',
    ['1993-08-19T21:00:00.000Z', '1993-08-20T21:00:00.000Z', '1993-08-21T21:00:00.000Z'],
    'Kwajalein skips 1993-08-21 (−12 → +12)',
  ],
  [
    '45 23 * * 5',
    'Asia/Pyongyang',
    '2018-05-01T00:00:00Z',
    ['2018-05-04T15:00:00.000Z', '2018-05-11T14:45:00.000Z'],
    'a Friday 23:45 skipped by the 23:30 → 00:00 gap fires at Saturday 00:00 +09',
  ],
  [
    '30 1 * * *',
    'Antarctica/Troll',
    '2025-03-29T00:00:00Z',
    ['2025-03-29T01:30:00.000Z', '2025-03-30T01:00:00.000Z'],
    'Troll +00 → +02: a 2 h gap is DST-like, the skipped 01:30 fires at the transition',
  ],
  [
    '30 1 * * *',
    'Antarctica/Troll',
    '2025-10-25T00:00:00Z',
    ['2025-10-25T23:30:00.000Z', '2025-10-27T01:30:00.000Z'],
    'Troll +02 → +00: a 2 h overlap fires a fixed schedule in the first pass only',
  ],
  [
    '*/30 1 * * *',
    'Antarctica/Troll',
    '2025-10-25T23:00:00Z',
    [
      '2025-10-25T23:30:00.000Z',
      '2025-10-26T01:00:00.000Z',
      '2025-10-26T01:30:00.000Z',
      '2025-10-27T01:00:00.000Z',
    ],
    'Troll overlap, periodic with a restricted hour: both passes',
  ],
  [
    '0 4 * * *',
    'Antarctica/Casey',
    '2019-10-03T00:00:00Z',
    ['2019-10-03T19:00:00.000Z', '2019-10-04T17:00:00.000Z'],
    'Casey +08 → +11: exactly 3 h still counts as DST-like, so 04:00 fires at the transition',
  ],
  [
    '0 1 * * *',
    'Antarctica/Casey',
    '2020-03-07T00:00:00Z',
    ['2020-03-07T14:00:00.000Z', '2020-03-08T17:00:00.000Z'],
    'Casey +11 → +08: the 3 h overlap drops the second 01:00',
  ],
  [
    '10 0 * * *',
    'America/Havana',
    '2025-11-01T12:00:00Z',
    ['2025-11-02T04:10:00.000Z', '2025-11-03T05:10:00.000Z'],
    'an overlap at midnight: first pass',
  ],
  [
    '*/20 0 * * *',
    'America/Havana',
    '2025-11-02T03:00:00Z',
    [
      '2025-11-02T04:00:00.000Z',
      '2025-11-02T04:20:00.000Z',
      '2025-11-02T04:40:00.000Z',
      '2025-11-02T05:00:00.000Z',
      '2025-11-02T05:20:00.000Z',
      '2025-11-02T05:40:00.000Z',
      '2025-11-03T05:00:00.000Z',
    ],
    'an overlap at midnight, periodic: both passes',
  ],
  [
    '0 0 * * *',
    'America/Havana',
    '2025-03-08T12:00:00Z',
    ['2025-03-09T05:00:00.000Z', '2025-03-10T04:00:00.000Z'],
    'a gap at midnight: the skipped 00:00 fires at 01:00 CDT',
  ],
  [
    '30 2 * * *',
    'Europe/Moscow',
    '2011-03-26T00:00:00Z',
    ['2011-03-26T23:00:00.000Z', '2011-03-27T22:30:00.000Z'],
    'a permanent change (Moscow 2011, +03 → +04) is handled like DST',
  ],
  [
    '30 1 * * *',
    'Europe/Moscow',
    '2014-10-25T12:00:00Z',
    ['2014-10-25T21:30:00.000Z', '2014-10-26T22:30:00.000Z'],
    'a permanent change back (Moscow 2014, +04 → +03): first pass only',
  ],
  [
    '10 1-3 * * *',
    'America/New_York',
    '2025-03-09T00:00:00Z',
    ['2025-03-09T06:10:00.000Z', '2025-03-09T07:00:00.000Z', '2025-03-09T07:10:00.000Z'],
    'an hour range reaching past the gap keeps the skipped 02:10, at the transition',
  ],
  [
    '0 0 * 2 1#5',
    'UTC',
    '2025-01-01T00:00:00Z',
    ['2044-02-29T00:00:00.000Z', '2072-02-29T00:00:00.000Z', '2112-02-29T00:00:00.000Z'],
    'a fifth Monday in February: decades apart',
  ],
  [
    '0 0 29 2 *',
    'UTC',
    '2096-03-01T00:00:00Z',
    ['2104-02-29T00:00:00.000Z'],
    '2100 is no leap year',
  ],
  [
    '0 12 L 2 *',
    'UTC',
    '2099-12-31T00:00:00Z',
    ['2100-02-28T12:00:00.000Z', '2101-02-28T12:00:00.000Z'],
    'L is the 28th of February 2100',
  ],
  [
    '0 0 * * 5L',
    'UTC',
    '2025-01-01T00:00:00Z',
    ['2025-01-31T00:00:00.000Z', '2025-02-28T00:00:00.000Z', '2025-03-28T00:00:00.000Z'],
    'nL: the last Friday',
  ],
  [
    '0 0 */10 * 1',
    'UTC',
    '2025-01-01T00:00:00Z',
    ['2025-03-31T00:00:00.000Z', '2025-04-21T00:00:00.000Z'],
    '*/10 leaves the day of month unrestricted: AND with Monday',
  ],
  [
    '0 0 2-30/7 * 6',
    'UTC',
    '2025-08-01T00:00:00Z',
    ['2025-08-02T00:00:00.000Z', '2025-08-09T00:00:00.000Z', '2025-08-16T00:00:00.000Z'],
    'both day fields restricted: OR (here the days coincide with Saturdays)',
  ],
  [
    '0 0 2-30/7 * 5',
    'UTC',
    '2025-08-01T00:00:00Z',
    ['2025-08-02T00:00:00.000Z', '2025-08-08T00:00:00.000Z', '2025-08-09T00:00:00.000Z'],
    'both day fields restricted: OR',
  ],
  [
    '* * * * * *',
    'UTC',
    '2025-01-01T00:00:00.500Z',
    ['2025-01-01T00:00:01.000Z', '2025-01-01T00:00:02.000Z'],
    'cron slots are whole seconds strictly after the query',
  ],
  [
    '59 59 23 31 12 *',
    'Asia/Tokyo',
    '2025-12-31T14:59:58Z',
    ['2025-12-31T14:59:59.000Z', '2026-12-31T14:59:59.000Z'],
    'the last second of a local year',
  ],
];

t.test('transitions, rare days and day rules', (t) => {
  for (const [expression, zone, from, expected, what] of CASES) {
    t.same(fires(expression, zone, from, expected.length), expected, `${what}: '${expression}'`);
  }
  t.end();
});

t.test('nextFire is strictly after the query instant', (t) => {
  const schedule = parseSchedule('0 0 1 * *', { timezone: 'UTC' });
  const slot = ms('2025-02-01T00:00:00Z');
  t.equal(nextFire(schedule, slot - 1), slot, 'one ms before a slot gives the slot');
  t.equal(nextFire(schedule, slot), ms('2025-03-01T00:00:00Z'), 'a slot itself gives the next');
  const fall = parseSchedule('45 1 * * *', { timezone: 'America/New_York' });
  t.equal(
    nextFire(fall, ms('2025-11-02T06:10:00Z')),
    ms('2025-11-03T06:45:00Z'),
    'inside the second pass, the first-pass 01:45 is past: next day',
  );
  t.end();
});

t.test('expressions that never fire in a zone end the search', (t) => {
  const springForward = parseSchedule('* 2 * 3 0#2', { timezone: 'America/New_York' });
  t.equal(
    nextFire(springForward, ms('2025-01-01T00:00:00Z')),
    undefined,
    'a periodic 02:xx on the second Sunday of March always falls in the gap',
  );
  const impossible = parseSchedule('0 0 */31 * 1#5', { timezone: 'UTC' });
  t.equal(nextFire(impossible, 0), undefined, 'day 1 is never a fifth Monday');
  t.end();
});

t.test('slots stay within years 0001-9999', (t) => {
  const yearly = parseSchedule('0 0 1 1 *', { timezone: 'UTC' });
  t.equal(nextFire(yearly, ms('9999-01-01T00:00:00Z')), undefined);
  t.equal(nextFire(yearly, -1e15), ms('0001-01-01T00:00:00Z'), 'an earlier query starts at 0001');
  const every = parseSchedule('every 1d', { timezone: 'UTC', anchorMs: 0 });
  t.equal(nextFire(every, SLOT_MS_MAX), undefined);
  t.end();
});

t.test('intervals are anchored and ignore the zone', (t) => {
  t.same(
    fires('every 90s', 'UTC', '2025-01-01T00:00:00Z', 2, '2025-01-01T00:00:00Z'),
    ['2025-01-01T00:01:30.000Z', '2025-01-01T00:03:00.000Z'],
    'a query at the anchor gets the next slot',
  );
  t.same(
    fires('every 1h', 'UTC', '2025-01-01T00:00:00Z', 1, '2024-01-01T00:30:00Z'),
    ['2025-01-01T00:30:00.000Z'],
    'an old anchor keeps its phase',
  );
  t.same(
    fires('every 7d', 'America/New_York', '2025-03-01T00:00:00Z', 2, '2025-02-28T17:00:00Z'),
    ['2025-03-07T17:00:00.000Z', '2025-03-14T17:00:00.000Z'],
    'elapsed time: the wall time moves from 12:00 EST to 13:00 EDT',
  );
  const huge = parseSchedule('every 1ms', { timezone: 'UTC', anchorMs: -8e15 });
  t.equal(nextFire(huge, 8e12), 8e12 + 1, 'far from the anchor the arithmetic stays exact');
  t.end();
});

t.test('one-offs fire once', (t) => {
  const at = parseSchedule('at 2025-07-01T09:00', { timezone: 'Europe/Paris' });
  t.same(nextFires(at, 0, 5).map(formatInstant), ['2025-07-01T07:00:00.000Z']);
  t.equal(nextFire(at, ms('2025-07-01T07:00:00Z')), undefined, 'not after its own instant');
  t.end();
});

t.test('the fire set does not depend on query order or restarts', (t) => {
  const schedules: Schedule[] = [
    parseSchedule('30 1 * * *', { timezone: 'Europe/London' }),
    parseSchedule('*/45 0-3 * * *', { timezone: 'Australia/Lord_Howe' }),
    parseSchedule('0 3 * * *', { timezone: 'Pacific/Chatham' }),
  ];
  for (const schedule of schedules) {
    const start = ms('2025-01-01T00:00:00Z');
    const chained = nextFires(schedule, start, 400);
    // Restart at every slot and at arbitrary instants between them, in reverse order.
    const probes = chained.map((slot, i) => (i % 2 === 0 ? slot : slot - 1234));
    const reversed = [...probes].reverse().map((p) => nextFire(schedule, p));
    const expected = [...chained.slice(1), undefined].map((next, i) =>
      i % 2 === 0 ? next : chained[i],
    );
    t.same(reversed.reverse(), expected, `${schedule.expression} in ${schedule.timezone}`);
  }
  t.end();
});

t.test('nextFires counts and order', (t) => {
  const schedule = parseSchedule('*/7 * * * *', { timezone: 'UTC' });
  t.same(nextFires(schedule, 0, 0), []);
  const list = nextFires(schedule, 0, 50);
  t.equal(list.length, 50);
  t.ok(
    list.every((v, i) => i === 0 || v > (list[i - 1] ?? Infinity)),
    'strictly ascending',
  );
  t.throws(() => nextFires(schedule, 0, -1), /count must be a whole number/);
  t.throws(() => nextFire(schedule, NaN), /afterMs must be a finite number/);
  t.end();
});
