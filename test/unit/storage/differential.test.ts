// Differential test: NodeStore against MemoryLogStorage, the oracle every Raft test runs on.
// Goal: through any Raft-legal sequence of writes — appends that replace a suffix, hard-state
// changes, compaction by saveSnapshot (also stale ones), follower snapshot installs — and through
// close and reopen, each NodeStore group answers the LogStorage questions exactly as the oracle
// does. Method: per seed (SeededRand), three groups each with its own MemoryLogStorage; each
// step picks a random subset of groups and a random legal change per group, applies it to the
// oracles and, as ONE group commit, to the store; every few steps the store is closed and
// reopened from disk; after every step all groups are compared. On failure the seed and step
// are in the assertion message. It runs twice: with the default in-memory log tail, and with a
// tail of 0 bytes, where every committed record but the last is evicted and read back from
// LevelDB (group-log.ts), through compactions that rewrite and delete evicted records.
import t, { type Test } from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { MemoryLogStorage } from '../../../src/raft/log-storage.js';
import type { ConfState, Entry, HardState, Snapshot } from '../../../src/raft/messages.js';
import type { GroupMirror } from '../../../src/storage/group-log.js';
import type { GroupLog, GroupUpdate, NodeStore } from '../../../src/storage/node-store.js';
import { hashBytes, openStore, scratchDir } from './helpers.js';

const GROUPS = [3, 11, 4_000_000_000];
const SEEDS = [1, 2, 3, 42, 20_261_129];
const STEPS = 150;

interface Model {
  readonly oracle: MemoryLogStorage;
  /** The current term of the (imagined) cluster: new entries and votes use it. */
  term: number;
}

const confs: ConfState[] = [
  { voters: ['n1'], votersOutgoing: [], learners: [], learnersNext: [], autoLeave: false },
  {
    voters: ['n1', 'n2', 'n3'],
    votersOutgoing: ['n1'],
    learners: ['n4'],
    learnersNext: [],
    autoLeave: true,
  },
];

function bytes(rand: SeededRand, size: number): Uint8Array {
  const b = new Uint8Array(size);
  for (let i = 0; i < size; i++) b[i] = rand.int(256);
  return b;
}

function randomEntries(rand: SeededRand, m: Model, from: number): Entry[] {
  if (rand.chance(0.3)) m.term++;
  const prevTerm = m.oracle.term(from - 1) ?? 0;
  const term = Math.max(m.term, prevTerm);
  m.term = term;
  const count = 1 + rand.int(8);
  const out: Entry[] = [];
  for (let i = 0; i < count; i++) {
    out.push({
      index: from + i,
      term,
      type: rand.chance(0.1) ? 'conf-change' : 'normal',
      data: bytes(rand, rand.int(64)),
    });
  }
  return out;
}

function hardState(rand: SeededRand, m: Model, commitLo: number, commitHi: number): HardState {
  const commit = commitLo + rand.int(commitHi - commitLo + 1);
  return { term: m.term, vote: rand.chance(0.5) ? 'n2' : '', commit };
}

/** One legal change for one group: applied to the oracle now, returned for the store. */
function planStep(
  rand: SeededRand,
  m: Model,
  groupId: number,
): { update?: GroupUpdate; snapshot?: Snapshot } {
  const o = m.oracle;
  const commit = o.hardStateNow().commit;
  const first = o.firstIndex();
  const last = o.lastIndex();
  const roll = rand.int(100);

  if (roll < 55) {
    // Append, maybe replacing an uncommitted suffix (Raft never rewrites committed entries).
    const from = Math.max(commit + 1, first) + rand.int(last + 2 - Math.max(commit + 1, first));
    const entries = randomEntries(rand, m, from);
    o.append(entries);
    const hs = rand.chance(0.8) ? hardState(rand, m, commit, o.lastIndex()) : undefined;
    if (hs) o.setHardState(hs);
    return { update: { groupId, entries, hardState: hs } };
  }
  if (roll < 70) {
    // Hard state only: commit moves forward, or the term/vote changes.
    if (rand.chance(0.5)) m.term++;
    const hs = hardState(rand, m, commit, last);
    o.setHardState(hs);
    return { update: { groupId, entries: [], hardState: hs } };
  }
  if (roll < 88) {
    // The state machine snapshots an applied index; sometimes a stale one (ignored by both).
    if (commit < first) return {};
    const index = rand.chance(0.15)
      ? first - 1 - rand.int(first)
      : first + rand.int(commit - first + 1);
    const big = rand.chance(0.1);
    const data = bytes(rand, big ? (1 << 20) + rand.int(300_000) : rand.int(200));
    const conf = confs[rand.int(confs.length)]!;
    if (index < first) {
      return { snapshot: { meta: { index, term: o.term(index) ?? 0, confState: conf }, data } };
    }
    return { snapshot: o.createSnapshot(index, conf, data) };
  }
  // A leader's snapshot past our commit replaces the log; entries may follow in the same Ready.
  m.term += rand.int(2);
  const index = commit + 1 + rand.int(last - commit + 5);
  const snap: Snapshot = {
    meta: { index, term: Math.max(m.term, o.term(last) ?? 0), confState: confs[rand.int(2)]! },
    data: bytes(rand, rand.int(3000)),
  };
  m.term = snap.meta.term;
  o.applySnapshot(snap);
  const entries = rand.chance(0.5) ? randomEntries(rand, m, index + 1) : [];
  o.append(entries);
  const hs = hardState(rand, m, index, o.lastIndex());
  o.setHardState(hs);
  return { update: { groupId, entries, hardState: hs, snapshot: snap } };
}

