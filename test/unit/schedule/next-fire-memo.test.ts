// nextFire remembers its last answer per compiled cron schedule (next-fire.ts): this test checks
// that the cache never changes an answer. Seeded random cron expressions in zones with DST gaps,
// overlaps and calendar jumps are asked, through one shared compiled schedule, a sequence of
// instants built to hit the cache's edges: the previous answer itself, one ms either side of it,
// its question again, a point between question and answer, and jumps back and forward. Every
// answer must equal the uncached search's. SCHEDULE_MEMO_SEED=<n> replays a run.
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { nextFire, searchCronFire } from '../../../src/schedule/next-fire.js';
import { tryParseSchedule, type CronSchedule } from '../../../src/schedule/parse.js';

const SEED = Number(process.env['SCHEDULE_MEMO_SEED'] ?? 20_261_129);
const ZONES = [
  'UTC',
  'Europe/Paris',
  'America/New_York',
  'Australia/Lord_Howe',
  'Pacific/Chatham',
  'America/St_Johns',
  'Pacific/Apia',
  'Asia/Kolkata',
];
const DAY_MS = 86_400_000;

function cronText(r: SeededRand): string {
  const pick = (choices: readonly string[]): string => choices[r.int(choices.length)]!;
  const minute = pick(['0', '30', '*/15', '*', '5,45', '59']);
  const hour = pick(['*', '2', '1-3', '*/6', '0', '23']);
  const dom = pick(['*', '*', '1', '15', 'L', '29']);
  const month = pick(['*', '*', '3', '10,11', '2']);
  const dow = pick(['*', '*', '*', '0', '1-5']);
  return r.chance(0.2)
    ? `${pick(['0', '*/20', '30'])} ${minute} ${hour} ${dom} ${month} ${dow}`
    : `${minute} ${hour} ${dom} ${month} ${dow}`;
}

t.test('the remembered answer never differs from a fresh search', (t) => {
  const r = new SeededRand(SEED);
  let asked = 0;
  let hits = 0;
  for (let c = 0; c < 240; c++) {
    const zone = ZONES[c % ZONES.length]!;
    const text = cronText(r);
    const parsed = tryParseSchedule(text, { timezone: zone });
    if (!parsed.ok || parsed.schedule.kind !== 'cron') continue;
    const schedule: CronSchedule = parsed.schedule;
    // Around the years with transitions in every zone above (Samoa's lost day is 2011-12-30).
    let at = Date.UTC(2010 + r.int(16), r.int(12), 1 + r.int(28)) - r.int(DAY_MS);
    let lastQuestion = at;
    let lastAnswer: number | undefined;
    for (let q = 0; q < 60; q++) {
      const roll = r.int(8);
      if (lastAnswer !== undefined && roll === 0) at = lastAnswer;
      else if (lastAnswer !== undefined && roll === 1) at = lastAnswer - 1;
      else if (lastAnswer !== undefined && roll === 2) at = lastAnswer + 1;
      else if (roll === 3) at = lastQuestion;
      else if (lastAnswer !== undefined && roll === 4)
        at = lastQuestion + r.int(Math.max(1, lastAnswer - lastQuestion));
      else if (roll === 5) at = lastQuestion - r.int(40 * DAY_MS);
      else at = at + r.int(r.chance(0.5) ? 3_600_000 : 90 * DAY_MS);
      const want = searchCronFire(schedule, at);
      const got = nextFire(schedule, at);
      if (lastAnswer !== undefined && at >= lastQuestion && at < lastAnswer) hits++;
      asked++;
      if (got !== want) {
        t.fail(
          `seed ${SEED}, '${text}' in ${zone}, after ${new Date(at).toISOString()}: ` +
            `remembered ${got === undefined ? 'none' : new Date(got).toISOString()}, ` +
            `search ${want === undefined ? 'none' : new Date(want).toISOString()}`,
        );
        t.end();
        return;
      }
      lastQuestion = at;
      lastAnswer = got;
    }
  }
  t.ok(asked > 8_000, `asked ${asked} questions`);
  // The sequences must exercise the cache, not only miss it.
  t.ok(hits > asked / 20, `${hits} of ${asked} questions fell inside the previous answer's range`);
  t.end();
});
