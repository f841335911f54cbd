// The leader's intent planning, with real compiled schedules, applied to the real state
// machine: on-time slots, look-ahead, pause, misfire policies after downtime, overlap, end
// times and batch bounds; and the property the checkers will hold the cluster to: after
// planning catches up, every due slot of every job ends in exactly one run (fired, or
// MISSED/SKIPPED with a reason), whatever the policy and the downtime.
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { nextFires } from '../../../src/schedule/next-fire.js';
import { parseSchedule, type Schedule } from '../../../src/schedule/parse.js';
import { planIntents, type PlanInput } from '../../../src/scheduler/intent-planner.js';
import type { Job, JobSpec } from '../../../src/scheduler/model.js';
import { spec as baseSpec } from './fixtures.js';
import {
  DEFAULT_SCHEDULER_LIMITS,
  SchedulerStateMachine,
} from '../../../src/scheduler/state-machine.js';

const MIN = 60_000;
const T0 = Date.UTC(2026, 2, 1, 12, 0, 0);

function spec(over: Partial<JobSpec> = {}): JobSpec {
  return baseSpec({ name: 'j', target: { url: 'http://127.0.0.1:9/', headers: {} }, ...over });
}

function compile(job: Job): Schedule {
  return parseSchedule(job.schedule, { timezone: job.timezone, anchorMs: job.anchorMs });
}

function setup(over: Partial<JobSpec> = {}, firstSlot = T0 + MIN) {
  // History unbounded here, so the property test can see every run.
  const sm = new SchedulerStateMachine({ ...DEFAULT_SCHEDULER_LIMITS, runsPerJobMax: 1_000_000 });
  sm.applyCommand({
    op: 'create-job',
    atMs: T0,
    jobId: 'j1',
    spec: spec(over),
    nextFireAtMs: firstSlot,
    requestId: undefined,
  });
  return sm;
}

function plan(sm: SchedulerStateMachine, nowMs: number, over: Partial<PlanInput> = {}) {
  return planIntents({
    jobs: sm.jobs.values(),
    nowMs,
    lookAheadMs: 5000,
    misfireThresholdMs: 10_000,
    maxIntents: 1000,
    compile,
    inFlightRuns: () => 0,
    bufferedRuns: () => 0,
    ...over,
  });
}

t.test('an on-time slot inside the look-ahead becomes an intent with the next slot', (t) => {
  const sm = setup();
  t.same(plan(sm, T0 + MIN - 10_000), [], 'outside the look-ahead: nothing yet');
  const intents = plan(sm, T0 + MIN - 3000);
  t.same(intents, [
    {
      jobId: 'j1',
      expectedNextFireAtMs: T0 + MIN,
      version: 1,
      slots: [T0 + MIN],
      notFired: [],
      nextFireAtMs: T0 + 2 * MIN,
    },
  ]);
  t.end();
});

t.test('a paused job records its slot as SKIPPED and moves on', (t) => {
  const sm = setup();
  sm.applyCommand({ op: 'pause-job', atMs: T0, jobId: 'j1' });
  const [i] = plan(sm, T0 + MIN);
  t.same(i?.notFired, [{ slotMs: T0 + MIN, status: 'SKIPPED', reason: 'paused' }]);
  t.equal(i?.slots.length, 0);
  t.equal(i?.nextFireAtMs, T0 + 2 * MIN);
  t.end();
});

t.test('after downtime each misfire policy decides every late slot', (t) => {
  const now = T0 + 10 * MIN + 30_000; // slots T0+1min … T0+10min are late
  const late = Array.from({ length: 10 }, (_, k) => T0 + (k + 1) * MIN);
  const once = plan(
    setup({ misfire: { policy: 'fire_once', fireAllCap: 3, catchUpWindowMs: 3600_000 } }),
    now,
  )[0]!;
  t.same(once.slots, [late[9]], 'fire_once fires the latest late slot');
  t.same(
    once.notFired.map((n) => n.slotMs),
    late.slice(0, 9),
  );
  t.ok(once.notFired.every((n) => n.status === 'MISSED' && n.reason === 'coalesced'));
  const all = plan(
    setup({ misfire: { policy: 'fire_all', fireAllCap: 3, catchUpWindowMs: 3600_000 } }),
    now,
  )[0]!;
  t.same(all.slots, late.slice(7), 'fire_all fires the latest slots up to its cap');
  t.ok(all.notFired.every((n) => n.reason === 'fire_all_cap'));
  const skip = plan(
    setup({ misfire: { policy: 'skip', fireAllCap: 3, catchUpWindowMs: 3600_000 } }),
    now,
  )[0]!;
  t.same(skip.slots, []);
  t.equal(skip.notFired.length, 10);
  const window = plan(
    setup({ misfire: { policy: 'fire_all', fireAllCap: 50, catchUpWindowMs: 4 * MIN } }),
    now,
  )[0]!;
  t.ok(
    window.notFired.some((n) => n.reason === 'outside_catch_up_window'),
    'older than the catch-up window: MISSED',
  );
  t.ok(
    window.slots.every((s) => s >= now - 4 * MIN),
    'only slots inside the window fire',
  );
  for (const i of [once, all, skip, window])
    t.equal(i.nextFireAtMs, T0 + 11 * MIN, 'next slot after now');
  t.end();
});

