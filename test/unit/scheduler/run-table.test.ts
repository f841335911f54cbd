// Finished runs are kept as records (run-record.ts) in per-job histories (run-table.ts): what a
// reader gets back must be the run the state machine built, field for field, and snapshots of
// the old one-object-per-run layout must still restore to the same state.
import t from 'tap';
import { decode, encode } from '../../../src/base/codec.js';
import { isTerminal, type Run } from '../../../src/scheduler/model.js';
import { packRun, unpackRun } from '../../../src/scheduler/run-record.js';
import { SchedulerStateMachine } from '../../../src/scheduler/state-machine.js';
import { randomCommands, spec, T0, MIN } from './fixtures.js';

function replayed(seed: number): SchedulerStateMachine {
  const sm = new SchedulerStateMachine();
  for (const c of randomCommands(seed, 400)) sm.applyCommand(c);
  return sm;
}

t.test('a record reads back as the run it was made from, key for key', (t) => {
  let checked = 0;
  for (let seed = 1; seed <= 20; seed++) {
    for (const run of replayed(seed).runs.values()) {
      const back = unpackRun(run.jobId, run.slotMs, packRun(run));
      // JSON keeps key order: a copy with its keys in another order would encode differently.
      if (JSON.stringify(back) !== JSON.stringify(run)) t.same(back, run, `${run.fireId}`);
      checked++;
    }
  }
  t.ok(checked > 1000, `${checked} runs round-tripped`);
  t.end();
});

t.test('every field survives, fractional and far times included', (t) => {
  const slot = T0 + 7 * MIN;
  const run: Run = {
    fireId: `acme/j:${slot}`,
    jobId: 'acme/j',
    slotMs: slot,
    status: 'DEAD',
    reason: 'non-retryable: 500',
    dueAtMs: slot + 0.25,
    attempts: [
      {
        attempt: 1,
        token: 2 ** 40 + 3,
        startedAtMs: 12.5,
        outcome: 'retry',
        statusCode: 503,
        durationMs: 17,
        error: undefined,
        responseExcerpt: 'busy',
        node: 'n1',
      },
      {
        attempt: 2,
        token: 2 ** 40 + 4,
        startedAtMs: slot + 1000,
        outcome: 'fail',
        statusCode: 500,
        durationMs: 3,
        error: 'boom',
        responseExcerpt: undefined,
        worker: 'w-1',
        outputNode: 'n2',
      },
    ],
    createdAtMs: slot - 30_000,
    finishedAtMs: slot + 1003.125,
    manual: true,
    overrides: { payload: '{"a":1}', headers: { 'x-a': 'b' } },
    upstream: [
      { job: 'acme/up', outcome: 'succeeded', fireId: `acme/up:${slot}`, status: 'SUCCEEDED' },
    ],
    completeByMs: slot + 5000,
  };
  const back = unpackRun(run.jobId, run.slotMs, packRun(run));
  t.same(back, run);
  t.equal(back.dueAtMs, run.dueAtMs, 'a fractional due time is exact');
  t.equal(back.attempts[0]!.startedAtMs, 12.5, 'a time far from the slot is exact');
  t.notOk('worker' in back.attempts[0]!, 'an absent field stays absent');
  t.end();
});

t.test('between commands every finished run is packed, and reads give copies', (t) => {
  const sm = replayed(3);
  let finished = 0;
  for (const run of sm.runs.values()) if (isTerminal(run.status)) finished++;
  t.ok(finished > 0, `${finished} finished runs`);
  t.equal(sm.runs.size - sm.runs.liveSize, finished, 'the finished ones are the packed ones');
  for (const [, run] of sm.runs.liveEntries()) t.notOk(isTerminal(run.status), run.fireId);
  // Until the derived indexes have read what the commands touched and another command applies,
  // a run they finished is the object it was; after that, each read decodes a copy.
  const [first] = [...sm.runs.liveEntries()];
  sm.takeTouched();
  sm.applyCommand({ op: 'mark-unknown', atMs: T0 + 3600_000 * 24, fireIds: [] });
  t.ok(first === undefined || sm.runs.get(first[0]) === first[1], 'a live run is its object');
  const [done] = [...sm.runs.values()].filter((r) => isTerminal(r.status));
  const copy = sm.runs.get(done!.fireId)!;
  copy.status = 'SCHEDULED';
  t.equal(sm.runs.get(done!.fireId)!.status, done!.status, 'changing a copy changes nothing');
  t.equal(
    sm.runs.get(`${done!.jobId}:0${done!.slotMs}`),
    undefined,
    'a fire id not in canonical form names no run',
  );
  t.end();
});

t.test('a snapshot of one object per run (version 3) restores to the same state', (t) => {
  for (let seed = 1; seed <= 10; seed++) {
    const sm = replayed(seed);
    const v4 = decode(sm.snapshot()) as Record<string, unknown>;
    const jobs = [...sm.jobsWithRuns()];
    const v3 = encode({
      ...v4,
      v: 3,
      histories: undefined,
      runs: [...sm.runs.values()],
      runsByJob: jobs.map((j) => [j, sm.runsOf(j).map((r) => r.fireId)]),
    });
    const copy = new SchedulerStateMachine();
    copy.restore(v3);
    t.same(copy.auditIndexes(), [], `seed ${seed}: the restored indexes agree`);
    t.same(Buffer.from(copy.snapshot()), Buffer.from(sm.snapshot()), `seed ${seed}: same state`);
  }
  t.end();
});

t.test('a job keeps its newest finished runs up to the limit, packed', (t) => {
  const sm = new SchedulerStateMachine({
    runsPerJobMax: 5,
    deadRunsPerJobMax: 2,
    runRetentionMs: 3600_000,
    finishedJobRetentionMs: 3600_000,
    requestIdsMax: 10,
    requestIdRetentionMs: 3600_000,
  });
  sm.applyCommand({
    op: 'create-job',
    atMs: T0,
    jobId: 'acme/j',
    spec: spec(),
    nextFireAtMs: T0 + MIN,
    requestId: undefined,
  });
  for (let i = 1; i <= 12; i++) {
    const slot = T0 + i * MIN;
    sm.applyCommand({
      op: 'fire-intents',
      atMs: slot - 100,
      term: 1,
      intents: [
        {
          jobId: 'acme/j',
          expectedNextFireAtMs: slot,
          slots: [slot],
          notFired: [],
          nextFireAtMs: slot + MIN,
        },
      ],
    });
    sm.applyCommand({
      op: 'attempt-result',
      atMs: slot + 10,
      fireId: `acme/j:${slot}`,
      attempt: 1,
      token: 2 ** 24 + i,
      outcome: i % 4 === 0 ? 'fail' : 'success',
      statusCode: i % 4 === 0 ? 400 : 200,
      durationMs: 5,
      error: undefined,
      responseExcerpt: undefined,
      retryAtMs: undefined,
    });
  }
  const runs = sm.runsOf('acme/j');
  const dead = runs.filter((r) => r.status === 'DEAD').map((r) => (r.slotMs - T0) / MIN);
  const done = runs.filter((r) => r.status === 'SUCCEEDED').map((r) => (r.slotMs - T0) / MIN);
  t.same(dead, [8, 12], 'the two newest DEAD runs');
  t.same(done, [6, 7, 9, 10, 11], 'the five newest others');
  t.equal(sm.runs.liveSize, 0, 'none live');
  t.same([...sm.dead], [`acme/j:${T0 + 8 * MIN}`, `acme/j:${T0 + 12 * MIN}`], 'the DLQ lists them');
  t.same(sm.auditIndexes(), []);
  t.end();
});
