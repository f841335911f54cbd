// RaftLog joins the stable log (MemoryLogStorage) and the unstable tail, and carries the commit
// and apply cursors. The tests build logs whose entries sit partly in storage and partly in the
// unstable tail, then check the follower-side append (conflict detection and truncation, commit
// never beyond the last new entry and never backwards), that a committed entry can never be
// truncated (an assertion, not a silent rewrite), the leader's findConflictByTerm skip,
// slicing across the stable/unstable boundary under a byte bound, snapshot restore, and stableTo.
import t from 'tap';
import { AssertionError } from '../../../src/base/assert.js';
import { RaftLog } from '../../../src/raft/log.js';
import { MemoryLogStorage } from '../../../src/raft/log-storage.js';
import {
  EMPTY_CONF_STATE,
  entryBytes,
  type Entry,
  type Snapshot,
} from '../../../src/raft/messages.js';

const ent = (index: number, term: number, size = 0): Entry => ({
  index,
  term,
  type: 'normal',
  data: new Uint8Array(size),
});

/** A log whose first `stable` entries are in storage and the rest in the unstable tail. */
function makeLog(terms: number[], stable = terms.length): { log: RaftLog; s: MemoryLogStorage } {
  const s = new MemoryLogStorage(EMPTY_CONF_STATE);
  const all = terms.map((term, i) => ent(i + 1, term));
  s.append(all.slice(0, stable));
  const log = new RaftLog(s);
  log.append(all.slice(stable));
  return { log, s };
}

const termsOf = (log: RaftLog): number[] => {
  const out: number[] = [];
  for (let i = log.firstIndex(); i <= log.lastIndex(); i++) out.push(log.term(i) ?? -1);
  return out;
};

const indexes = (es: readonly Entry[] | undefined): number[] | undefined => es?.map((e) => e.index);

t.test('maybeAppend: mismatches, commit bounds, appends and conflicts', (t) => {
  interface Case {
    name: string;
    index: number;
    logTerm: number;
    commit: number;
    entries: Entry[];
    lastNew: number | undefined;
    commitAfter: number;
    terms: number[];
  }
  // The log before each case: terms [1, 2, 3], committed 1.
  const cases: Case[] = [
    {
      name: 'term mismatch at index',
      index: 3,
      logTerm: 2,
      commit: 3,
      entries: [ent(4, 4)],
      lastNew: undefined,
      commitAfter: 1,
      terms: [1, 2, 3],
    },
    {
      name: 'index beyond the log',
      index: 4,
      logTerm: 3,
      commit: 3,
      entries: [ent(5, 4)],
      lastNew: undefined,
      commitAfter: 1,
      terms: [1, 2, 3],
    },
    {
      name: 'heartbeat-like: no entries, commit to 3',
      index: 3,
      logTerm: 3,
      commit: 3,
      entries: [],
      lastNew: 3,
      commitAfter: 3,
      terms: [1, 2, 3],
    },
    {
      name: 'commit is capped at the last new index',
      index: 2,
      logTerm: 2,
      commit: 3,
      entries: [],
      lastNew: 2,
      commitAfter: 2,
      terms: [1, 2, 3],
    },
    {
      name: 'commit never goes backwards',
      index: 3,
      logTerm: 3,
      commit: 0,
      entries: [],
      lastNew: 3,
      commitAfter: 1,
      terms: [1, 2, 3],
    },
    {
      name: 'append one new entry, commit capped by it',
      index: 3,
      logTerm: 3,
      commit: 9,
      entries: [ent(4, 4)],
      lastNew: 4,
      commitAfter: 4,
      terms: [1, 2, 3, 4],
    },
    {
      name: 'conflict at 3 replaces the suffix',
      index: 2,
      logTerm: 2,
      commit: 3,
      entries: [ent(3, 4)],
      lastNew: 3,
      commitAfter: 3,
      terms: [1, 2, 4],
    },
    {
      name: 'conflict at 2 (just after commit) replaces two entries',
      index: 1,
      logTerm: 1,
      commit: 1,
      entries: [ent(2, 4), ent(3, 4)],
      lastNew: 3,
      commitAfter: 1,
      terms: [1, 4, 4],
    },
    {
      name: 'matching prefix then new entries: no truncation',
      index: 1,
      logTerm: 1,
      commit: 2,
      entries: [ent(2, 2), ent(3, 3), ent(4, 3)],
      lastNew: 4,
      commitAfter: 2,
      terms: [1, 2, 3, 3],
    },
    {
      name: 'an old, shorter append never truncates matching later entries',
      index: 1,
      logTerm: 1,
      commit: 1,
      entries: [ent(2, 2)],
      lastNew: 2,
      commitAfter: 1,
      terms: [1, 2, 3],
    },
    {
      name: 'index 0 always matches',
      index: 0,
      logTerm: 0,
      commit: 3,
      entries: [],
      lastNew: 0,
      commitAfter: 1,
      terms: [1, 2, 3],
    },
  ];
  for (const stable of [3, 2, 0]) {
    for (const c of cases) {
      const { log } = makeLog([1, 2, 3], stable);
      log.commitTo(1);
      const lastNew = log.maybeAppend(c.index, c.logTerm, c.commit, c.entries);
      const name = `${c.name} (${stable} stable)`;
      t.equal(lastNew, c.lastNew, `${name}: lastNew`);
      t.equal(log.committed, c.commitAfter, `${name}: committed`);
      t.same(termsOf(log), c.terms, `${name}: terms`);
    }
  }
  t.end();
});

