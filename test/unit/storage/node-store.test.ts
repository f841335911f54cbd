// NodeStore against a real LevelDB in a temp dir. Goal: what commit, saveSnapshot, createGroup and
// deleteGroup report is what a reopened store finds, with the semantics of ready.ts (snapshot,
// then entries that replace any stored suffix, then hard state), and a change the Raft rules
// forbid is refused before anything reaches the disk. Method: drive one store, compare the groups
// before close with the groups after reopen (dumpGroup renders everything LogStorage answers),
// and for deletions look at the raw keys left in the database.
import t, { type Test } from 'tap';
import { AssertionError } from '../../../src/base/assert.js';
import { bootstrapEntries } from '../../../src/raft/bootstrap.js';
import type { ConfState, Snapshot } from '../../../src/raft/messages.js';
import type { GroupMirror } from '../../../src/storage/group-log.js';
import { SNAPSHOT_CHUNK_BYTES_MAX, decodeKey } from '../../../src/storage/keys.js';
import { NodeStore } from '../../../src/storage/node-store.js';
import {
  allKeys,
  dumpGroup,
  ent,
  ents,
  hashBytes,
  hs,
  openRaw,
  openStore,
  scratchDir,
} from './helpers.js';

const cs: ConfState = {
  voters: ['n1', 'n2', 'n3'],
  votersOutgoing: [],
  learners: [],
  learnersNext: [],
  autoLeave: false,
};

function snapshotOf(index: number, term: number, bytes: number, seed = 1): Snapshot {
  const data = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) data[i] = (i * 13 + seed * 101 + (i >>> 10)) & 0xff;
  return { meta: { index, term, confState: cs }, data };
}

function mustGroup(store: NodeStore, id: number) {
  const g = store.group(id);
  if (g === undefined) throw new Error(`group ${id} missing`);
  return g;
}

async function reopen(t: Test, store: NodeStore): Promise<NodeStore> {
  await store.close();
  return openStore(t, store.dir);
}

t.test('a new store is empty and survives reopen', async (t) => {
  const dir = scratchDir(t);
  const store = await openStore(t, dir);
  t.same(store.groupIds(), []);
  t.equal(store.group(1), undefined);
  const again = await reopen(t, store);
  t.same(again.groupIds(), []);
});

t.test(
  'createGroup with members writes the bootstrap log; without, an empty replica',
  async (t) => {
    const store = await openStore(t, scratchDir(t));
    const g1 = await store.createGroup(1, { voters: ['n1', 'n2'], learners: ['n3'] });
    const g2 = await store.createGroup(2, undefined);
    const boot = bootstrapEntries(['n1', 'n2'], ['n3']);
    t.equal(g1.lastIndex(), 3);
    t.same(g1.hardState(), { term: 1, vote: '', commit: 3 });
    t.same(g1.entries(1, 4, Infinity), boot);
    t.same(g1.bootstrap, { voters: ['n1', 'n2'], learners: ['n3'] });
    t.same([g2.firstIndex(), g2.lastIndex(), g2.term(0)], [1, 0, 0]);
    t.same(g2.hardState(), { term: 0, vote: '', commit: 0 });
    t.equal(g2.bootstrap, undefined);
    await t.rejects(store.createGroup(1, undefined), AssertionError, 'a group is created once');

    const again = await reopen(t, store);
    t.same(again.groupIds(), [1, 2]);
    t.same(dumpGroup(mustGroup(again, 1)), dumpGroup(g1));
    t.same(dumpGroup(mustGroup(again, 2)), dumpGroup(g2));
    t.same(mustGroup(again, 1).bootstrap, { voters: ['n1', 'n2'], learners: ['n3'] });
    t.equal(mustGroup(again, 2).bootstrap, undefined);
  },
);

