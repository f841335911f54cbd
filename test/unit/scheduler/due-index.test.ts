// The derived due index must always equal what a full scan of the state machine says: the
// planning wheel holds every job with a next slot (due a look-ahead before it), the dispatch
// wheel every SCHEDULED run of a job that is not paused. Checked after every command of seeded
// random streams, and after a snapshot restore (which rebuilds it from scratch).
import t from 'tap';
import { encodeSchedulerCommand } from '../../../src/scheduler/commands.js';
import { DueIndex } from '../../../src/scheduler/due-index.js';
import { SchedulerStateMachine } from '../../../src/scheduler/state-machine.js';
import { randomCommands, T0 } from './fixtures.js';

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
