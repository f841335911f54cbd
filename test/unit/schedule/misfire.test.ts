// planMisfire decides the fate of every slot that came due while nothing could fire it. Method:
// hand-worked cases for each policy, the catch-up window and the misfire threshold on a
// ten-minute cron; then seeded random inputs checked for the invariants every policy keeps
// (each due slot fired or MISSED exactly once, in order, nothing after now); then batching: a
// walk cut into bounded calls must decide exactly what one unbounded call decides.
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { planMisfire } from '../../../src/schedule/misfire.js';
import type { MisfireInput, MisfirePlan, MisfirePolicy } from '../../../src/schedule/misfire.js';
import { nextFire } from '../../../src/schedule/next-fire.js';
import { parseSchedule } from '../../../src/schedule/parse.js';
import type { Schedule } from '../../../src/schedule/parse.js';

const MINUTE_MS = 60_000;
const at = (hhmm: string): number => Date.parse(`2025-01-01T${hhmm}Z`);
const tenMinutes = parseSchedule('*/10 * * * *', { timezone: 'UTC' });

function summary(plan: MisfirePlan): { fire: string[]; missed: string[]; next: string | null } {
  const hhmm = (ms: number): string => new Date(ms).toISOString().slice(11, 16);
  return {
    fire: plan.fireSlotsMs.map(hhmm),
    missed: plan.missedSlots.map((m) => `${hhmm(m.slotMs)} ${m.reason}`),
    next: plan.nextFireAtMs === undefined ? null : hhmm(plan.nextFireAtMs),
  };
}

function plan(policy: MisfirePolicy, nowHhmm: string, extra: Partial<MisfireInput> = {}) {
  return summary(
    planMisfire({
      schedule: tenMinutes,
      nextFireAtMs: at('00:00'),
      nowMs: at(nowHhmm),
      policy,
      catchUpWindowMs: 60 * MINUTE_MS,
      ...extra,
    }),
  );
}

const missed = (reason: string, ...slots: string[]): string[] => slots.map((s) => `${s} ${reason}`);

t.test('skip records every misfired slot as MISSED', (t) => {
  t.same(plan({ kind: 'skip' }, '00:55'), {
    fire: [],
    missed: missed('skip_policy', '00:00', '00:10', '00:20', '00:30', '00:40', '00:50'),
    next: '01:00',
  });
  t.end();
});

t.test('fire_once fires the latest due slot and coalesces the rest', (t) => {
  t.same(plan({ kind: 'fire_once' }, '00:55'), {
    fire: ['00:50'],
    missed: missed('coalesced', '00:00', '00:10', '00:20', '00:30', '00:40'),
    next: '01:00',
  });
  t.end();
});

t.test('fire_all fires the latest slots up to its cap', (t) => {
  t.same(plan({ kind: 'fire_all', fireCountMax: 3 }, '00:55'), {
    fire: ['00:30', '00:40', '00:50'],
    missed: missed('fire_all_cap', '00:00', '00:10', '00:20'),
    next: '01:00',
  });
  t.same(plan({ kind: 'fire_all', fireCountMax: 100 }, '00:25').fire, ['00:00', '00:10', '00:20']);
  t.end();
});

t.test('slots older than the catch-up window are missed under every policy', (t) => {
  const window = { catchUpWindowMs: 25 * MINUTE_MS };
  const outside = missed('outside_catch_up_window', '00:00', '00:10', '00:20');
  t.same(plan({ kind: 'fire_all', fireCountMax: 10 }, '00:55', window), {
    fire: ['00:30', '00:40', '00:50'],
    missed: outside,
    next: '01:00',
  });
  t.same(plan({ kind: 'fire_once' }, '00:55', window).missed, [
    ...outside,
    ...missed('coalesced', '00:30', '00:40'),
  ]);
  t.same(plan({ kind: 'fire_once' }, '00:45', { catchUpWindowMs: 0 }), {
    fire: [],
    missed: missed('outside_catch_up_window', '00:00', '00:10', '00:20', '00:30', '00:40'),
    next: '00:50',
  });
  t.end();
});

