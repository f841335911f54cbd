// A split entry through DataGroupStateMachine.apply, as every replica applies it: the jobs (and
// their runs) whose shard hash is in the upper half leave the parent and form the child's
// initial snapshot at the entry's index and term, the parent refuses user commands for them
// (ROUTE_STALE, so a router with an old map retries) while still accepting its own, the child
// owns exactly them, a second apply of the same entry is a no-op, and a split that does not fit
// the range is refused without a change.
import t from 'tap';
import {
  encodeSchedulerCommand,
  packCreates,
  type CreateJobCommand,
  type SchedulerCommand,
} from '../../../src/scheduler/commands.js';
import { hashShardKey } from '../../../src/placement/hash.js';
import { encodeSplitEntry, type SplitEntry } from '../../../src/placement/split-state.js';
import { DataGroupStateMachine } from '../../../src/server/data-group-state-machine.js';
import { spec } from '../scheduler/fixtures.js';

const MID = 2 ** 31;

function entry(index: number, data: Uint8Array) {
  return { index, term: 3, type: 'normal' as const, data };
}

function create(jobId: string, atMs = 1000): SchedulerCommand {
  return { op: 'create-job', atMs, jobId, spec: spec(), nextFireAtMs: 5000, requestId: undefined };
}

t.test('a split entry hands the upper half to the child at its index', (t) => {
  const sm = new DataGroupStateMachine();
  const ids = Array.from({ length: 40 }, (_, i) => `job-${i}`);
  let index = 0;
  for (const id of ids)
    t.match(sm.apply(entry(++index, encodeSchedulerCommand(create(id)))), { ok: true });
  const upper = ids.filter((id) => hashShardKey(id) >= MID);
  t.ok(upper.length > 5 && upper.length < 35, 'both halves hold jobs');
  const split: SplitEntry = { childId: 9, start: 0, mid: MID, end: 2 ** 32 };
  const r = sm.apply(entry(++index, encodeSplitEntry(split)));
  t.same(r, { ok: true, childId: 9, movedJobs: upper.length });
  t.same(
    [...sm.scheduler.jobs.keys()].sort(),
    ids.filter((id) => !upper.includes(id)).sort(),
    'the parent keeps the lower half',
  );
  const spawns = sm.takeSpawns();
  t.equal(spawns.length, 1);
  t.match(spawns[0], { groupId: 9, index, term: 3 });
  t.same(sm.takeSpawns(), [], 'taken once');
  const child = new DataGroupStateMachine();
  child.restore(spawns[0]!.data);
  t.same([...child.scheduler.jobs.keys()].sort(), upper.sort(), 'the child holds the upper half');
  t.same(child.ownedRange, { start: MID, end: 2 ** 32 });
  t.same(sm.ownedRange, { start: 0, end: MID });

  const fresh = (half: 'upper' | 'lower'): string => {
    for (let i = 0; ; i++) {
      const id = `new-${i}`;
      if (hashShardKey(id) >= MID === (half === 'upper')) return id;
    }
  };
  t.match(
    sm.apply(entry(++index, encodeSchedulerCommand(create(fresh('upper'), 2000)))),
    {
      ok: false,
      code: 'ROUTE_STALE',
    },
    'a create for the upper half is refused by the parent',
  );
  t.match(
    sm.apply(entry(++index, encodeSchedulerCommand(create(fresh('lower'), 2000)))),
    {
      ok: true,
    },
    'a create for the lower half is accepted',
  );
  const lowerId = fresh('lower');
  const batch = packCreates(
    [fresh('upper'), `${lowerId}-b`, lowerId].map((id) => create(id, 2000) as CreateJobCommand),
  );
  t.equal(batch.length, 1, 'one create-jobs entry');
  const jobsBefore = sm.scheduler.jobs.size;
  t.match(
    sm.apply(entry(++index, encodeSchedulerCommand(batch[0]!))),
    { ok: false, code: 'ROUTE_STALE' },
    'a bulk create holding one job of the upper half is refused as a whole',
  );
  t.equal(sm.scheduler.jobs.size, jobsBefore, 'and creates nothing');
  const moved = upper[0]!;
  t.match(
    sm.apply(entry(++index, encodeSchedulerCommand({ op: 'pause-job', atMs: 2000, jobId: moved }))),
    { ok: false, code: 'ROUTE_STALE' },
    'the parent refuses a user command for a moved job',
  );
  t.match(
    child.apply(
      entry(index, encodeSchedulerCommand({ op: 'pause-job', atMs: 2000, jobId: moved })),
    ),
    { ok: true },
    'the child accepts it',
  );
  t.same(sm.apply(entry(++index, encodeSplitEntry(split))), { ok: true, childId: 9, movedJobs: 0 });
  t.same(sm.takeSpawns(), [], 'the same split again spawns nothing');

  const copy = new DataGroupStateMachine();
  copy.restore(sm.snapshot());
  t.same(copy.ownedRange, sm.ownedRange, 'the range survives a snapshot');
  t.ok(copy.hasChild(9));
  t.end();
});

t.test('a split that does not fit the range is refused and changes nothing', (t) => {
  const sm = new DataGroupStateMachine();
  sm.apply(entry(1, encodeSchedulerCommand(create('a'))));
  t.match(sm.apply(entry(2, encodeSplitEntry({ childId: 5, start: 0, mid: 0, end: 2 ** 32 }))), {
    ok: false,
    code: 'SPLIT_INVALID',
  });
  t.equal(sm.scheduler.jobs.size, 1);
  t.equal(sm.ownedRange, undefined);
  t.same(sm.takeSpawns(), []);
  t.end();
});
