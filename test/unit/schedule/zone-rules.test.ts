// The cached offset table must say what Temporal says. Method: seeded random instants from 1850
// to 2150 in zones with unusual histories (LMT offsets with seconds, 30- and 45-minute offsets,
// calendar jumps, zones without DST); for each, the segment's offset, its start and its end are
// compared with Temporal's offsets at, just before and just after them.
import { Temporal } from '@js-temporal/polyfill';
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { formatInstant } from '../../../src/schedule/civil.js';
import { ZoneRules } from '../../../src/schedule/zone-rules.js';

const ZONES = [
  'America/New_York',
  'Europe/Amsterdam',
  'Australia/Lord_Howe',
  'Pacific/Chatham',
  'Pacific/Apia',
  'Asia/Kolkata',
  'Africa/Casablanca',
  'Antarctica/Troll',
  'UTC',
];

const temporalOffset = (zone: string, ms: number): number =>
  Temporal.Instant.fromEpochMilliseconds(ms).toZonedDateTimeISO(zone).offsetNanoseconds / 1e6;

t.test('segments agree with Temporal', (t) => {
  const r = new SeededRand(21);
  const from = Date.UTC(1850, 0, 1);
  const to = Date.UTC(2150, 0, 1);
  const bad: string[] = [];
  for (let i = 0; i < 300; i++) {
    const zone = ZONES[r.int(ZONES.length)] ?? 'UTC';
    const ms = from + Math.floor(r.float() * (to - from));
    const segment = ZoneRules.forZone(zone).segmentAt(ms);
    const ok =
      segment.startMs <= ms &&
      ms < segment.endMs &&
      segment.offsetMs === temporalOffset(zone, ms) &&
      segment.offsetMs === temporalOffset(zone, segment.startMs) &&
      segment.offsetMs === temporalOffset(zone, segment.endMs - 1) &&
      segment.prevOffsetMs === temporalOffset(zone, segment.startMs - 1);
    if (!ok) bad.push(`${zone} at ${formatInstant(ms)}: ${JSON.stringify(segment)}`);
  }
  t.same(bad, []);
  t.end();
});

t.test('a transition is a segment boundary with the offsets on both sides', (t) => {
  const rules = ZoneRules.forZone('America/New_York');
  const gap = rules.segmentAt(Date.UTC(2025, 2, 9, 7));
  t.same(
    [gap.startMs, gap.offsetMs, gap.prevOffsetMs],
    [Date.UTC(2025, 2, 9, 7), -4 * 3_600_000, -5 * 3_600_000],
  );
  t.equal(rules.offsetAt(Date.UTC(2025, 2, 9, 7) - 1), -5 * 3_600_000);
  t.equal(ZoneRules.forZone('America/New_York'), rules, 'one shared table per zone');
  t.end();
});
