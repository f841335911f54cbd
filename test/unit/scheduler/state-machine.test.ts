// The data group's state machine: what each command does to jobs and runs, the results it
// returns on conflicts (never a throw), fencing tokens, the DLQ, retention, and determinism:
// seeded random command streams give byte-identical snapshots on two replicas, including one
// that restores from a snapshot half-way.
import t from 'tap';
import { encodeSchedulerCommand, type SchedulerCommand } from '../../../src/scheduler/commands.js';
import { nextToken, TOKENS_PER_TERM } from '../../../src/scheduler/fencing.js';
import type { JobSpec } from '../../../src/scheduler/model.js';
import { canTransition } from '../../../src/scheduler/run-lifecycle.js';
import { SchedulerStateMachine } from '../../../src/scheduler/state-machine.js';
import { MIN, randomCommands, spec, T0 } from './fixtures.js';

function entry(c: SchedulerCommand, index = 1) {
  return { term: 1, index, type: 'normal' as const, data: encodeSchedulerCommand(c) };
}

function create(
  sm: SchedulerStateMachine,
  jobId = 'j1',
  over: Partial<JobSpec> = {},
  requestId?: string,
) {
  return sm.apply(
    entry({
      op: 'create-job',
      atMs: T0,
      jobId,
      spec: spec(over),
      nextFireAtMs: T0 + MIN,
      requestId,
    }),
  );
}

function intent(
  sm: SchedulerStateMachine,
  jobId: string,
  slot: number,
  next: number | undefined,
  atMs = slot - 1000,
) {
  return sm.applyCommand({
    op: 'fire-intents',
    atMs,
    term: 1,
    intents: [
      { jobId, expectedNextFireAtMs: slot, slots: [slot], notFired: [], nextFireAtMs: next },
    ],
  });
}

t.test('create is idempotent by request id and refuses an existing id', (t) => {
  const sm = new SchedulerStateMachine();
  t.same(create(sm, 'j1', {}, 'req-1'), { ok: true, jobId: 'j1', version: 1 });
  t.same(
    create(sm, 'j2', {}, 'req-1'),
    { ok: true, jobId: 'j1', duplicate: true },
    'same request → same job',
  );
  t.equal(sm.jobs.size, 1, 'nothing else was created');
  t.match(create(sm, 'j1'), { ok: false, code: 'JOB_ALREADY_EXISTS' });
  t.end();
});

t.test('update checks the version it was read at', (t) => {
  const sm = new SchedulerStateMachine();
  create(sm);
  const upd = (expectedVersion: number | undefined) =>
    sm.applyCommand({
      op: 'update-job',
      atMs: T0 + 1,
      jobId: 'j1',
      spec: spec({ name: 'x' }),
      nextFireAtMs: T0 + MIN,
      expectedVersion,
    });
  t.same(upd(1), { ok: true, jobId: 'j1', version: 2 });
  t.match(upd(1), { ok: false, code: 'JOB_VERSION_CONFLICT' });
  t.same(upd(undefined), { ok: true, jobId: 'j1', version: 3 }, 'no version: last writer wins');
  t.match(
    sm.applyCommand({
      op: 'update-job',
      atMs: 0,
      jobId: 'nope',
      spec: spec(),
      nextFireAtMs: 0,
      expectedVersion: undefined,
    }),
    {
      ok: false,
      code: 'JOB_NOT_FOUND',
    },
  );
  t.end();
});

t.test('fire intents create one run per slot, record slots not fired, and advance the job', (t) => {
  const sm = new SchedulerStateMachine();
  create(sm);
  const slot = T0 + MIN;
  const r = sm.applyCommand({
    op: 'fire-intents',
    atMs: slot - 500,
    term: 1,
    intents: [
      {
        jobId: 'j1',
        expectedNextFireAtMs: slot,
        slots: [slot],
        notFired: [{ slotMs: slot - 5 * MIN, status: 'MISSED', reason: 'outside_catch_up_window' }],
        nextFireAtMs: slot + MIN,
      },
    ],
  });
  t.same(r, { ok: true });
  t.equal(sm.runs.get(`j1:${slot}`)?.status, 'SCHEDULED');
  t.same(
    {
      status: sm.runs.get(`j1:${slot - 5 * MIN}`)?.status,
      reason: sm.runs.get(`j1:${slot - 5 * MIN}`)?.reason,
    },
    { status: 'MISSED', reason: 'outside_catch_up_window' },
  );
  t.equal(sm.jobs.get('j1')?.nextFireAtMs, slot + MIN);
  // The same intent again (a new leader re-planning the slot) changes nothing.
  const runsBefore = JSON.stringify([...sm.runs.values()]);
  intent(sm, 'j1', slot, slot + 2 * MIN);
  t.equal(JSON.stringify([...sm.runs.values()]), runsBefore, 'no run added or changed');
  t.equal(sm.jobs.get('j1')?.nextFireAtMs, slot + MIN, 'not advanced twice');
  t.end();
});

