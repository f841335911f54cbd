// MemoryLogStorage is the stable log every test and the simulator run on, so it must honour the
// LogStorage contract exactly: the log is [firstIndex, lastIndex] with the snapshot point at
// firstIndex - 1, appends truncate a conflicting suffix, compaction and snapshots move the first
// index, and entries() respects its byte bound while always returning at least one entry. Each
// test builds a small storage by hand and checks indexes, terms and returned entries.
import t from 'tap';
import { AssertionError } from '../../../src/base/assert.js';
import { MemoryLogStorage } from '../../../src/raft/log-storage.js';
import { entryBytes, type ConfState, type Entry } from '../../../src/raft/messages.js';

const cs: ConfState = {
  voters: ['n1', 'n2', 'n3'],
  votersOutgoing: [],
  learners: [],
  learnersNext: [],
  autoLeave: false,
};

const ent = (index: number, term: number, size = 0): Entry => ({
  index,
  term,
  type: 'normal',
  data: new Uint8Array(size),
});

/** Entries 1..terms.length with the given terms. */
const ents = (...terms: number[]): Entry[] => terms.map((term, i) => ent(i + 1, term));

const indexes = (es: readonly Entry[] | undefined): number[] | undefined => es?.map((e) => e.index);

t.test('an empty storage', (t) => {
  const s = new MemoryLogStorage(cs);
  t.equal(s.firstIndex(), 1);
  t.equal(s.lastIndex(), 0);
  t.equal(s.term(0), 0, 'the snapshot point has term 0');
  t.equal(s.term(1), undefined);
  t.same(s.initialState(), {
    hardState: { term: 0, vote: '', commit: 0 },
    confState: cs,
  });
  t.same(s.snapshot()?.meta, { index: 0, term: 0, confState: cs });
  t.same(s.entries(1, 1, 100), [], 'an empty range');
  t.end();
});

t.test('append adds, and truncates a conflicting suffix', (t) => {
  const s = new MemoryLogStorage(cs);
  s.append(ents(1, 1, 2, 2));
  t.equal(s.lastIndex(), 4);
  t.same(
    [1, 2, 3, 4].map((i) => s.term(i)),
    [1, 1, 2, 2],
  );
  s.append([ent(3, 3)]);
  t.equal(s.lastIndex(), 3, 'entries from 3 on were replaced');
  t.equal(s.term(3), 3);
  t.equal(s.term(4), undefined, 'old entry 4 is gone');
  s.append([ent(4, 3), ent(5, 3)]);
  t.equal(s.lastIndex(), 5, 'appending right after the end extends');
  s.append([]);
  t.equal(s.lastIndex(), 5, 'an empty append is a no-op');
  s.append([ent(1, 5)]);
  t.equal(s.lastIndex(), 1, 'rewriting from index 1 drops everything after it');
  t.equal(s.term(1), 5);
  t.end();
});

t.test('append refuses gaps and writes below the snapshot', (t) => {
  const s = new MemoryLogStorage(cs);
  s.append(ents(1, 1, 1));
  t.throws(() => s.append([ent(5, 1)]), AssertionError, 'a gap after the last index');
  s.compact(2);
  t.throws(() => s.append([ent(2, 2)]), AssertionError, 'at the snapshot point');
  t.throws(() => s.append([ent(1, 2)]), AssertionError, 'below the snapshot point');
  s.append([ent(3, 2)]);
  t.equal(s.term(3), 2, 'right after the snapshot point is fine');
  t.end();
});

t.test('term answers in [firstIndex - 1, lastIndex] only', (t) => {
  const s = new MemoryLogStorage(cs);
  s.append(ents(1, 2, 3, 4, 5));
  s.compact(3);
  t.equal(s.firstIndex(), 4);
  t.equal(s.term(2), undefined, 'compacted');
  t.equal(s.term(3), 3, 'the snapshot point keeps its term');
  t.equal(s.term(5), 5);
  t.equal(s.term(6), undefined, 'beyond the end');
  t.end();
});

t.test('compact drops entries before the index and is idempotent', (t) => {
  const s = new MemoryLogStorage(cs);
  s.append(ents(1, 1, 2, 3, 3));
  s.compact(3);
  t.equal(s.firstIndex(), 4);
  t.equal(s.lastIndex(), 5);
  t.equal(s.entries(3, 5, Infinity), undefined, 'the compacted range is gone');
  t.same(indexes(s.entries(4, 6, Infinity)), [4, 5]);
  s.compact(2);
  t.equal(s.firstIndex(), 4, 'compacting to an older index does nothing');
  s.compact(3);
  t.equal(s.firstIndex(), 4, 'compacting to the same index does nothing');
  t.throws(() => s.compact(6), AssertionError, 'cannot compact past the last index');
  s.compact(5);
  t.equal(s.firstIndex(), 6);
  t.equal(s.lastIndex(), 5, 'everything compacted: empty log');
  t.equal(s.term(5), 3);
  t.end();
});