t.test('a committed entry is never truncated', (t) => {
  for (const stable of [3, 0]) {
    const { log } = makeLog([1, 2, 3], stable);
    log.commitTo(2);
    t.throws(
      () => log.maybeAppend(1, 1, 3, [ent(2, 4)]),
      AssertionError,
      `conflict at a committed index asserts (${stable} stable)`,
    );
    t.throws(() => log.append([ent(2, 9)]), AssertionError, 'append below commit asserts');
    t.same(termsOf(log), [1, 2, 3], 'the log is untouched');
    t.equal(log.append([ent(3, 9)]), 3, 'replacing the first uncommitted entry is allowed');
    t.same(termsOf(log), [1, 2, 9]);
  }
  t.end();
});

t.test('findConflictByTerm skips a whole term at once', (t) => {
  // Terms by index 1..7: 2 2 5 5 5 7 7
  const { log } = makeLog([2, 2, 5, 5, 5, 7, 7], 4);
  const cases: [number, number, { index: number; term: number }][] = [
    [7, 7, { index: 7, term: 7 }],
    [7, 6, { index: 5, term: 5 }],
    [7, 5, { index: 5, term: 5 }],
    [7, 4, { index: 2, term: 2 }],
    [7, 2, { index: 2, term: 2 }],
    [7, 1, { index: 0, term: 0 }],
    [4, 5, { index: 4, term: 5 }],
    [4, 3, { index: 2, term: 2 }],
    [20, 7, { index: 7, term: 7 }],
    [20, 6, { index: 5, term: 5 }],
    [0, 9, { index: 0, term: 0 }],
  ];
  for (const [index, term, want] of cases) {
    t.same(log.findConflictByTerm(index, term), want, `findConflictByTerm(${index}, ${term})`);
  }
  t.end();
});

t.test('findConflictByTerm stops at a compacted index with an unknown term', (t) => {
  const { log, s } = makeLog([2, 2, 5, 5, 5, 7, 7]);
  s.compact(3);
  t.same(log.findConflictByTerm(7, 5), { index: 5, term: 5 }, 'found above the snapshot');
  t.same(log.findConflictByTerm(7, 4), { index: 2, term: 0 }, 'index 2 is compacted: term 0');
  t.end();
});