t.test('miss-runs: MISSED by default, SKIPPED when the entry says so; attempted runs stay', (t) => {
  const sm = new SchedulerStateMachine();
  create(sm, 'j1', { overlap: { policy: 'skip', bufferCap: 10, maxConcurrency: 2 } });
  const slots = [T0 + MIN, T0 + 2 * MIN, T0 + 3 * MIN];
  for (const [i, slot] of slots.entries()) intent(sm, 'j1', slot, slot + MIN, T0 + i);
  sm.applyCommand({
    op: 'attempt-started',
    atMs: T0 + MIN,
    term: 1,
    fireId: `j1:${slots[2]}`,
    attempt: 1,
  });
  t.same(
    sm.applyCommand({
      op: 'miss-runs',
      atMs: T0 + 3 * MIN,
      runs: [
        { fireId: `j1:${slots[0]}`, reason: 'coalesced' },
        { fireId: `j1:${slots[1]}`, reason: 'run_in_flight', status: 'SKIPPED' },
        { fireId: `j1:${slots[2]}`, reason: 'run_in_flight', status: 'SKIPPED' },
      ],
    }),
    { ok: true },
  );
  const seen = slots.map((slot) => {
    const r = sm.runs.get(`j1:${slot}`);
    return [r?.status, r?.reason];
  });
  t.same(seen, [
    ['MISSED', 'coalesced'],
    ['SKIPPED', 'run_in_flight'],
    ['DISPATCHED', undefined],
  ]);
  t.end();
});

t.test('remaining fires and one-off jobs finish, and finished jobs expire', (t) => {
  const sm = new SchedulerStateMachine();
  create(sm, 'j1', { remainingFires: 2 });
  intent(sm, 'j1', T0 + MIN, T0 + 2 * MIN);
  intent(sm, 'j1', T0 + 2 * MIN, T0 + 3 * MIN);
  t.equal(sm.jobs.get('j1')?.nextFireAtMs, undefined, 'no slot after the last allowed fire');
  t.ok(sm.jobs.get('j1')?.finishedAtMs !== undefined);
  // Runs still scheduled keep the job alive; once they end, retention removes it.
  for (const slot of [T0 + MIN, T0 + 2 * MIN]) {
    sm.applyCommand({
      op: 'attempt-result',
      atMs: slot + 10,
      fireId: `j1:${slot}`,
      attempt: 1,
      token: TOKENS_PER_TERM,
      outcome: 'success',
      statusCode: 200,
      durationMs: 5,
      error: undefined,
      responseExcerpt: undefined,
      retryAtMs: undefined,
    });
  }
  sm.applyCommand({
    op: 'pause-job',
    atMs: T0 + 2 * MIN + sm.limits.finishedJobRetentionMs,
    jobId: 'other',
  });
  t.notOk(sm.jobs.has('j1'), 'finished job dropped after its retention');
  t.end();
});

