// The derived due index must always equal what a full scan of the state machine says: the
// planning wheel holds every job with a next slot (due a look-ahead before it), the dispatch
// wheel every SCHEDULED run of a job that is not paused. Checked after every command of seeded
// random streams, and after a snapshot restore (which rebuilds it from scratch).
import t from 'tap';
import {
  encodeSchedulerCommand,
  packCreates,
  type SchedulerCommand,
} from '../../../src/scheduler/commands.js';
import { DueIndex } from '../../../src/scheduler/due-index.js';
import { SchedulerStateMachine } from '../../../src/scheduler/state-machine.js';
import { randomCommands, spec, T0 } from './fixtures.js';

const LOOK_AHEAD = 5000;

function expected(sm: SchedulerStateMachine): { planning: string[]; dispatch: string[] } {
  const planning = [...sm.jobs.values()]
    .filter((j) => j.nextFireAtMs !== undefined)
    .map((j) => `${j.id}@${j.nextFireAtMs! - LOOK_AHEAD}`)
    .sort();
  const dispatch = [...sm.runs.values()]
    .filter(
      (r) => r.status === 'SCHEDULED' && sm.jobs.get(r.jobId) && !sm.jobs.get(r.jobId)!.paused,
    )
    .map((r) => `${r.fireId}@${r.dueAtMs}`)
    .sort();
  return { planning, dispatch };
}

function actual(
  sm: SchedulerStateMachine,
  idx: DueIndex,
): { planning: string[]; dispatch: string[] } {
  const planning = [...sm.jobs.keys()]
    .filter((id) => idx.planning.has(id))
    .map((id) => `${id}@${idx.planning.dueAt(id)}`);
  const dispatch = [...sm.runs.keys()]
    .filter((id) => idx.dispatch.has(id))
    .map((id) => `${id}@${idx.dispatch.dueAt(id)}`);
  return { planning: planning.sort(), dispatch: dispatch.sort() };
}

t.test('the index follows the state machine command by command', (t) => {
  let mismatches = 0;
  for (let seed = 1; seed <= 30; seed++) {
    const sm = new SchedulerStateMachine();
    const idx = new DueIndex({ lookAheadMs: LOOK_AHEAD, startMs: T0 }, sm.jobs);
    for (const [i, c] of randomCommands(seed, 300).entries()) {
      sm.apply({ term: 1, index: i + 1, type: 'normal', data: encodeSchedulerCommand(c) });
      idx.sync(sm);
      const want = expected(sm);
      const got = actual(sm, idx);
      if (JSON.stringify(want) !== JSON.stringify(got)) {
        mismatches++;
        if (mismatches < 3) t.same(got, want, `seed ${seed} after ${c.op}`);
      }
      if (idx.planning.size !== want.planning.length || idx.dispatch.size !== want.dispatch.length)
        mismatches++;
    }
    const restored = new SchedulerStateMachine();
    restored.restore(sm.snapshot());
    const fresh = new DueIndex({ lookAheadMs: LOOK_AHEAD, startMs: T0 }, restored.jobs);
    fresh.sync(restored);
    if (JSON.stringify(actual(restored, fresh)) !== JSON.stringify(expected(sm))) mismatches++;
  }
  t.equal(mismatches, 0, 'index equals a full scan after every command and after a restore');
  t.end();
});

// A loop turn applies several entries before the index follows: a job created, then deleted,
// created again or changed in the same turn must end where a full scan says.
t.test('the index follows the state machine a batch of commands at a time', (t) => {
  let mismatches = 0;
  let batches = 0;
  for (let seed = 1; seed <= 30; seed++) {
    const sm = new SchedulerStateMachine();
    const idx = new DueIndex({ lookAheadMs: LOOK_AHEAD, startMs: T0 }, sm.jobs);
    const commands = randomCommands(seed, 300);
    for (let i = 0; i < commands.length;) {
      const end = Math.min(commands.length, i + 1 + ((seed * 7 + i) % 9));
      for (; i < end; i++)
        sm.apply({
          term: 1,
          index: i + 1,
          type: 'normal',
          data: encodeSchedulerCommand(commands[i]!),
        });
      idx.sync(sm);
      batches++;
      const want = expected(sm);
      const got = actual(sm, idx);
      if (JSON.stringify(want) !== JSON.stringify(got)) {
        mismatches++;
        if (mismatches < 3) t.same(got, want, `seed ${seed} after command ${i}`);
      }
      if (idx.planning.size !== want.planning.length) mismatches++;
    }
  }
  t.ok(batches > 1000, `${batches} batches`);
  t.equal(mismatches, 0, 'index equals a full scan after every batch');
  t.end();
});

t.test('a job created and changed in the same batch is indexed as it ends', (t) => {
  const sm = new SchedulerStateMachine();
  const idx = new DueIndex({ lookAheadMs: LOOK_AHEAD, startMs: T0 }, sm.jobs);
  const near = T0 + LOOK_AHEAD + 1000;
  const created = (jobId: string, next: number): SchedulerCommand =>
    packCreates([
      { op: 'create-job', atMs: T0, jobId, spec: spec(), nextFireAtMs: next, requestId: undefined },
    ])[0]!;
  const batch = (commands: SchedulerCommand[]): void => {
    for (const c of commands)
      sm.apply({ term: 1, index: ++applied, type: 'normal', data: encodeSchedulerCommand(c) });
    idx.sync(sm);
  };
  let applied = 0;
  // The first scan: slots within the wheel's horizon now go straight into the wheel.
  idx.planning.advance(T0);
  batch([
    created('gone', near),
    { op: 'delete-job', atMs: T0, jobId: 'gone' },
    created('back', near),
    { op: 'delete-job', atMs: T0, jobId: 'back' },
    created('back', near + 2000),
    created('paused', near),
    { op: 'pause-job', atMs: T0, jobId: 'paused' },
  ]);
  t.same(actual(sm, idx), expected(sm), 'the index equals a full scan');
  t.notOk(idx.planning.has('gone'), 'a job deleted in its own batch is not planned');
  t.ok(idx.planning.wheelSize > 0, 'near jobs went into the wheel');
  t.equal(idx.planning.dueAt('back'), near + 2000 - LOOK_AHEAD, 'the last create of an id wins');
  t.end();
});

t.test('nextDueMs is the earliest planning or dispatch time, command by command', (t) => {
  let mismatches = 0;
  let defined = 0;
  for (let seed = 1; seed <= 20; seed++) {
    const sm = new SchedulerStateMachine();
    const idx = new DueIndex({ lookAheadMs: LOOK_AHEAD, startMs: T0 }, sm.jobs);
    for (const [i, c] of randomCommands(seed, 200).entries()) {
      sm.apply({ term: 1, index: i + 1, type: 'normal', data: encodeSchedulerCommand(c) });
      idx.sync(sm);
      const dues = [
        ...[...sm.jobs.values()]
          .filter((j) => j.nextFireAtMs !== undefined)
          .map((j) => j.nextFireAtMs! - LOOK_AHEAD),
        ...[...sm.runs.values()]
          .filter((r) => r.status === 'SCHEDULED' && sm.jobs.get(r.jobId)?.paused === false)
          .map((r) => r.dueAtMs),
      ];
      const want = dues.length === 0 ? undefined : Math.min(...dues);
      const got = idx.nextDueMs(sm.jobs);
      if (want !== undefined) defined++;
      if (got !== want && mismatches++ < 3) t.equal(got, want, `seed ${seed} after ${c.op}`);
    }
  }
  t.equal(mismatches, 0, 'no mismatch');
  t.ok(defined > 1000, `${defined} states had something due`);
  t.end();
});