t.test('slice spans stable and unstable entries under a byte bound', (t) => {
  const s = new MemoryLogStorage(EMPTY_CONF_STATE);
  s.append([1, 2, 3, 4, 5].map((i) => ent(i, 1, 10)));
  const log = new RaftLog(s);
  log.append([6, 7, 8].map((i) => ent(i, 2, 10)));
  const one = entryBytes(ent(1, 1, 10));
  t.equal(log.unstableOffset, 6);
  t.same(indexes(log.slice(3, 9, Infinity)), [3, 4, 5, 6, 7, 8], 'across the boundary');
  t.same(indexes(log.slice(6, 8, Infinity)), [6, 7], 'unstable only');
  t.same(indexes(log.slice(2, 4, Infinity)), [2, 3], 'stable only');
  t.same(indexes(log.slice(4, 9, 0)), [4], 'at least one entry');
  t.same(indexes(log.slice(4, 9, 2 * one)), [4, 5], 'stable part fills the budget');
  t.same(indexes(log.slice(5, 9, 2 * one)), [5, 6], 'budget ends in the unstable part');
  t.same(indexes(log.slice(1, 9, 3 * one - 1)), [1, 2], 'budget ends in the stable part');
  t.same(indexes(log.slice(6, 9, 0)), [6], 'at least one unstable entry');
  t.same(log.slice(5, 5, Infinity), [], 'empty range');
  t.throws(() => log.slice(1, 10, Infinity), AssertionError, 'beyond lastIndex + 1');
  s.compact(3);
  t.equal(log.slice(2, 5, Infinity), undefined, 'compacted range: undefined');
  t.same(indexes(log.slice(4, 7, Infinity)), [4, 5, 6]);
  t.end();
});

t.test('append into the unstable tail and over the stable log', (t) => {
  const { log, s } = makeLog([1, 1, 1, 2, 2, 2, 2], 5);
  t.equal(log.lastIndex(), 7);
  t.equal(log.append([ent(7, 3)]), 7, 'replace the last unstable entry');
  t.same(termsOf(log), [1, 1, 1, 2, 2, 2, 3]);
  t.equal(log.append([ent(8, 3)]), 8, 'extend at the end');
  t.equal(log.append([ent(3, 4)]), 3, 'conflict inside the stable log');
  t.same(termsOf(log), [1, 1, 4]);
  t.equal(log.unstableOffset, 3);
  t.same(indexes(log.slice(1, 4, Infinity)), [1, 2, 3], 'stale storage entries are hidden');
  t.equal(log.lastStableIndex(), 2, 'only 1..2 are durable and agree');
  // The runtime persists the tail, then acknowledges it.
  s.append(log.unstableEntries);
  log.stableTo(3, undefined);
  t.equal(log.unstableEntries.length, 0);
  t.equal(log.lastIndex(), 3);
  t.equal(log.lastStableIndex(), 3);
  t.same(termsOf(log), [1, 1, 4]);
  t.end();
});

t.test('stableTo moves the unstable offset only over persisted entries', (t) => {
  const { log, s } = makeLog([1, 1, 1, 2, 2, 2], 3);
  t.equal(log.unstableOffset, 4);
  log.stableTo(2, undefined);
  t.equal(log.unstableOffset, 4, 'an index below the tail changes nothing');
  s.append(log.unstableEntries.slice(0, 2));
  log.stableTo(5, undefined);
  t.equal(log.unstableOffset, 6);
  t.same(indexes(log.unstableEntries), [6]);
  t.equal(log.lastIndex(), 6, 'lastIndex unchanged');
  t.equal(log.lastStableIndex(), 5);
  s.append(log.unstableEntries);
  log.stableTo(6, undefined);
  t.equal(log.unstableEntries.length, 0);
  t.equal(log.lastStableIndex(), 6);
  log.stableTo(6, undefined);
  t.equal(log.unstableOffset, 7, 'repeating is harmless');
  t.end();
});