t.test('at-most-once: attempt-started assigns fencing tokens from the term', (t) => {
  const sm = new SchedulerStateMachine();
  create(sm, 'j1', { delivery: 'at_most_once' });
  const slot = T0 + MIN;
  intent(sm, 'j1', slot, slot + MIN);
  const r1 = sm.applyCommand({
    op: 'attempt-started',
    atMs: slot,
    term: 3,
    fireId: `j1:${slot}`,
    attempt: 1,
  });
  t.same(r1, { ok: true, token: 3 * TOKENS_PER_TERM, status: 'DISPATCHED' });
  t.match(
    sm.applyCommand({
      op: 'attempt-started',
      atMs: slot,
      term: 3,
      fireId: `j1:${slot}`,
      attempt: 1,
    }),
    {
      ok: false,
      code: 'RUN_WRONG_STATE',
    },
    'a second start of the same attempt is refused',
  );
  // The leader died after sending: the next leader marks it unknown and never re-sends.
  sm.applyCommand({ op: 'mark-unknown', atMs: slot + 5000, fireIds: [`j1:${slot}`] });
  t.equal(sm.runs.get(`j1:${slot}`)?.status, 'UNKNOWN');
  intent(sm, 'j1', slot + MIN, slot + 2 * MIN);
  const r2 = sm.applyCommand({
    op: 'attempt-started',
    atMs: slot + MIN,
    term: 3,
    fireId: `j1:${slot + MIN}`,
    attempt: 1,
  });
  t.same(r2, { ok: true, token: 3 * TOKENS_PER_TERM + 1, status: 'DISPATCHED' }, 'same term: +1');
  intent(sm, 'j1', slot + 2 * MIN, slot + 3 * MIN);
  const r3 = sm.applyCommand({
    op: 'attempt-started',
    atMs: slot + 2 * MIN,
    term: 4,
    fireId: `j1:${slot + 2 * MIN}`,
    attempt: 1,
  });
  t.same(r3, { ok: true, token: 4 * TOKENS_PER_TERM, status: 'DISPATCHED' }, 'new term: its floor');
  t.end();
});

t.test('nextToken: strictly increasing, each term above every earlier one', (t) => {
  t.equal(nextToken(0, 1), TOKENS_PER_TERM);
  t.equal(nextToken(TOKENS_PER_TERM, 1), TOKENS_PER_TERM + 1);
  t.equal(nextToken(TOKENS_PER_TERM + 5, 2), 2 * TOKENS_PER_TERM);
  t.throws(() => nextToken(2 * TOKENS_PER_TERM - 1, 1), /exhausted/);
  t.throws(() => nextToken(0, 0));
  t.end();
});

t.test('results: success, retry with its time, exhaustion into the DLQ, replay and purge', (t) => {
  const sm = new SchedulerStateMachine();
  create(sm, 'j1', {
    retry: {
      maxAttempts: 2,
      initialBackoffMs: 1000,
      maxBackoffMs: 1000,
      multiplier: 1,
      maxAgeMs: 3600_000,
    },
  });
  const slot = T0 + MIN;
  const fireId = `j1:${slot}`;
  intent(sm, 'j1', slot, slot + MIN);
  const result = (
    attempt: number,
    outcome: 'success' | 'retry' | 'fail',
    retryAtMs?: number,
    statusCode = 503,
  ) =>
    sm.applyCommand({
      op: 'attempt-result',
      atMs: slot + attempt * 100,
      fireId,
      attempt,
      token: TOKENS_PER_TERM + attempt,
      outcome,
      statusCode,
      durationMs: 50,
      error: undefined,
      responseExcerpt: 'busy',
      retryAtMs,
    });
  t.same(result(1, 'retry', slot + 2000), { ok: true, status: 'SCHEDULED' });
  t.equal(sm.runs.get(fireId)?.dueAtMs, slot + 2000, 'due again at the retry time');
  t.same(result(2, 'retry', slot + 4000), { ok: true, status: 'DEAD' }, 'max attempts reached');
  t.match(sm.runs.get(fireId)?.reason, /retries exhausted/);
  t.ok(sm.dead.has(fireId), 'in the DLQ');
  t.equal(sm.runs.get(fireId)?.attempts.length, 2, 'both attempts recorded');
  t.equal(sm.jobs.get('j1')?.lastToken, TOKENS_PER_TERM + 2, 'tokens from results raise lastToken');
  t.same(sm.applyCommand({ op: 'replay-run', atMs: slot + 9000, fireId }), {
    ok: true,
    status: 'SCHEDULED',
  });
  t.notOk(sm.dead.has(fireId));
  t.same(result(3, 'fail', undefined, 404), { ok: true, status: 'DEAD' }, 'a 4xx fails at once');
  t.match(sm.runs.get(fireId)?.reason, /non-retryable: 404/);
  sm.applyCommand({ op: 'purge-runs', atMs: slot + 10_000, fireIds: [fireId] });
  t.notOk(sm.runs.has(fireId), 'purged');
  t.match(sm.applyCommand({ op: 'replay-run', atMs: 0, fireId }), {
    ok: false,
    code: 'RUN_NOT_FOUND',
  });
  t.end();
});