t.test('one commit of several groups comes back identically after reopen', async (t) => {
  const store = await openStore(t, scratchDir(t));
  for (const id of [1, 2, 3, 70_000]) await store.createGroup(id, undefined);
  const stats = await store.commit([
    { groupId: 1, entries: ents(1, 5, 1), hardState: hs(1, 3, 'n1') },
    { groupId: 2, entries: ents(1, 2, 4, 300), hardState: hs(4, 0) },
    { groupId: 3, entries: [], snapshot: snapshotOf(10, 3, 5000), hardState: hs(3, 10) },
    {
      groupId: 70_000,
      entries: [{ index: 1, term: 2, type: 'conf-change', data: Uint8Array.of(7) }],
      hardState: hs(2, 1, 'n2'),
    },
  ]);
  t.equal(stats.groups, 4);
  t.equal(stats.entries, 8);
  t.ok(stats.bytes > 5000 + 300 * 2, 'bytes count keys and values');
  t.ok(stats.fsyncMs >= 0);

  const before = store.groupIds().map((id) => dumpGroup(mustGroup(store, id)));
  t.same(mustGroup(store, 3).snapshot()?.meta, { index: 10, term: 3, confState: cs });
  t.same([mustGroup(store, 3).firstIndex(), mustGroup(store, 3).term(10)], [11, 3]);
  const again = await reopen(t, store);
  t.same(
    again.groupIds().map((id) => dumpGroup(mustGroup(again, id))),
    before,
  );
  t.equal(hashBytes(mustGroup(again, 3).snapshot()!.data), hashBytes(snapshotOf(10, 3, 5000).data));
});

t.test('a conflicting append at 6 replaces 6..10: no stale entries after reopen', async (t) => {
  const dir = scratchDir(t);
  const store = await openStore(t, dir);
  await store.createGroup(1, undefined);
  await store.commit([{ groupId: 1, entries: ents(1, 10, 1), hardState: hs(1, 5) }]);
  await store.commit([{ groupId: 1, entries: ents(6, 7, 2), hardState: hs(2, 5) }]);
  const g = mustGroup(store, 1);
  t.equal(g.lastIndex(), 7);
  t.same(
    g.entries(1, 8, Infinity)?.map((e) => [e.index, e.term]),
    [1, 2, 3, 4, 5]
      .map((i) => [i, 1])
      .concat([
        [6, 2],
        [7, 2],
      ]),
  );
  await store.close();

  const raw = await openRaw(t, dir);
  const starts = (await allKeys(raw))
    .map((k) => decodeKey(k))
    .flatMap((k) => (k?.kind === 'log' ? [k.first] : []));
  // The record of 1..10 was rewritten as 1..5 in the same batch: 8..10 are gone.
  t.same(starts, [1, 6], 'records from 1 (1..5) and from 6 (6..7)');
  await raw.close();

  const again = await openStore(t, dir);
  t.same(dumpGroup(mustGroup(again, 1)), dumpGroup(g));
});