t.test('a slot within the misfire threshold is on time under every policy', (t) => {
  const threshold = { misfireThresholdMs: 5 * MINUTE_MS };
  t.same(plan({ kind: 'skip' }, '00:54', threshold), {
    fire: ['00:50'],
    missed: missed('skip_policy', '00:00', '00:10', '00:20', '00:30', '00:40'),
    next: '01:00',
  });
  t.same(
    plan({ kind: 'fire_once' }, '00:54', threshold).fire,
    ['00:50'],
    'the on-time run stands for the coalesced ones',
  );
  t.same(plan({ kind: 'fire_all', fireCountMax: 2 }, '00:54', threshold), {
    fire: ['00:30', '00:40', '00:50'],
    missed: missed('fire_all_cap', '00:00', '00:10', '00:20'),
    next: '01:00',
  });
  t.end();
});

t.test('nothing due: an empty, complete plan', (t) => {
  const result = planMisfire({
    schedule: tenMinutes,
    nextFireAtMs: at('01:00'),
    nowMs: at('00:59'),
    policy: { kind: 'skip' },
    catchUpWindowMs: 0,
  });
  t.same(result, { fireSlotsMs: [], missedSlots: [], nextFireAtMs: at('01:00'), isComplete: true });
  t.end();
});

t.test('a one-off in the past fires once or is missed, and the job has no next slot', (t) => {
  const oneOff = parseSchedule('at 2025-01-01T00:00Z', { timezone: 'UTC' });
  const input = {
    schedule: oneOff,
    nextFireAtMs: at('00:00'),
    nowMs: at('00:30'),
    catchUpWindowMs: 60 * MINUTE_MS,
  };
  t.same(summary(planMisfire({ ...input, policy: { kind: 'fire_once' } })), {
    fire: ['00:00'],
    missed: [],
    next: null,
  });
  t.same(summary(planMisfire({ ...input, policy: { kind: 'skip' } })).missed, [
    '00:00 skip_policy',
  ]);
  t.end();
});

t.test('a committed nextFireAt that is not a slot of the schedule still counts', (t) => {
  const result = planMisfire({
    schedule: tenMinutes,
    nextFireAtMs: at('00:05'),
    nowMs: at('00:25'),
    policy: { kind: 'fire_all', fireCountMax: 10 },
    catchUpWindowMs: 60 * MINUTE_MS,
  });
  t.same(summary(result).fire, ['00:05', '00:10', '00:20']);
  t.end();
});

t.test('bad arguments are programmer errors', (t) => {
  const base = { schedule: tenMinutes, nextFireAtMs: 0, nowMs: 1, catchUpWindowMs: 10 };
  t.throws(() => planMisfire({ ...base, policy: { kind: 'fire_all', fireCountMax: 0 } }));
  t.throws(() => planMisfire({ ...base, policy: { kind: 'skip' }, misfireThresholdMs: 11 }));
  t.throws(() =>
    planMisfire({ ...base, policy: { kind: 'fire_all', fireCountMax: 5 }, slotCountMax: 5 }),
  );
  t.end();
});

function randomPolicy(r: SeededRand): MisfirePolicy {
  switch (r.int(3)) {
    case 0:
      return { kind: 'skip' };
    case 1:
      return { kind: 'fire_once' };
    default:
      return { kind: 'fire_all', fireCountMax: 1 + r.int(20) };
  }
}

function dueSlots(schedule: Schedule, fromMs: number, nowMs: number): number[] {
  const slots: number[] = [];
  for (
    let s: number | undefined = fromMs;
    s !== undefined && s <= nowMs;
    s = nextFire(schedule, s)
  ) {
    slots.push(s);
  }
  return slots;
}

/** Calls planMisfire until complete and concatenates the batches. */
function planInBatches(input: MisfireInput): { plan: MisfirePlan; calls: number } {
  const fire: number[] = [];
  const missedSlots: MisfirePlan['missedSlots'][number][] = [];
  let next: number | undefined = input.nextFireAtMs;
  for (let calls = 1; ; calls++) {
    if (next === undefined) throw new Error('an incomplete plan must say where to resume');
    const batch = planMisfire({ ...input, nextFireAtMs: next });
    fire.push(...batch.fireSlotsMs);
    missedSlots.push(...batch.missedSlots);
    next = batch.nextFireAtMs;
    if (batch.isComplete) {
      return {
        plan: { fireSlotsMs: fire, missedSlots, nextFireAtMs: next, isComplete: true },
        calls,
      };
    }
  }
}