t.test('a committed pause wins over scheduled runs and retries; resume continues', (t) => {
  const sm = new SchedulerStateMachine();
  create(sm);
  const slot = T0 + MIN;
  intent(sm, 'j1', slot, slot + MIN);
  sm.applyCommand({ op: 'pause-job', atMs: slot - 100, jobId: 'j1' });
  t.same(
    { s: sm.runs.get(`j1:${slot}`)?.status, r: sm.runs.get(`j1:${slot}`)?.reason },
    { s: 'SKIPPED', r: 'paused' },
  );
  intent(sm, 'j1', slot + MIN, slot + 2 * MIN);
  t.equal(
    sm.runs.get(`j1:${slot + MIN}`)?.status,
    'SKIPPED',
    'slots planned while paused are recorded, not fired',
  );
  t.match(
    sm.applyCommand({
      op: 'attempt-started',
      atMs: slot,
      term: 1,
      fireId: `j1:${slot + MIN}`,
      attempt: 1,
    }),
    { ok: false },
  );
  sm.applyCommand({
    op: 'resume-job',
    atMs: slot + MIN + 10,
    jobId: 'j1',
    nextFireAtMs: slot + 2 * MIN,
  });
  intent(sm, 'j1', slot + 2 * MIN, slot + 3 * MIN);
  t.equal(sm.runs.get(`j1:${slot + 2 * MIN}`)?.status, 'SCHEDULED');
  t.end();
});

t.test('delete cancels runs not yet attempted; trigger and backfill add manual runs once', (t) => {
  const sm = new SchedulerStateMachine();
  create(sm);
  const slot = T0 + MIN;
  intent(sm, 'j1', slot, slot + MIN);
  sm.applyCommand({ op: 'trigger-job', atMs: T0 + 5, jobId: 'j1', slotMs: T0 + 5 });
  sm.applyCommand({
    op: 'backfill-job',
    atMs: T0 + 6,
    jobId: 'j1',
    slots: [T0 - MIN, T0 - 2 * MIN, T0 - MIN],
  });
  t.equal(sm.runsOf('j1').length, 4, 'slot, trigger and two distinct backfill slots');
  t.ok(sm.runs.get(`j1:${T0 + 5}`)?.manual);
  sm.applyCommand({ op: 'delete-job', atMs: T0 + 7, jobId: 'j1' });
  t.notOk(sm.jobs.has('j1'));
  t.same(new Set(sm.runsOf('j1').map((r) => r.status)), new Set(['CANCELLED']));
  t.match(sm.applyCommand({ op: 'trigger-job', atMs: T0, jobId: 'j1', slotMs: T0 }), {
    ok: false,
    code: 'JOB_NOT_FOUND',
  });
  t.end();
});

t.test('history per job is bounded, DLQ entries are kept', (t) => {
  const sm = new SchedulerStateMachine({ ...new SchedulerStateMachine().limits, runsPerJobMax: 5 });
  create(sm);
  let slot = T0 + MIN;
  for (let i = 0; i < 20; i++) {
    intent(sm, 'j1', slot, slot + MIN);
    const outcome = i === 3 ? 'fail' : 'success';
    sm.applyCommand({
      op: 'attempt-result',
      atMs: slot + 10,
      fireId: `j1:${slot}`,
      attempt: 1,
      token: TOKENS_PER_TERM + i,
      outcome,
      statusCode: outcome === 'fail' ? 400 : 200,
      durationMs: 1,
      error: undefined,
      responseExcerpt: undefined,
      retryAtMs: undefined,
    });
    slot += MIN;
  }
  const runs = sm.runsOf('j1');
  t.ok(runs.length <= 7, `at most 5 finished runs plus the DLQ entry (${runs.length})`);
  t.ok(
    sm.dead.has(`j1:${T0 + 4 * MIN}`) && sm.runs.has(`j1:${T0 + 4 * MIN}`),
    'the dead run is kept',
  );
  t.end();
});