t.test('overlap skip records the slot while a run is in flight', (t) => {
  const sm = setup({ overlap: { policy: 'skip', bufferCap: 0 } });
  const [i] = plan(sm, T0 + MIN, { inFlightRuns: () => 1 });
  t.same(i?.notFired, [{ slotMs: T0 + MIN, status: 'SKIPPED', reason: 'run_in_flight' }]);
  const [j] = plan(setup({ overlap: { policy: 'buffer_one', bufferCap: 0 } }), T0 + MIN, {
    inFlightRuns: () => 1,
  });
  t.same(j?.slots, [T0 + MIN], 'buffer: the run is created and the dispatcher holds it back');
  t.end();
});

t.test('overlap with maxConcurrency 2: fires with one run in flight, skips with two', (t) => {
  const skip2 = { overlap: { policy: 'skip', bufferCap: 10, maxConcurrency: 2 } } as const;
  const [one] = plan(setup(skip2), T0 + MIN, { inFlightRuns: () => 1 });
  t.same(one?.slots, [T0 + MIN], 'one in flight: the slot fires');
  t.same(one?.notFired, []);
  const [two] = plan(setup(skip2), T0 + MIN, { inFlightRuns: () => 2 });
  t.same(two?.slots, [], 'two in flight: no run');
  t.same(two?.notFired, [{ slotMs: T0 + MIN, status: 'SKIPPED', reason: 'run_in_flight' }]);
  t.equal(two?.nextFireAtMs, T0 + 2 * MIN, 'the job goes on to its next slot');
  // Without the field (a definition written before it existed) the limit is 1, as it was.
  const [old] = plan(setup({ overlap: { policy: 'skip', bufferCap: 10 } }), T0 + MIN, {
    inFlightRuns: () => 1,
  });
  t.same(old?.notFired, [{ slotMs: T0 + MIN, status: 'SKIPPED', reason: 'run_in_flight' }]);
  // buffer_one with two in flight and one already waiting: the new slot finds the buffer full.
  const bufferOne2 = {
    overlap: { policy: 'buffer_one', bufferCap: 10, maxConcurrency: 2 },
  } as const;
  const [full] = plan(setup(bufferOne2), T0 + MIN, {
    inFlightRuns: () => 2,
    bufferedRuns: () => 1,
  });
  t.same(full?.notFired, [{ slotMs: T0 + MIN, status: 'SKIPPED', reason: 'buffer_full' }]);
  const [room] = plan(setup(bufferOne2), T0 + MIN, { inFlightRuns: () => 2 });
  t.same(room?.slots, [T0 + MIN], 'buffered: the run is created, the dispatcher holds it');
  t.end();
});

t.test('an end time finishes the job; the batch is bounded', (t) => {
  const [i] = plan(setup({ endAtMs: T0 + MIN + 1 }), T0 + MIN);
  t.equal(i?.nextFireAtMs, undefined, 'no slot after the end');
  t.same(i?.slots, [T0 + MIN]);
  const sm = new SchedulerStateMachine();
  for (let k = 0; k < 10; k++) {
    sm.applyCommand({
      op: 'create-job',
      atMs: T0,
      jobId: `j${k}`,
      spec: spec(),
      nextFireAtMs: T0 + MIN,
      requestId: undefined,
    });
  }
  t.equal(plan(sm, T0 + MIN, { maxIntents: 4 }).length, 4);
  t.end();
});

t.test('every due slot ends in exactly one run, whatever the policy and the downtime', (t) => {
  const schedules = ['* * * * *', '*/5 * * * *', '30 * * * * *', '0 */2 * * *', 'every 90s'];
  const policies = ['fire_all', 'fire_once', 'skip'] as const;
  let problems = 0;
  for (let seed = 1; seed <= 60; seed++) {
    const r = new SeededRand(seed);
    const text = schedules[r.int(schedules.length)]!;
    const policy = policies[r.int(3)]!;
    const over: Partial<JobSpec> = {
      schedule: text,
      anchorMs: T0,
      misfire: { policy, fireAllCap: 1 + r.int(5), catchUpWindowMs: (1 + r.int(60)) * MIN },
    };
    const first = parseSchedule(text, { timezone: 'UTC', anchorMs: T0 });
    const firstSlot = nextFires(first, T0, 1)[0]!;
    const sm = setup(over, firstSlot);
    // Planning rounds at random times, with random gaps (downtime) between them.
    let now = T0;
    const end = T0 + (1 + r.int(6)) * 3600_000;
    while (now < end) {
      now += r.chance(0.1) ? r.int(3 * 3600_000) : r.int(20_000);
      for (const intent of plan(sm, now)) {
        sm.applyCommand({ op: 'fire-intents', atMs: now, term: 1, intents: [intent] });
      }
    }
    // Catch up fully at the end.
    for (let k = 0; k < 100; k++) {
      const intents = plan(sm, now);
      if (intents.length === 0) break;
      sm.applyCommand({ op: 'fire-intents', atMs: now, term: 1, intents });
    }
    const horizon = sm.jobs.get('j1')!.nextFireAtMs!;
    const due = nextFires(first, firstSlot - 1, 100_000).filter((s) => s < horizon);
    const runSlots = sm
      .runsOf('j1')
      .map((run) => run.slotMs)
      .sort((a, b) => a - b);
    if (JSON.stringify(runSlots) !== JSON.stringify(due)) {
      problems++;
      t.same(runSlots.length, due.length, `seed ${seed} (${text}, ${policy}): slots accounted for`);
    }
    const unexplained = sm
      .runsOf('j1')
      .filter((run) => run.status !== 'SCHEDULED' && run.reason === undefined);
    if (unexplained.length > 0) problems++;
  }
  t.equal(problems, 0, 'every due slot has one run, and every run not fired has a reason');
  t.end();
});
