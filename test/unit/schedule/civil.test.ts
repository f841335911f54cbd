// Calendar arithmetic, instant formatting and the ISO subset reader, checked against Date (which
// tests may use) as an independent reference: seeded random day numbers and instants over the
// whole range Date supports, plus the edges (year 0, negative years, year 10000).
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import {
  DAY_MS,
  civilFromDays,
  daysFromCivil,
  daysInMonth,
  formatInstant,
  weekdayOfDays,
} from '../../../src/schedule/civil.js';
import { parseInstant, parseIsoDateTime } from '../../../src/schedule/iso.js';

const DATE_LIMIT_MS = 8.64e15;

t.test('formatInstant formats like Date.prototype.toISOString', (t) => {
  const r = new SeededRand(11);
  const edges = [0, -1, 1, -62_167_219_200_000, -62_135_596_800_000, 253_402_300_799_999];
  const samples = [...edges, 253_402_300_800_000, DATE_LIMIT_MS, -DATE_LIMIT_MS];
  for (let i = 0; i < 2000; i++) {
    samples.push(Math.floor((r.float() * 2 - 1) * DATE_LIMIT_MS));
  }
  const mismatches = samples.filter((ms) => formatInstant(ms) !== new Date(ms).toISOString());
  t.same(mismatches, [], 'every sample formats identically');
  t.end();
});

t.test('day numbers round-trip and agree with Date.UTC', (t) => {
  const r = new SeededRand(12);
  const bad: number[] = [];
  for (let i = 0; i < 5000; i++) {
    const days = Math.floor((r.float() * 2 - 1) * 1e8);
    const { year, month, day } = civilFromDays(days);
    const reference = new Date(days * DAY_MS);
    const ok =
      daysFromCivil(year, month, day) === days &&
      year === reference.getUTCFullYear() &&
      month === reference.getUTCMonth() + 1 &&
      day === reference.getUTCDate() &&
      weekdayOfDays(days) === reference.getUTCDay() &&
      day <= daysInMonth(year, month);
    if (!ok) bad.push(days);
  }
  t.same(bad, []);
  t.equal(daysInMonth(2024, 2), 29);
  t.equal(daysInMonth(2100, 2), 28);
  t.equal(daysInMonth(2000, 2), 29);
  t.end();
});

t.test('parseInstant reads the ISO subset exactly as Date.parse does', (t) => {
  const r = new SeededRand(13);
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  const bad: string[] = [];
  for (let i = 0; i < 2000; i++) {
    const year = 1 + r.int(9999);
    const month = 1 + r.int(12);
    const day = 1 + r.int(daysInMonth(year, month));
    let text = `${pad(year, 4)}-${pad(month)}-${pad(day)}T${pad(r.int(24))}:${pad(r.int(60))}`;
    if (r.chance(0.7)) {
      text += `:${pad(r.int(60))}`;
      if (r.chance(0.3)) text += `.${pad(r.int(1000), 3)}`;
    }
    text += r.chance(0.3) ? 'Z' : `${r.chance(0.5) ? '+' : '-'}${pad(r.int(15))}:${pad(r.int(60))}`;
    const parsed = parseInstant(text);
    if (!parsed.ok || parsed.ms !== Date.parse(text)) bad.push(text);
  }
  t.same(bad, []);
  t.end();
});

t.test('parseInstant needs an offset and ignores surrounding whitespace', (t) => {
  t.same(parseInstant(' 2025-01-01T00:00:00Z\n'), { ok: true, ms: Date.UTC(2025, 0, 1) });
  t.match(parseInstant('2025-01-01T00:00'), {
    ok: false,
    problems: [{ charIndex: 16, reason: /needs Z or an offset/ }],
  });
  t.match(parseInstant('2025-01-01T00:00:00.1234Z'), {
    ok: false,
    problems: [{ charIndex: 20, charCount: 4, reason: /finer than a millisecond/ }],
  });
  t.match(parseInstant('yesterday'), { ok: false, problems: [{ charIndex: 0 }] });
  t.end();
});

t.test('parseIsoDateTime collects every range problem', (t) => {
  const result = parseIsoDateTime('2025-13-32T25:61:61');
  t.match(result, {
    ok: false,
    problems: [
      { charIndex: 5, reason: /month 13/ },
      { charIndex: 11, reason: /hour 25/ },
      { charIndex: 14, reason: /minute 61/ },
      { charIndex: 17, reason: /second 61/ },
    ],
  });
  t.match(parseIsoDateTime('2024-02-29t12:00'), {
    ok: true,
    value: { day: 29, offsetMs: undefined },
  });
  t.end();
});