t.test('tenant-jobs: one entry pauses, resumes or deletes every job of one tenant', (t) => {
  const sm = new SchedulerStateMachine();
  create(sm, 'a1');
  create(sm, 'a2');
  create(sm, 'b1', { tenant: 'beta' });
  const slot = T0 + MIN;
  for (const id of ['a1', 'a2', 'b1']) intent(sm, id, slot, slot + MIN);
  const bulk = (
    action: 'pause' | 'resume' | 'delete',
    atMs: number,
    resumes: { jobId: string; nextFireAtMs: number | undefined }[] = [],
  ) => sm.applyCommand({ op: 'tenant-jobs', atMs, tenant: 'acme', action, resumes });

  t.same(bulk('pause', slot - 100), {
    ok: true,
    jobCount: 2,
    changedCount: 2,
    unlistedCount: 0,
  });
  t.same(
    ['a1', 'a2', 'b1'].map((id) => [sm.jobs.get(id)?.paused, sm.runs.get(`${id}:${slot}`)?.status]),
    [
      [true, 'SKIPPED'],
      [true, 'SKIPPED'],
      [false, 'SCHEDULED'],
    ],
    "the tenant's runs not yet attempted are SKIPPED; another tenant's are untouched",
  );
  sm.takeTouched();
  t.same(
    bulk('pause', slot - 50),
    { ok: true, jobCount: 2, changedCount: 0, unlistedCount: 0 },
    'a repeated pause changes nothing',
  );
  t.same(
    [...sm.takeTouched().jobs].sort(),
    ['a1', 'a2'],
    'the dispatcher re-indexes the tenant’s jobs only',
  );

  // A resume that lists one job leaves the other paused and says so.
  t.same(bulk('resume', slot + 10, [{ jobId: 'a1', nextFireAtMs: slot + 2 * MIN }]), {
    ok: true,
    jobCount: 2,
    changedCount: 1,
    unlistedCount: 1,
  });
  t.same(
    [sm.jobs.get('a1')?.paused, sm.jobs.get('a1')?.nextFireAtMs, sm.jobs.get('a2')?.paused],
    [false, slot + 2 * MIN, true],
  );
  bulk('resume', slot + 20, [
    { jobId: 'a1', nextFireAtMs: slot + 3 * MIN },
    { jobId: 'a2', nextFireAtMs: slot + 2 * MIN },
    { jobId: 'b1', nextFireAtMs: slot + 5 * MIN },
  ]);
  t.equal(sm.jobs.get('a1')?.nextFireAtMs, slot + 2 * MIN, 'a job not paused is not resumed again');
  t.equal(sm.jobs.get('b1')?.nextFireAtMs, slot + MIN, 'a listed job of another tenant is ignored');

  // Delete, as DeleteJob does per job: runs not yet attempted are CANCELLED.
  intent(sm, 'a2', slot + 2 * MIN, slot + 3 * MIN);
  t.same(bulk('delete', slot + 30), {
    ok: true,
    jobCount: 2,
    changedCount: 2,
    unlistedCount: 0,
  });
  t.same([...sm.jobs.keys()], ['b1'], 'only the other tenant’s job is left');
  t.equal(sm.runs.get(`a2:${slot + 2 * MIN}`)?.status, 'CANCELLED');
  t.same(bulk('delete', slot + 40), { ok: true, jobCount: 0, changedCount: 0, unlistedCount: 0 });
  t.end();
});

t.test('run transitions follow the table', (t) => {
  t.ok(canTransition('SCHEDULED', 'DISPATCHED'));
  t.ok(canTransition('DEAD', 'SCHEDULED'), 'replay');
  t.notOk(canTransition('SUCCEEDED', 'SCHEDULED'));
  t.notOk(canTransition('MISSED', 'SCHEDULED'));
  t.notOk(canTransition('UNKNOWN', 'DISPATCHED'), 'an unknown at-most-once run is never re-sent');
  t.end();
});

t.test('determinism: replicas agree byte for byte, with and without a snapshot restore', (t) => {
  for (let seed = 1; seed <= 30; seed++) {
    const cmds = randomCommands(seed, 300);
    const a = new SchedulerStateMachine();
    const b = new SchedulerStateMachine();
    const resultsA = cmds.map((c, i) => a.apply(entry(c, i + 1)));
    const half = 150;
    const resultsB = cmds.slice(0, half).map((c, i) => b.apply(entry(c, i + 1)));
    const c2 = new SchedulerStateMachine();
    c2.restore(b.snapshot());
    for (const [i, c] of cmds.slice(half).entries())
      resultsB.push(c2.apply(entry(c, half + i + 1)));
    t.same(resultsB, resultsA, `seed ${seed}: same results`);
    t.same(
      Buffer.from(c2.snapshot()),
      Buffer.from(a.snapshot()),
      `seed ${seed}: same snapshot bytes`,
    );
  }
  t.end();
});