t.test('createSnapshot records the snapshot and compacts', (t) => {
  const s = new MemoryLogStorage(cs);
  s.append(ents(1, 1, 2, 2, 3));
  const data = new TextEncoder().encode('state@4');
  const cs2: ConfState = { ...cs, voters: ['n1', 'n2', 'n3', 'n4'] };
  const snap = s.createSnapshot(4, cs2, data);
  t.same(snap.meta, { index: 4, term: 2, confState: cs2 });
  t.same(s.snapshot(), snap, 'the storage now hands out this snapshot');
  t.equal(s.firstIndex(), 5);
  t.equal(s.lastIndex(), 5);
  t.equal(s.term(4), 2);
  t.same(s.initialState().confState, cs2, 'a restart reads the snapshot configuration');
  t.throws(() => s.createSnapshot(4, cs2, data), AssertionError, 'not newer than the last one');
  t.throws(() => s.createSnapshot(6, cs2, data), AssertionError, 'beyond the last index');
  t.end();
});

t.test('applySnapshot replaces the whole log', (t) => {
  const s = new MemoryLogStorage(cs);
  s.append(ents(1, 1, 1));
  s.applySnapshot({
    meta: { index: 10, term: 4, confState: cs },
    data: new Uint8Array([1]),
  });
  t.equal(s.firstIndex(), 11);
  t.equal(s.lastIndex(), 10);
  t.equal(s.term(10), 4);
  t.equal(s.term(2), undefined);
  s.append([ent(11, 4)]);
  t.equal(s.lastIndex(), 11, 'appends continue after the snapshot');
  t.throws(
    () => s.applySnapshot({ meta: { index: 5, term: 1, confState: cs }, data: new Uint8Array() }),
    AssertionError,
    'an older snapshot is refused',
  );
  t.end();
});

t.test('entries respects maxBytes and always returns one entry', (t) => {
  const s = new MemoryLogStorage(cs);
  s.append([ent(1, 1, 10), ent(2, 1, 10), ent(3, 1, 10), ent(4, 1, 10)]);
  const one = entryBytes(ent(1, 1, 10));
  t.same(indexes(s.entries(1, 5, Infinity)), [1, 2, 3, 4], 'no bound');
  t.same(indexes(s.entries(1, 5, 0)), [1], 'at least one entry even with maxBytes 0');
  t.same(indexes(s.entries(1, 5, one)), [1], 'exactly one entry fits');
  t.same(indexes(s.entries(1, 5, 2 * one - 1)), [1], 'the second does not fit');
  t.same(indexes(s.entries(1, 5, 2 * one)), [1, 2], 'two fit');
  t.same(indexes(s.entries(2, 4, 100 * one)), [2, 3], 'hi is exclusive');
  t.throws(() => s.entries(1, 6, Infinity), AssertionError, 'hi beyond lastIndex + 1');
  s.compact(2);
  t.equal(s.entries(2, 4, Infinity), undefined, 'lo at the snapshot point is compacted');
  t.same(indexes(s.entries(3, 5, Infinity)), [3, 4]);
  t.end();
});

t.test('hard state round-trips', (t) => {
  const s = new MemoryLogStorage(cs);
  s.append(ents(1, 2));
  s.setHardState({ term: 2, vote: 'n1', commit: 2 });
  t.same(s.hardStateNow(), { term: 2, vote: 'n1', commit: 2 });
  t.same(s.initialState().hardState, { term: 2, vote: 'n1', commit: 2 });
  t.end();
});

t.test('clone is independent of the original', (t) => {
  const s = new MemoryLogStorage(cs);
  s.append(ents(1, 1, 2));
  s.setHardState({ term: 2, vote: 'n2', commit: 1 });
  const c = s.clone();
  s.append([ent(4, 2)]);
  s.append([ent(2, 3)]);
  s.setHardState({ term: 3, vote: '', commit: 2 });
  t.equal(c.lastIndex(), 3, 'the clone keeps its entries');
  t.same(
    [1, 2, 3].map((i) => c.term(i)),
    [1, 1, 2],
  );
  t.same(c.hardStateNow(), { term: 2, vote: 'n2', commit: 1 });
  c.append([ent(4, 9)]);
  t.equal(s.term(4), undefined, 'and the original does not see clone writes');
  t.end();
});