t.test('saveSnapshot compacts; multi-MiB data is chunked and comes back', async (t) => {
  const dir = scratchDir(t);
  const store = await openStore(t, dir);
  await store.createGroup(4, undefined);
  await store.commit([{ groupId: 4, entries: ents(1, 20, 2), hardState: hs(2, 15) }]);
  const bytes = 2 * SNAPSHOT_CHUNK_BYTES_MAX + 12_345;
  const snap = snapshotOf(12, 2, bytes, 5);
  await store.saveSnapshot(4, snap);
  const g = mustGroup(store, 4);
  t.same([g.firstIndex(), g.lastIndex(), g.term(12), g.term(11)], [13, 20, 2, undefined]);
  t.equal(g.entries(12, 14, Infinity), undefined, 'compacted entries are gone');
  t.same(g.snapshot()?.meta, snap.meta);
  t.equal(hashBytes(g.snapshot()!.data), hashBytes(snap.data), 'the data is read back from disk');
  const before = dumpGroup(g);

  await store.close();
  const raw = await openRaw(t, dir);
  const kinds = (await allKeys(raw)).map((k) => decodeKey(k));
  t.equal(kinds.filter((k) => k?.kind === 'snapshot-chunk').length, 3, 'three chunks of ≤ 1 MiB');
  t.same(
    kinds.flatMap((k) => (k?.kind === 'log' ? [k.first] : [])),
    [13],
    'the record of 1..20 was rewritten as one of 13..20',
  );
  await raw.close();

  const again = await openStore(t, dir);
  const back = mustGroup(again, 4);
  t.same([back.firstIndex(), back.lastIndex(), back.term(12)], [13, 20, 2]);
  t.same(back.snapshot()?.meta, snap.meta);
  t.equal(hashBytes(back.snapshot()!.data), hashBytes(snap.data));
  t.same(dumpGroup(back), before);

  // A smaller later snapshot leaves no stale chunks behind.
  await again.saveSnapshot(4, snapshotOf(14, 2, 10, 6));
  await again.close();
  const raw2 = await openRaw(t, dir);
  const chunks = (await allKeys(raw2)).filter((k) => decodeKey(k)?.kind === 'snapshot-chunk');
  t.equal(chunks.length, 1);
  await raw2.close();
  const third = await openStore(t, dir);
  t.same(mustGroup(third, 4).snapshot()?.meta.index, 14);
  t.equal(mustGroup(third, 4).snapshot()?.data.byteLength, 10);
});

t.test('saveSnapshot at or below the stored snapshot writes nothing', async (t) => {
  const store = await openStore(t, scratchDir(t));
  await store.createGroup(1, undefined);
  await store.commit([{ groupId: 1, entries: ents(1, 10, 1), hardState: hs(1, 10) }]);
  const snap = snapshotOf(8, 1, 100);
  await store.saveSnapshot(1, snap);
  await store.saveSnapshot(1, snapshotOf(5, 1, 100, 2));
  await store.saveSnapshot(1, snapshotOf(8, 1, 100, 3));
  t.same(mustGroup(store, 1).snapshot(), snap);
  t.equal(mustGroup(store, 1).firstIndex(), 9);
});

t.test('saveSnapshot refuses an index that is not applied state', async (t) => {
  const store = await openStore(t, scratchDir(t));
  await store.createGroup(1, undefined);
  await store.commit([{ groupId: 1, entries: ents(1, 10, 1), hardState: hs(1, 6) }]);
  await t.rejects(store.saveSnapshot(1, snapshotOf(7, 1, 1)), AssertionError, 'past commit');
  await t.rejects(store.saveSnapshot(1, snapshotOf(11, 1, 1)), AssertionError, 'past last');
  await t.rejects(store.saveSnapshot(1, snapshotOf(5, 2, 1)), AssertionError, 'wrong term');
  t.equal(mustGroup(store, 1).firstIndex(), 1, 'nothing changed');
});

t.test('a follower installing a snapshot by commit replaces its whole log', async (t) => {
  const dir = scratchDir(t);
  const store = await openStore(t, dir);
  await store.createGroup(1, { voters: ['n1'] });
  await store.commit([{ groupId: 1, entries: ents(2, 9, 1), hardState: hs(1, 4) }]);
  const snap = snapshotOf(20, 3, 1000);
  await store.commit([
    { groupId: 1, entries: ents(21, 22, 3), snapshot: snap, hardState: hs(3, 20, 'n2') },
  ]);
  const g = mustGroup(store, 1);
  t.same(
    [g.firstIndex(), g.lastIndex(), g.term(20), g.term(21), g.term(9)],
    [21, 22, 3, 3, undefined],
  );
  t.same(g.hardState(), hs(3, 20, 'n2'));
  t.same(g.initialState().confState, cs);
  const before = dumpGroup(g);
  await store.close();

  const raw = await openRaw(t, dir);
  t.same(
    (await allKeys(raw)).flatMap((k) => {
      const d = decodeKey(k);
      return d?.kind === 'log' ? [d.first] : [];
    }),
    [21],
    'the records of 1 and 2..9 were deleted; 21..22 is one record',
  );
  await raw.close();
  const again = await openStore(t, dir);
  t.same(dumpGroup(mustGroup(again, 1)), before);
});