// ---------------------------------------------------------------------------------------
// An update owns the future

function update(sm: SchedulerStateMachine, atMs: number, nextFireAtMs: number, over = {}) {
  return sm.applyCommand({
    op: 'update-job',
    atMs,
    jobId: 'j1',
    spec: spec({ schedule: '*/7 * * * * *', ...over }),
    nextFireAtMs,
    expectedVersion: undefined,
  });
}

t.test(
  'an update cancels the unattempted runs its old definition planned from its stamp on',
  (t) => {
    const sm = new SchedulerStateMachine();
    create(sm);
    const s1 = T0 + MIN;
    intent(sm, 'j1', s1, s1 + 10_000);
    intent(sm, 'j1', s1 + 10_000, s1 + 20_000);
    intent(sm, 'j1', s1 + 20_000, s1 + 30_000);
    // s1 was attempted (a retry waits); s1 + 20 s is a manual trigger's slot as well.
    sm.applyCommand({
      op: 'attempt-result',
      atMs: s1 + 100,
      fireId: `j1:${s1}`,
      attempt: 1,
      token: nextToken(0, 1),
      outcome: 'retry',
      statusCode: 503,
      durationMs: 50,
      error: undefined,
      responseExcerpt: undefined,
      retryAtMs: s1 + 25_000,
    });
    sm.applyCommand({ op: 'trigger-job', atMs: s1 + 15_000, jobId: 'j1', slotMs: s1 + 15_000 });
    const stamp = s1 + 5000;
    t.same(update(sm, stamp, s1 + 7000), { ok: true, jobId: 'j1', version: 2 });
    const st = (slot: number) => {
      const r = sm.runs.get(`j1:${slot}`);
      return [r?.status, r?.reason];
    };
    t.same(st(s1), ['SCHEDULED', undefined], 'attempted before the update: its retry goes on');
    t.same(st(s1 + 10_000), ['CANCELLED', 'superseded by update to version 2']);
    t.same(st(s1 + 20_000), ['CANCELLED', 'superseded by update to version 2']);
    t.same(st(s1 + 15_000), ['SCHEDULED', undefined], 'a manual run is not the schedule’s');
    t.equal(sm.jobs.get('j1')?.nextFireAtMs, s1 + 7000);
    t.end();
  },
);

t.test('a slot both definitions own is planned again, once, under the same fire id', (t) => {
  const sm = new SchedulerStateMachine();
  create(sm);
  const s1 = T0 + MIN;
  intent(sm, 'j1', s1, s1 + 60_000);
  update(sm, s1 - 500, s1, { schedule: '* * * * *', payload: '{"v":2}' });
  t.equal(sm.runs.get(`j1:${s1}`)?.status, 'CANCELLED', 'superseded first');
  const history = sm.runsOf('j1').length;
  sm.applyCommand({
    op: 'fire-intents',
    atMs: s1 - 400,
    term: 1,
    intents: [
      {
        jobId: 'j1',
        expectedNextFireAtMs: s1,
        version: 2,
        slots: [s1],
        notFired: [],
        nextFireAtMs: s1 + MIN,
      },
    ],
  });
  const run = sm.runs.get(`j1:${s1}`);
  t.equal(run?.status, 'SCHEDULED', 'the new definition planned it again');
  t.equal(run?.reason, undefined);
  t.equal(sm.runsOf('j1').length, history, 'one run per slot in the history');
  t.end();
});

t.test('an intent planned from the old version is a no-op, even for the same next slot', (t) => {
  const sm = new SchedulerStateMachine();
  create(sm);
  const s1 = T0 + MIN;
  // The update's first slot happens to be the slot the old intent expected.
  update(sm, s1 - 2000, s1);
  sm.applyCommand({
    op: 'fire-intents',
    atMs: s1 - 1000,
    term: 1,
    intents: [
      {
        jobId: 'j1',
        expectedNextFireAtMs: s1,
        version: 1,
        slots: [s1],
        notFired: [],
        nextFireAtMs: s1 + MIN,
      },
    ],
  });
  t.equal(sm.runs.get(`j1:${s1}`), undefined, 'no run from the old definition');
  t.equal(sm.jobs.get('j1')?.nextFireAtMs, s1, 'the job does not follow the old schedule');
  t.end();
});