function answers(log: GroupLog | MemoryLogStorage, rand: SeededRand) {
  const first = log.firstIndex();
  const last = log.lastIndex();
  const terms: (number | undefined)[] = [];
  for (let i = Math.max(0, first - 3); i <= last + 2; i++) terms.push(log.term(i));
  const all = log.entries(first, last + 1, Infinity) ?? [];
  const lo = first + rand.int(Math.max(1, last - first + 2));
  const bounded = lo <= last ? log.entries(lo, last + 1, rand.int(400)) : [];
  const snap = log.snapshot()!;
  return {
    first,
    last,
    terms,
    entries: all.map((e) => [e.index, e.term, e.type, hashBytes(e.data)]),
    bounded: bounded?.map((e) => e.index),
    compacted: first > 1 ? log.entries(first - 1, last + 1, Infinity) : 'none',
    state: log.initialState(),
    snapshot: { meta: snap.meta, data: hashBytes(snap.data) },
  };
}

function compareAll(t: Test, store: NodeStore, models: Map<number, Model>, where: string): void {
  for (const [groupId, m] of models) {
    const g = store.group(groupId);
    if (g === undefined) {
      t.fail(`${where}: group ${groupId} missing`);
      continue;
    }
    // The same random byte bounds for both sides.
    const seed = groupId ^ where.length;
    const got = answers(g, new SeededRand(seed));
    const want = answers(m.oracle, new SeededRand(seed));
    if (JSON.stringify(got) !== JSON.stringify(want)) t.same(got, want, `${where} g${groupId}`);
  }
}

for (const [what, options] of [
  ['the default log tail', {}],
  ['no log tail in memory', { logTailBytesMax: 0 }],
] as const) {
  t.test(
    `NodeStore answers as MemoryLogStorage through random Raft writes and reopens (${what})`,
    async (t) => {
      for (const seed of SEEDS) {
        const rand = new SeededRand(seed);
        const dir = scratchDir(t);
        let store = await openStore(t, dir, options);
        const models = new Map<number, Model>();
        for (const id of GROUPS) {
          await store.createGroup(id, undefined);
          models.set(id, { oracle: new MemoryLogStorage(), term: 1 });
        }
        let commits = 0;
        let evictedSteps = 0;
        for (let step = 0; step < STEPS; step++) {
          const updates: GroupUpdate[] = [];
          const snapshots: [number, Snapshot][] = [];
          for (const [id, m] of models) {
            if (!rand.chance(0.6)) continue;
            const s = planStep(rand, m, id);
            if (s.update) updates.push(s.update);
            if (s.snapshot) snapshots.push([id, s.snapshot]);
          }
          if (updates.length > 0) {
            await store.commit(updates);
            commits++;
          }
          for (const [id, snap] of snapshots) await store.saveSnapshot(id, snap);
          if (rand.chance(0.1)) {
            await store.close();
            store = await openStore(t, dir, options);
            compareAll(t, store, models, `seed ${seed} step ${step} after reopen`);
          } else {
            compareAll(t, store, models, `seed ${seed} step ${step}`);
          }
          for (const id of GROUPS) {
            const g = store.group(id) as GroupMirror;
            if (g.tailEntryCount() < g.lastIndex() - g.firstIndex() + 1) evictedSteps++;
          }
        }
        await store.close();
        store = await openStore(t, dir, options);
        compareAll(t, store, models, `seed ${seed} final reopen`);
        t.ok(commits > STEPS / 2, `seed ${seed}: ${commits} group commits`);
        const shapes = [...models.values()].map((m) => m.oracle.firstIndex() > 1);
        t.ok(shapes.some(Boolean), `seed ${seed}: some group was compacted`);
        if (options.logTailBytesMax === 0) {
          t.ok(
            evictedSteps > STEPS,
            `seed ${seed}: entries read from disk in ${evictedSteps} checks`,
          );
        }
      }
    },
  );
}