t.test('deleteGroup leaves no key of that group and the others intact', async (t) => {
  const dir = scratchDir(t);
  const store = await openStore(t, dir);
  for (const id of [6, 7, 8]) {
    await store.createGroup(id, { voters: ['n1'] });
    await store.commit([{ groupId: id, entries: ents(2, 30, 1), hardState: hs(1, 25) }]);
    await store.saveSnapshot(id, snapshotOf(20, 1, SNAPSHOT_CHUNK_BYTES_MAX + 1));
  }
  const before = [6, 8].map((id) => dumpGroup(mustGroup(store, id)));
  await store.deleteGroup(7);
  t.same(store.groupIds(), [6, 8]);
  t.equal(store.group(7), undefined);
  await t.rejects(store.deleteGroup(7), AssertionError, 'a deleted group is unknown');
  await store.close();

  const raw = await openRaw(t, dir);
  const owners = (await allKeys(raw)).map((k) => {
    const d = decodeKey(k);
    return d !== undefined && 'groupId' in d ? d.groupId : -1;
  });
  t.notOk(owners.includes(7), 'no key of group 7');
  t.ok(owners.includes(6) && owners.includes(8));
  await raw.close();

  const again = await openStore(t, dir);
  t.same(again.groupIds(), [6, 8]);
  t.same(
    [6, 8].map((id) => dumpGroup(mustGroup(again, id))),
    before,
  );
  await again.createGroup(7, undefined);
  t.equal(mustGroup(again, 7).lastIndex(), 0, 'the id can be reused for a new replica');
});

t.test('writes queue in call order even when nobody awaits in between', async (t) => {
  const dir = scratchDir(t);
  const store = await openStore(t, dir);
  const created = store.createGroup(1, undefined);
  const writes = [];
  for (let i = 1; i <= 50; i++) {
    writes.push(store.commit([{ groupId: 1, entries: [ent(i, 1)], hardState: hs(1, i - 1) }]));
  }
  const snap = store.saveSnapshot(1, snapshotOf(30, 1, 64));
  const more = store.commit([{ groupId: 1, entries: [ent(51, 2)], hardState: hs(2, 40) }]);
  const closed = store.close();
  await Promise.all([created, ...writes, snap, more, closed]);
  const again = await openStore(t, dir);
  const g = mustGroup(again, 1);
  t.same([g.firstIndex(), g.lastIndex(), g.term(51), g.hardState().commit], [31, 51, 2, 40]);
});

t.test('a change Raft forbids is refused and nothing reaches the disk', async (t) => {
  const dir = scratchDir(t);
  const store = await openStore(t, dir);
  await store.createGroup(1, undefined);
  await store.createGroup(2, undefined);
  await store.commit([{ groupId: 1, entries: ents(1, 10, 2), hardState: hs(2, 6) }]);
  const before = dumpGroup(mustGroup(store, 1));
  const bad: [string, Parameters<NodeStore['commit']>[0]][] = [
    ['a gap after the last entry', [{ groupId: 1, entries: [ent(12, 2)] }]],
    ['non-contiguous entries', [{ groupId: 1, entries: [ent(11, 2), ent(13, 2)] }]],
    ['a term going down', [{ groupId: 1, entries: [ent(11, 1)] }]],
    ['overwriting a committed entry', [{ groupId: 1, entries: [ent(6, 3)] }]],
    ['commit past the last index', [{ groupId: 1, entries: [], hardState: hs(2, 11) }]],
    ['an unknown group', [{ groupId: 9, entries: [ent(1, 1)] }]],
    [
      'the same group twice',
      [
        { groupId: 2, entries: [ent(1, 1)] },
        { groupId: 2, entries: [ent(2, 1)] },
      ],
    ],
    [
      'a good update beside a bad one',
      [
        { groupId: 2, entries: [ent(1, 1)], hardState: hs(1, 1) },
        { groupId: 1, entries: [ent(5, 9)] },
      ],
    ],
    [
      'a snapshot without a commit that covers it',
      [{ groupId: 2, entries: [], snapshot: snapshotOf(5, 1, 1) }],
    ],
  ];
  for (const [name, updates] of bad) {
    await t.rejects(store.commit(updates), AssertionError, name);
  }
  t.same(dumpGroup(mustGroup(store, 1)), before);
  t.equal(mustGroup(store, 2).lastIndex(), 0);
  // The store is still usable: assertions stop the bad call before any write.
  await store.commit([{ groupId: 1, entries: [ent(11, 2)], hardState: hs(2, 11) }]);
  const again = await reopen(t, store);
  t.equal(mustGroup(again, 1).lastIndex(), 11);
  t.equal(mustGroup(again, 2).lastIndex(), 0);
});

