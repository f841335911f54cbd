// Bulk creates: packCreates cuts a batch into compact create-jobs entries, and applying one is
// the same as applying its creates one by one, except that it is all or nothing. Snapshots keep
// jobs by column and still read the old one-object-per-job format.
import t from 'tap';
import { decode, encode } from '../../../src/base/codec.js';
import {
  createAt,
  encodeSchedulerCommand,
  packCreates,
  CREATE_JOBS_ENTRY_BYTES_MAX,
  type CreateJobCommand,
} from '../../../src/scheduler/commands.js';
import type { JobSpec } from '../../../src/scheduler/model.js';
import { SchedulerStateMachine } from '../../../src/scheduler/state-machine.js';
import { MIN, spec, T0 } from './fixtures.js';

function create(jobId: string, over: Partial<JobSpec> = {}, requestId?: string): CreateJobCommand {
  return {
    op: 'create-job',
    atMs: T0,
    jobId,
    spec: spec(over),
    nextFireAtMs: over.schedule?.startsWith('at ') === true ? undefined : T0 + MIN,
    requestId,
  };
}

function varied(n: number): CreateJobCommand[] {
  return Array.from({ length: n }, (_, i) =>
    create(
      `job-${i}`,
      {
        name: i % 3 === 0 ? '' : `name ${i}`,
        schedule: i % 4 === 0 ? 'every 10s' : `${i % 60} * * * *`,
        anchorMs: i % 4 === 0 ? T0 - i : undefined,
        tenant: i % 5 === 0 ? 'other' : 'acme',
        payload: i % 7 === 0 ? '{"x":1}' : '{}',
        remainingFires: i % 6 === 0 ? 3 : undefined,
      },
      i % 2 === 0 ? `req-${i}` : undefined,
    ),
  );
}

function applyAll(sm: SchedulerStateMachine, creates: readonly CreateJobCommand[]) {
  return packCreates(creates).map((c) =>
    sm.apply({ term: 1, index: 1, type: 'normal', data: encodeSchedulerCommand(c) }),
  );
}

t.test('a create-jobs entry creates what its creates would one by one', (t) => {
  const creates = varied(200);
  const entries = packCreates(creates);
  t.equal(entries.length, 1, 'a batch of small definitions is one entry');
  t.ok(entries[0]!.specs.length < 20, 'each distinct definition is stored once');
  t.same(
    creates.map((_, i) => createAt(entries[0]!, i)),
    creates.map((c) => ({ ...c, spec: { ...c.spec } })),
    'every create reads back from the columns',
  );
  const bulk = new SchedulerStateMachine();
  const single = new SchedulerStateMachine();
  t.same(applyAll(bulk, creates), [{ ok: true, createdCount: 200, duplicateCount: 0 }]);
  for (const c of creates) t.match(single.applyCommand(c), { ok: true, version: 1 });
  t.same([...bulk.jobs.values()], [...single.jobs.values()], 'the same jobs');
  // Request ids were remembered: a retry of the batch creates nothing.
  t.same(
    applyAll(
      bulk,
      creates.filter((c) => c.requestId !== undefined),
    ),
    [{ ok: true, createdCount: 0, duplicateCount: 100 }],
  );
  t.equal(bulk.jobs.size, 200);
  t.end();
});

t.test(
  'all or nothing: one existing id or an id twice fails the entry and changes nothing',
  (t) => {
    const sm = new SchedulerStateMachine();
    applyAll(sm, [create('a')]);
    t.match(applyAll(sm, [create('b', {}, 'rq-b'), create('a'), create('c')]), [
      { ok: false, code: 'JOB_ALREADY_EXISTS', reason: 'job a already exists' },
    ]);
    t.match(applyAll(sm, [create('d'), create('d')]), [{ ok: false, code: 'JOB_ALREADY_EXISTS' }]);
    t.equal(sm.jobs.size, 1, 'neither b, c nor d was created');
    t.ok(!sm.jobs.has('b') && !sm.jobs.has('d'));
    // The request id of the failed entry was not remembered: the job can be created with it now.
    t.same(applyAll(sm, [create('b', {}, 'rq-b')]), [
      { ok: true, createdCount: 1, duplicateCount: 0 },
    ]);
    // The rows the failed entries had taken are reused, and hold what a fresh table would.
    applyAll(sm, [create('c'), create('d', { name: 'dee' })]);
    const fresh = new SchedulerStateMachine();
    applyAll(fresh, [
      create('a'),
      create('b', {}, 'rq-b'),
      create('c'),
      create('d', { name: 'dee' }),
    ]);
    t.same([...sm.jobs.values()], [...fresh.jobs.values()]);
    const touched = sm.takeTouched();
    t.same([...touched.created.ids].sort(), ['a', 'b', 'c', 'd'], 'only created jobs are noted');
    t.same(touched.created.nextMs.length, 4, 'each with its next slot');
    t.same(touched.jobs, [], 'created jobs are not also touched');
    t.end();
  },
);

t.test('request ids: seen before, or twice in the entry, are duplicates, not creates', (t) => {
  const sm = new SchedulerStateMachine();
  applyAll(sm, [create('a', {}, 'r1')]);
  t.same(applyAll(sm, [create('x', {}, 'r1'), create('y', {}, 'r2'), create('z', {}, 'r2')]), [
    { ok: true, createdCount: 1, duplicateCount: 2 },
  ]);
  t.same([...sm.jobs.keys()].sort(), ['a', 'y']);
  t.end();
});

t.test('a one-off job whose slot is gone is stored finished, as by create-job', (t) => {
  const sm = new SchedulerStateMachine();
  applyAll(sm, [create('once', { schedule: 'at 2020-01-01T00:00:00Z' })]);
  t.equal(sm.jobs.get('once')?.nextFireAtMs, undefined);
  t.end();
});