t.test('random inputs: every due slot is decided once, in order, by its policy', (t) => {
  const r = new SeededRand(31);
  const schedules = ['*/5 * * * *', '*/7 * * * * *', '0 * * * *', '15 1-3 * * *'].map((e) =>
    parseSchedule(e, { timezone: 'America/New_York' }),
  );
  const problems: string[] = [];
  for (let i = 0; i < 150; i++) {
    const schedule = schedules[r.int(schedules.length)] ?? tenMinutes;
    const startMs = Date.UTC(2025, 10, 1) + r.int(3) * 86_400_000;
    const first = nextFire(schedule, startMs) ?? startMs;
    const nowMs = first + r.int(6 * 3_600_000);
    const catchUpWindowMs = r.int(8 * 3_600_000);
    const misfireThresholdMs = Math.min(catchUpWindowMs, r.int(20 * MINUTE_MS));
    const policy = randomPolicy(r);
    const input: MisfireInput = {
      schedule,
      nextFireAtMs: first,
      nowMs,
      policy,
      catchUpWindowMs,
      misfireThresholdMs,
      slotCountMax: (policy.kind === 'fire_all' ? policy.fireCountMax : 0) + 1 + r.int(50),
    };
    const { plan: batched } = planInBatches(input);
    const whole = planMisfire({ ...input, slotCountMax: 1_000_000 });
    const due = dueSlots(schedule, first, nowMs);
    const decided = [...batched.fireSlotsMs, ...batched.missedSlots.map((m) => m.slotMs)];
    const label = `case ${i} ${schedule.expression} ${JSON.stringify(policy)}`;
    if (JSON.stringify(batched) !== JSON.stringify(whole)) problems.push(`${label}: batching`);
    if (JSON.stringify([...decided].sort((a, b) => a - b)) !== JSON.stringify(due)) {
      problems.push(`${label}: not a partition of the due slots`);
    }
    const misfiredFires = batched.fireSlotsMs.filter((s) => nowMs - s > misfireThresholdMs);
    if (policy.kind === 'skip' && misfiredFires.length > 0) problems.push(`${label}: skip fired`);
    if (policy.kind === 'fire_once' && misfiredFires.length > 1) problems.push(`${label}: once`);
    if (policy.kind === 'fire_all' && misfiredFires.length > policy.fireCountMax) {
      problems.push(`${label}: over the cap`);
    }
    if (batched.fireSlotsMs.some((s) => nowMs - s > catchUpWindowMs)) {
      problems.push(`${label}: fired outside the window`);
    }
    if (whole.nextFireAtMs !== nextFire(schedule, nowMs)) problems.push(`${label}: next slot`);
  }
  t.same(problems, []);
  t.end();
});

t.test('a week of one-second slots is decided in bounded batches', (t) => {
  const everySecond = parseSchedule('every 1s', { timezone: 'UTC', anchorMs: 0 });
  const nowMs = 7 * 86_400_000;
  const { plan: result, calls } = planInBatches({
    schedule: everySecond,
    nextFireAtMs: 0,
    nowMs,
    policy: { kind: 'fire_all', fireCountMax: 100 },
    catchUpWindowMs: 3_600_000,
    slotCountMax: 10_000,
  });
  // The slot at `now` is on time; the cap applies to the misfired ones before it.
  t.equal(result.fireSlotsMs.length, 101, 'the cap plus the on-time slot');
  t.equal(result.fireSlotsMs[0], nowMs - 100_000, 'the latest slots fire');
  t.equal(result.missedSlots.length, 7 * 86_400 + 1 - 101, 'all others are recorded');
  t.equal(result.nextFireAtMs, nowMs + 1000);
  t.ok(calls >= 60, `${calls} bounded calls`);
  t.end();
});