t.test('entries() follows the LogStorage contract', async (t) => {
  const store = await openStore(t, scratchDir(t));
  await store.createGroup(1, undefined);
  await store.commit([{ groupId: 1, entries: ents(1, 10, 1, 100), hardState: hs(1, 8) }]);
  await store.saveSnapshot(1, snapshotOf(3, 1, 10));
  const g = mustGroup(store, 1);
  t.equal(g.entries(3, 5, Infinity), undefined, 'compacted start');
  t.same(g.entries(4, 4, Infinity), [], 'empty range');
  t.same(g.entries(4, 11, 0)?.length, 1, 'at least one entry whatever the byte bound');
  t.same(g.entries(4, 11, 2 * 116)?.length, 2, 'stops before the byte bound is passed');
  t.throws(() => g.entries(4, 12, Infinity), AssertionError, 'past the last index');
});

t.test('a second open of the same directory fails with STORAGE_IO', async (t) => {
  const dir = scratchDir(t);
  await openStore(t, dir);
  await t.rejects(NodeStore.open(dir), { name: 'StorageError', code: 'STORAGE_IO' });
});

t.test('a failed write makes the store refuse every later write with STORAGE_IO', async (t) => {
  const store = await openStore(t, scratchDir(t));
  await store.createGroup(1, undefined);
  // Fault injection: close the LevelDB handle underneath the store (a private field), so the
  // next write fails the way a dead disk would.
  await (store as unknown as { db: { close(): Promise<void> } }).db.close();
  await t.rejects(store.commit([{ groupId: 1, entries: [ent(1, 1)] }]), {
    name: 'StorageError',
    code: 'STORAGE_IO',
    message: /commit in .* failed/,
  });
  t.equal(store.group(1)?.lastIndex(), 0, 'the mirror did not change');
  await t.rejects(store.commit([{ groupId: 1, entries: [ent(1, 1)] }]), { code: 'STORAGE_IO' });
  await t.rejects(store.createGroup(2, undefined), { code: 'STORAGE_IO' });
  await store.close();
  t.pass('close still resolves');
});