t.test('entries are cut by size and by proposal time, and stay under the entry bound', (t) => {
  const big = Array.from({ length: 40 }, (_, i) =>
    create(`big-${i}`, {
      payload: JSON.stringify({ pad: `${i}`.repeat(60_000 / String(i).length) }),
    }),
  );
  const entries = packCreates(big);
  t.ok(entries.length > 1, `${entries.length} entries`);
  for (const e of entries) {
    const bytes = encodeSchedulerCommand(e).length;
    t.ok(bytes <= CREATE_JOBS_ENTRY_BYTES_MAX, `entry of ${bytes} bytes`);
  }
  t.equal(
    entries.reduce((n, e) => n + e.jobIds.length, 0),
    40,
    'every job in exactly one entry',
  );
  const later = { ...create('late'), atMs: T0 + 1 };
  t.same(
    packCreates([create('early'), later]).map((e) => [e.atMs, e.jobIds]),
    [
      [T0, ['early']],
      [T0 + 1, ['late']],
    ],
  );
  t.end();
});

t.test('snapshots keep the job table as held, restore it, and read versions 4, 2 and 1', (t) => {
  const sm = new SchedulerStateMachine();
  applyAll(sm, varied(300));
  sm.applyCommand({ op: 'pause-job', atMs: T0 + 5, jobId: 'job-7' });
  const snap = sm.snapshot();
  t.equal((decode(snap) as { v: number }).v, 5);
  const copy = new SchedulerStateMachine();
  copy.restore(snap);
  t.same([...copy.jobs.values()], [...sm.jobs.values()], 'the same jobs after a restore');
  t.same(Buffer.from(copy.snapshot()), Buffer.from(snap), 'and the same snapshot bytes');
  const current = decode(snap) as Record<string, unknown>;
  // Version 4: the same, with the ids as one newline-joined string.
  const ids = [...sm.jobs.keys()].join('\n');
  const v4 = encode({ ...current, v: 4, jobs: { ...(current['jobs'] as object), ids } });
  const fromV4 = new SchedulerStateMachine();
  fromV4.restore(v4);
  t.same([...fromV4.jobs.values()], [...sm.jobs.values()], 'a version 4 snapshot reads the same');
  t.same(Buffer.from(fromV4.snapshot()), Buffer.from(snap), 'and snapshots again as version 5');
  const v2 = encode({ ...current, v: 2, jobs: sm.jobs.columns() });
  const fromV2 = new SchedulerStateMachine();
  fromV2.restore(v2);
  t.same([...fromV2.jobs.values()], [...sm.jobs.values()], 'a version 2 snapshot reads the same');
  const old = encode({ ...current, v: 1, jobs: [...sm.jobs.values()] });
  const fromOld = new SchedulerStateMachine();
  fromOld.restore(old);
  t.same([...fromOld.jobs.values()], [...sm.jobs.values()], 'a version 1 snapshot reads the same');
  t.end();
});

t.test('overlap limits: their own definitions, kept through packing, apply and snapshots', (t) => {
  const skip = (maxConcurrency?: number): Partial<JobSpec> => ({
    overlap:
      maxConcurrency === undefined
        ? { policy: 'skip', bufferCap: 10 }
        : { policy: 'skip', bufferCap: 10, maxConcurrency },
  });
  const creates = [
    create('a', skip()),
    create('b', skip(2)),
    create('c', skip(3)),
    create('d', skip(2)),
  ];
  const [entry] = packCreates(creates);
  t.same(entry!.specOf, [0, 1, 2, 1], 'one definition per limit, equal limits shared');
  const sm = new SchedulerStateMachine();
  applyAll(sm, creates);
  const overlap = (id: string) => sm.jobs.get(id)!.overlap;
  t.same(overlap('a'), { policy: 'skip', bufferCap: 10 });
  t.notOk('maxConcurrency' in overlap('a'), 'absent stays absent');
  t.same(overlap('b'), { policy: 'skip', bufferCap: 10, maxConcurrency: 2 });
  t.equal(overlap('b'), overlap('d'), 'interned: one object for one value');
  t.not(overlap('b'), overlap('c'), 'the limit is part of the interning key');
  t.not(overlap('a'), overlap('b'));
  const copy = new SchedulerStateMachine();
  copy.restore(sm.snapshot());
  t.same([...copy.jobs.values()], [...sm.jobs.values()], 'restored with their limits');
  t.notOk('maxConcurrency' in copy.jobs.get('a')!.overlap);
  t.same(Buffer.from(copy.snapshot()), Buffer.from(sm.snapshot()), 'the same snapshot bytes');
  t.end();
});

t.test('jobs that share policy objects share a definition only when every field agrees', (t) => {
  const base = spec();
  const shared = (over: Partial<JobSpec>): CreateJobCommand => ({
    ...create('x'),
    spec: { ...base, ...over },
  });
  const creates = [
    { ...shared({ schedule: '1 * * * *' }), jobId: 'a' },
    { ...shared({ schedule: '2 * * * *' }), jobId: 'b' },
    { ...shared({ priority: 3 }), jobId: 'c' },
    { ...shared({ endAtMs: T0 + 1 }), jobId: 'd' },
    { ...shared({ payload: '{"y":2}' }), jobId: 'e' },
    { ...shared({}), jobId: 'f' },
  ];
  const [entry] = packCreates(creates);
  t.same(entry!.specOf, [0, 0, 1, 2, 3, 0]);
  t.same(
    creates.map((_, i) => createAt(entry!, i).spec),
    creates.map((c) => c.spec),
  );
  t.end();
});