t.test('restore installs a snapshot as the whole log', (t) => {
  const { log, s } = makeLog([1, 1, 2, 2], 2);
  log.commitTo(2);
  const snap: Snapshot = {
    meta: { index: 10, term: 3, confState: EMPTY_CONF_STATE },
    data: new Uint8Array([7]),
  };
  log.restore(snap);
  t.equal(log.firstIndex(), 11);
  t.equal(log.lastIndex(), 10);
  t.equal(log.term(10), 3);
  t.equal(log.lastTerm(), 3);
  t.equal(log.term(5), undefined, 'entries below the snapshot are unknown');
  t.equal(log.term(2), undefined, 'even ones still in storage');
  t.equal(log.committed, 10, 'the snapshot point is committed');
  t.equal(log.unstableEntries.length, 0);
  t.notOk(log.hasNextCommittedEntries(), 'nothing to apply while the snapshot is pending');
  t.same(log.nextCommittedEntries(Infinity), []);
  t.equal(log.lastStableIndex(), 0, 'nothing is durable until the snapshot is');
  t.ok(log.isUpToDate(10, 3), 'up-to-date check uses the snapshot point');
  t.notOk(log.isUpToDate(9, 3));
  // New entries may follow the snapshot before it is persisted.
  log.append([ent(11, 3)]);
  t.equal(log.lastIndex(), 11);
  // Persist the snapshot and the entry, as a Ready would.
  s.applySnapshot(snap);
  s.append([ent(11, 3)]);
  log.stableTo(11, 10);
  t.equal(log.unstableSnapshot, undefined);
  t.equal(log.applied, 10, 'the snapshot counts as applied');
  t.equal(log.applying, 10);
  t.equal(log.firstIndex(), 11);
  t.equal(log.lastIndex(), 11);
  t.equal(log.term(10), 3);
  t.equal(log.lastStableIndex(), 11);
  t.end();
});

t.test('stableTo ignores a snapshot index that is not the pending one', (t) => {
  const { log } = makeLog([1, 1]);
  const snap: Snapshot = {
    meta: { index: 5, term: 2, confState: EMPTY_CONF_STATE },
    data: new Uint8Array(),
  };
  log.restore(snap);
  log.stableTo(0, 4);
  t.not(log.unstableSnapshot, undefined, 'still pending');
  t.equal(log.applied, 0);
  t.end();
});

t.test('commit and apply cursors', (t) => {
  const { log } = makeLog([1, 1, 2, 2, 2], 3);
  t.equal(log.committed, 0);
  t.equal(log.applied, 0);
  log.commitTo(3);
  t.equal(log.committed, 3);
  log.commitTo(2);
  t.equal(log.committed, 3, 'commitTo never lowers commit');
  t.throws(() => log.commitTo(6), AssertionError, 'commit beyond the last index asserts');
  t.ok(log.hasNextCommittedEntries());
  t.same(indexes(log.nextCommittedEntries(Infinity)), [1, 2, 3]);
  t.same(indexes(log.nextCommittedEntries(0)), [1], 'at least one entry under a tiny budget');
  log.applying = 2;
  t.same(indexes(log.nextCommittedEntries(Infinity)), [3], 'continues after applying');
  log.appliedTo(2);
  t.equal(log.applied, 2);
  t.throws(() => log.appliedTo(4), AssertionError, 'apply beyond commit asserts');
  log.commitTo(5);
  t.same(indexes(log.nextCommittedEntries(Infinity)), [3, 4, 5], 'spans into unstable entries');
  log.appliedTo(5);
  t.notOk(log.hasNextCommittedEntries());
  t.same(log.nextCommittedEntries(Infinity), []);
  t.end();
});

t.test('isUpToDate compares last term first, then last index (§5.4.1)', (t) => {
  const { log } = makeLog([1, 2, 3]);
  const cases: [number, number, boolean][] = [
    [3, 3, true],
    [4, 3, true],
    [2, 3, false],
    [1, 4, true],
    [9, 2, false],
    [0, 0, false],
  ];
  for (const [index, term, want] of cases) {
    t.equal(log.isUpToDate(index, term), want, `(${index}, term ${term})`);
  }
  const empty = new RaftLog(new MemoryLogStorage(EMPTY_CONF_STATE));
  t.ok(empty.isUpToDate(0, 0), 'an empty log accepts an empty candidate');
  t.end();
});

t.test('a log over compacted storage starts at the snapshot point', (t) => {
  const s = new MemoryLogStorage(EMPTY_CONF_STATE);
  s.append([1, 2, 3, 4, 5].map((i) => ent(i, i)));
  s.compact(3);
  const log = new RaftLog(s);
  t.equal(log.firstIndex(), 4);
  t.equal(log.lastIndex(), 5);
  t.equal(log.committed, 3, 'the snapshot point is committed');
  t.equal(log.applied, 3, 'and applied');
  t.equal(log.term(3), 3);
  t.equal(log.term(2), undefined);
  t.equal(log.term(0), 0);
  const later = new RaftLog(s, 5);
  t.equal(later.applied, 5, 'a higher applied index from the state machine wins');
  t.end();
});