t.test('a group keeps a bounded tail in memory and reads older entries back', async (t) => {
  const dir = scratchDir(t);
  // 2 KiB of tail: records of 4 entries of 300 bytes each are evicted once committed.
  const store = await openStore(t, dir, { logTailBytesMax: 2048 });
  await store.createGroup(1, undefined);
  // Terms 1, 2, 3: four records each of entries 1..16, 17..32, then 33..40 in two records.
  const termOf = (i: number): number => 1 + ((i - 1) >> 4);
  const written = Array.from({ length: 40 }, (_, k) => ent(k + 1, termOf(k + 1), 300));
  for (let r = 0; r < 10; r++) {
    const lo = 1 + r * 4;
    await store.commit([
      { groupId: 1, entries: written.slice(lo - 1, lo + 3), hardState: hs(3, lo + 1) },
    ]);
  }
  const g = mustGroup(store, 1) as GroupMirror;
  t.ok(g.tailEntryCount() < 40, `${g.tailEntryCount()} of 40 entries held in memory`);
  t.same([g.firstIndex(), g.lastIndex()], [1, 40]);
  t.same(
    g.entries(1, 41, Infinity)!.map((e) => [e.index, e.term, hashBytes(e.data)]),
    written.map((e) => [e.index, e.term, hashBytes(e.data)]),
    'every entry reads back, the evicted ones from LevelDB',
  );
  t.same(
    g.entries(3, 41, 1000)!.map((e) => e.index),
    [3, 4, 5],
    'the byte bound holds across the evicted part',
  );
  t.same(
    [g.term(0), g.term(1), g.term(16), g.term(17), g.term(40), g.term(41)],
    [0, 1, 1, 2, 3, undefined],
  );
  // Uncommitted entries stay in memory (a conflicting append may still replace them).
  await store.commit([{ groupId: 1, entries: ents(41, 48, 3, 300), hardState: hs(3, 40) }]);
  t.ok(g.tailEntryCount() >= 8, 'the uncommitted record is held');
  await store.commit([{ groupId: 1, entries: ents(45, 46, 4, 300), hardState: hs(4, 40) }]);
  t.equal(g.lastIndex(), 46);
  const before = dumpGroup(g);
  await store.close();
  const again = await openStore(t, dir, { logTailBytesMax: 2048 });
  t.same(dumpGroup(mustGroup(again, 1)), before, 'a reopened store answers the same');
});

t.test(
  'between a compaction reaching the disk and the mirror, reads see the old log',
  async (t) => {
    const store = await openStore(t, scratchDir(t), { logTailBytesMax: 0 });
    await store.createGroup(1, undefined);
    for (let r = 0; r < 8; r++) {
      const lo = 1 + r * 4;
      await store.commit([
        { groupId: 1, entries: ents(lo, lo + 3, 1, 500), hardState: hs(1, lo + 3) },
      ]);
    }
    const bytes = 3 * SNAPSHOT_CHUNK_BYTES_MAX;
    await store.saveSnapshot(1, snapshotOf(2, 1, bytes, 1));
    const g = mustGroup(store, 1);
    const read = () => ({
      first: g.firstIndex(),
      entries: g.entries(g.firstIndex(), 33, Infinity)!.map((e) => hashBytes(e.data)),
      snapshot: hashBytes(g.snapshot()!.data),
    });
    const want = (first: number, seed: number) => ({
      first,
      entries: ents(first, 32, 1, 500).map((e) => hashBytes(e.data)),
      snapshot: hashBytes(snapshotOf(first - 1, 1, bytes, seed).data),
    });
    t.same(read(), want(3, 1));

    // Fault injection (a private field): the next batch's write resolves only when the test says,
    // after LevelDB has applied it. The new snapshot deletes the records from 1 to 9, rewrites
    // 9..12 as 11..12 and replaces every chunk; until the mirror changes, a read must not see it.
    const db = (store as unknown as { db: { batch(): { write(o: unknown): Promise<void> } } }).db;
    const realBatch = db.batch.bind(db);
    let release = (): void => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    let written = (): void => {};
    const onDisk = new Promise<void>((resolve) => (written = resolve));
    db.batch = () => {
      const batch = realBatch();
      const realWrite = batch.write.bind(batch);
      batch.write = async (options) => {
        await realWrite(options);
        written();
        await gate;
      };
      return batch;
    };
    const write = store.saveSnapshot(1, snapshotOf(10, 1, bytes, 11));
    await onDisk;
    t.same(read(), want(3, 1), 'written but not yet in the mirror: the old log and snapshot');
    release();
    await write;
    t.same(read(), want(11, 11), 'and the new ones once the mirror changed');
  },
);
