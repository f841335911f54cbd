/**
 * The power-loss test's workload: a seeded, endless sequence of node-store writes, and a model
 * of what the store holds after each of them. The writer child (writer.ts) performs the writes;
 * the test (test/integration/power-loss.test.ts) replays the same sequence to know what every
 * acknowledged prefix must look like on disk. Both sides run the same code from the same seed,
 * so nothing but the acknowledgement numbers crosses the process boundary.
 *
 * The writes are what a node's loop and runtime ask of the store (src/multiraft/host.ts):
 * group commits over several groups (appends, a new term and vote, a conflicting tail replaced
 * in a new term, commit-index moves written without sync as the host does when no Ready needs
 * a sync), a leader's snapshot installed with the log replaced, the state machine's snapshot
 * with the log compacted (sometimes more than one 1 MiB chunk), groups created with and without
 * members, deleted and created again, and a close and reopen of the store (a restart).
 */
import { SeededRand } from '../../src/base/rand.js';
import { bootstrapEntries, bootstrapHardState } from '../../src/raft/bootstrap.js';
import {
  EMPTY_CONF_STATE,
  type ConfState,
  type Entry,
  type EntryType,
  type HardState,
  type NodeId,
  type Snapshot,
} from '../../src/raft/messages.js';
import type { GroupLog } from '../../src/storage/group-log.js';
import { NodeStore, type GroupUpdate } from '../../src/storage/node-store.js';

export type Op =
  | { readonly kind: 'create'; readonly groupId: number; readonly voters: NodeId[] | undefined }
  | { readonly kind: 'commit'; readonly updates: GroupUpdate[]; readonly sync: boolean }
  | { readonly kind: 'save-snapshot'; readonly groupId: number; readonly snapshot: Snapshot }
  | { readonly kind: 'delete'; readonly groupId: number }
  /** Close the store and open it again, as a restarted node does; changes nothing stored. */
  | { readonly kind: 'reopen' };

/**
 * Performs `op` through the store's own API; returns the store to use next (a reopen closes it
 * and opens `dir` again).
 */
export async function performOp(store: NodeStore, op: Op, dir: string): Promise<NodeStore> {
  switch (op.kind) {
    case 'create':
      await store.createGroup(
        op.groupId,
        op.voters === undefined ? undefined : { voters: op.voters },
      );
      return store;
    case 'commit':
      await store.commit(op.updates, { sync: op.sync });
      return store;
    case 'save-snapshot':
      await store.saveSnapshot(op.groupId, op.snapshot);
      return store;
    case 'delete':
      await store.deleteGroup(op.groupId);
      return store;
    case 'reopen':
      await store.close();
      return NodeStore.open(dir);
  }
}

/** Whether the store promises the write is on disk once the op's promise resolves. */
export function isDurable(op: Op): boolean {
  switch (op.kind) {
    case 'commit':
      return op.sync;
    case 'reopen':
      return false;
    default:
      return true;
  }
}

/** A group as the store reports it through GroupLog. */
export interface GroupState {
  readonly bootstrap:
    { readonly voters: readonly NodeId[]; readonly learners: readonly NodeId[] } | undefined;
  readonly hardState: HardState;
  /** The stored snapshot; index 0 with no data when there is none. */
  readonly snapshot: Snapshot;
  /** The log after the snapshot: indexes snapshot.meta.index + 1, + 2, ... */
  readonly entries: readonly Entry[];
}

export type StoreState = ReadonlyMap<number, GroupState>;

const NODES: readonly NodeId[] = ['n1', 'n2', 'n3'];
const CONF: ConfState = { ...EMPTY_CONF_STATE, voters: NODES };
const NO_SNAPSHOT: Snapshot = {
  meta: { index: 0, term: 0, confState: EMPTY_CONF_STATE },
  data: new Uint8Array(),
};
/** Groups created with members at the start, and one empty replica filled by snapshots. */
const BOOTSTRAPPED = [1, 2, 3];
const EMPTY_REPLICA = 7;

/** Random bytes, four per draw. */
function randomBytes(rand: SeededRand, n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 4) {
    const x = rand.u32();
    out[i] = x & 0xff;
    if (i + 1 < n) out[i + 1] = (x >>> 8) & 0xff;
    if (i + 2 < n) out[i + 2] = (x >>> 16) & 0xff;
    if (i + 3 < n) out[i + 3] = x >>> 24;
  }
  return out;
}

function snapIndex(g: GroupState): number {
  return g.snapshot.meta.index;
}

function lastIndex(g: GroupState): number {
  return snapIndex(g) + g.entries.length;
}

function termAt(g: GroupState, i: number): number {
  if (i === snapIndex(g)) return g.snapshot.meta.term;
  const e = g.entries[i - snapIndex(g) - 1];
  if (e === undefined) throw new RangeError(`no entry ${i}`);
  return e.term;
}

/** What the store holds after `op` (the planners' rules, group-commit.ts). */
export function applyOp(state: Map<number, GroupState>, op: Op): void {
  switch (op.kind) {
    case 'create': {
      if (op.voters === undefined) {
        state.set(op.groupId, {
          bootstrap: undefined,
          hardState: { term: 0, vote: '', commit: 0 },
          snapshot: NO_SNAPSHOT,
          entries: [],
        });
      } else {
        const entries = bootstrapEntries(op.voters, []);
        state.set(op.groupId, {
          bootstrap: { voters: op.voters, learners: [] },
          hardState: bootstrapHardState(entries),
          snapshot: NO_SNAPSHOT,
          entries,
        });
      }
      return;
    }
    case 'commit':
      for (const u of op.updates) {
        const g = state.get(u.groupId)!;
        let snapshot = g.snapshot;
        let entries = g.entries;
        if (u.snapshot !== undefined) {
          snapshot = u.snapshot;
          entries = [];
        }
        const first = u.entries[0]?.index;
        if (first !== undefined) {
          entries = [...entries.slice(0, first - snapshot.meta.index - 1), ...u.entries];
        }
        state.set(u.groupId, { ...g, snapshot, entries, hardState: u.hardState ?? g.hardState });
      }
      return;
    case 'save-snapshot': {
      const g = state.get(op.groupId)!;
      state.set(op.groupId, {
        ...g,
        snapshot: op.snapshot,
        entries: g.entries.slice(op.snapshot.meta.index - snapIndex(g)),
      });
      return;
    }
    case 'delete':
      state.delete(op.groupId);
      return;
    case 'reopen':
      return;
  }
}

/**
 * The op sequence of one seed, with the model kept alongside: next() draws the next op from
 * the state the previous ones left, applies it to the model, and returns it.
 */
export class Workload {
  readonly state = new Map<number, GroupState>();
  private readonly rand: SeededRand;
  private readonly queued: Op[] = [];
  /**
   * A heavy seed writes large entries often, so that LevelDB's 16 MiB memtable fills within a
   * run: a new log file, a background compaction and the old log's deletion then happen under
   * the kill too.
   */
  private readonly heavy: boolean;

  constructor(seed: number) {
    this.rand = new SeededRand(seed);
    this.heavy = this.rand.chance(0.3);
    for (const groupId of BOOTSTRAPPED)
      this.queued.push({ kind: 'create', groupId, voters: [...NODES] });
    this.queued.push({ kind: 'create', groupId: EMPTY_REPLICA, voters: undefined });
  }

  next(): Op {
    const op = this.queued.shift() ?? this.draw();
    applyOp(this.state, op);
    return op;
  }

  private draw(): Op {
    const r = this.rand;
    if (r.chance(0.015)) return { kind: 'reopen' };
    const ids = [...this.state.keys()].sort((a, b) => a - b);
    const x = r.float();
    if (x < 0.09) {
      const moving = ids.filter(
        (id) => this.group(id).hardState.commit < lastIndex(this.group(id)),
      );
      if (moving.length > 0) return this.commitOnly(moving);
    }
    if (x < 0.19) {
      const compactable = ids.filter(
        (id) => this.group(id).hardState.commit > snapIndex(this.group(id)),
      );
      if (compactable.length > 0) return this.saveSnapshot(compactable[r.int(compactable.length)]!);
    }
    if (x < 0.24) {
      const groupId = ids[r.int(ids.length)]!;
      return { kind: 'commit', updates: [this.install(groupId)], sync: true };
    }
    if (x < 0.26 && ids.length > 1) {
      const groupId = ids[r.int(ids.length)]!;
      this.queued.push({ kind: 'create', groupId, voters: r.chance(0.5) ? [...NODES] : undefined });
      return { kind: 'delete', groupId };
    }
    // A group commit: each group takes part with some probability, at least one does.
    const chosen = ids.filter(() => r.chance(0.55));
    if (chosen.length === 0) chosen.push(ids[r.int(ids.length)]!);
    return { kind: 'commit', updates: chosen.map((id) => this.groupUpdate(id)), sync: true };
  }

  private group(id: number): GroupState {
    return this.state.get(id)!;
  }

  private data(size: number): Uint8Array {
    return randomBytes(this.rand, size);
  }

  private entryData(): Uint8Array {
    const x = this.rand.float();
    if (x < 0.1) return this.data(0);
    if (x < 0.6) return this.data(this.rand.int(256));
    if (x < (this.heavy ? 0.75 : 0.97)) return this.data(this.rand.int(4096));
    return this.data(20_000 + this.rand.int(100_000));
  }

  private snapshotData(): Uint8Array {
    const x = this.rand.float();
    if (x < 0.7) return this.data(this.rand.int(2048));
    if (x < 0.95) return this.data(this.rand.int(200_000));
    // More than one 1 MiB chunk (keys.ts SNAPSHOT_CHUNK_BYTES_MAX).
    return this.data((1 << 20) + this.rand.int(600_000));
  }

  private entries(first: number, count: number, term: number): Entry[] {
    const out: Entry[] = [];
    for (let k = 0; k < count; k++) {
      const type: EntryType = this.rand.chance(0.05) ? 'conf-change' : 'normal';
      out.push({ index: first + k, term, type, data: this.entryData() });
    }
    return out;
  }

  private vote(): NodeId {
    return this.rand.chance(0.2) ? '' : NODES[this.rand.int(NODES.length)]!;
  }

  /** One group's part of a synced group commit. */
  private groupUpdate(groupId: number): GroupUpdate {
    const r = this.rand;
    const g = this.group(groupId);
    const hs = g.hardState;
    const last = lastIndex(g);
    const x = r.float();
    if (hs.term === 0 || x < 0.1) {
      // An election: a new term and vote, and the new leader's empty entry half the time.
      const term = hs.term + 1;
      const entries = r.chance(0.5)
        ? [{ index: last + 1, term, type: 'normal' as const, data: new Uint8Array() }]
        : [];
      return { groupId, entries, hardState: { term, vote: this.vote(), commit: hs.commit } };
    }
    if (x < 0.2 && last > hs.commit) {
      // A conflicting tail: a new leader's entries replace the uncommitted ones from `first`.
      const first = hs.commit + 1 + r.int(last - hs.commit);
      const term = hs.term + 1;
      const entries = this.entries(first, 1 + r.int(8), term);
      const newLast = first + entries.length - 1;
      const commit = hs.commit + r.int(newLast - hs.commit + 1);
      return { groupId, entries, hardState: { term, vote: this.vote(), commit } };
    }
    // Appends in the current term; the commit index moves within the new log.
    const count = 1 + r.int(r.chance(0.1) ? 60 : 8);
    const entries = this.entries(last + 1, count, hs.term);
    const commit = hs.commit + r.int(last + count - hs.commit + 1);
    return {
      groupId,
      entries,
      hardState: commit === hs.commit ? undefined : { ...hs, commit },
    };
  }

  /** Only commit indexes move: the host writes such a Ready without sync. */
  private commitOnly(ids: readonly number[]): Op {
    const updates = ids
      .filter(() => this.rand.chance(0.7))
      .map((groupId) => {
        const g = this.group(groupId);
        const hs = g.hardState;
        const commit = hs.commit + 1 + this.rand.int(lastIndex(g) - hs.commit);
        return { groupId, entries: [], hardState: { ...hs, commit } };
      });
    if (updates.length === 0) return this.commitOnly(ids);
    return { kind: 'commit', updates, sync: false };
  }

  /** The state machine's snapshot at an applied (committed) index: the log is compacted. */
  private saveSnapshot(groupId: number): Op {
    const g = this.group(groupId);
    const index = snapIndex(g) + 1 + this.rand.int(g.hardState.commit - snapIndex(g));
    return {
      kind: 'save-snapshot',
      groupId,
      snapshot: {
        meta: { index, term: termAt(g, index), confState: CONF },
        data: this.snapshotData(),
      },
    };
  }

  /** A leader's snapshot, usually past the log's end: the log is replaced by it. */
  private install(groupId: number): GroupUpdate {
    const r = this.rand;
    const g = this.group(groupId);
    const hs = g.hardState;
    const last = lastIndex(g);
    const floor = Math.max(hs.commit, snapIndex(g));
    const index = floor + r.int(last + 30 - floor + 1);
    const snapTerm = Math.max(hs.term, termAt(g, last), 1);
    const term = Math.max(hs.term, snapTerm);
    const entries = r.chance(0.5) ? this.entries(index + 1, 1 + r.int(5), term) : [];
    return {
      groupId,
      snapshot: { meta: { index, term: snapTerm, confState: CONF }, data: this.snapshotData() },
      entries,
      hardState: { term, vote: hs.vote, commit: index },
    };
  }
}

/** A short description of an op, for failure messages. */
export function describeOp(op: Op): string {
  switch (op.kind) {
    case 'create':
      return `create group ${op.groupId}${op.voters === undefined ? ' (empty)' : ''}`;
    case 'delete':
      return `delete group ${op.groupId}`;
    case 'reopen':
      return 'reopen';
    case 'save-snapshot':
      return `snapshot of group ${op.groupId} at ${op.snapshot.meta.index} (${op.snapshot.data.byteLength} bytes)`;
    case 'commit': {
      const parts = op.updates.map((u) => {
        const bits: string[] = [];
        if (u.snapshot !== undefined) bits.push(`snapshot ${u.snapshot.meta.index}`);
        if (u.entries.length > 0)
          bits.push(`entries ${u.entries[0]!.index}..${u.entries.at(-1)!.index}`);
        if (u.hardState !== undefined)
          bits.push(
            `term ${u.hardState.term} vote '${u.hardState.vote}' commit ${u.hardState.commit}`,
          );
        return `g${u.groupId}: ${bits.join(', ')}`;
      });
      return `commit${op.sync ? '' : ' (no sync)'} ${parts.join('; ')}`;
    }
  }
}

/** Everything the store answers for each of its groups, read through the production API. */
export function readStore(store: {
  groupIds(): number[];
  group(id: number): GroupLog | undefined;
}): Map<number, GroupState> {
  const out = new Map<number, GroupState>();
  for (const id of store.groupIds()) {
    const g = store.group(id)!;
    const first = g.firstIndex();
    const last = g.lastIndex();
    const snapshot = g.snapshot() ?? NO_SNAPSHOT;
    out.set(id, {
      bootstrap: g.bootstrap,
      hardState: g.hardState(),
      snapshot,
      entries: last >= first ? (g.entries(first, last + 1, Infinity) ?? []) : [],
    });
  }
  return out;
}

/** JSON with sorted keys, so two equal values print the same. */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_key, value: unknown) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
    const sorted: Record<string, unknown> = {};
    for (const k of Object.keys(value).sort()) sorted[k] = (value as Record<string, unknown>)[k];
    return sorted;
  });
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(
    Buffer.from(b.buffer, b.byteOffset, b.byteLength),
  );
}

/**
 * How `got` differs from `want`, byte for byte (entry and snapshot data included); empty when
 * they are the same. At most a few lines per group. With `commitFloors`, a group's commit index
 * may also lie below want's, down to its floor: the commit of the last hard state the store
 * promised durable. The host writes a Ready that only moves commit indexes without sync
 * (node-store.ts commit()), and such a write may be lost, even when a later synced write that
 * does not touch the group survives (LevelDB does not sync a log file it stops using).
 */
export function differences(
  got: StoreState,
  want: StoreState,
  commitFloors?: ReadonlyMap<number, number>,
): string[] {
  const out: string[] = [];
  const ids = [...new Set([...got.keys(), ...want.keys()])].sort((a, b) => a - b);
  for (const id of ids) {
    const a = got.get(id);
    const b = want.get(id);
    if (a === undefined || b === undefined) {
      out.push(`group ${id}: ${a === undefined ? 'missing' : 'present but should not be'}`);
      continue;
    }
    if (canonical(a.bootstrap) !== canonical(b.bootstrap))
      out.push(`group ${id}: bootstrap ${canonical(a.bootstrap)}, want ${canonical(b.bootstrap)}`);
    const floor = commitFloors?.get(id);
    const hs = a.hardState;
    const commitOk =
      hs.commit === b.hardState.commit ||
      (floor !== undefined && hs.commit >= floor && hs.commit <= b.hardState.commit);
    if (hs.term !== b.hardState.term || hs.vote !== b.hardState.vote || !commitOk)
      out.push(`group ${id}: hard state ${canonical(a.hardState)}, want ${canonical(b.hardState)}`);
    if (canonical(a.snapshot.meta) !== canonical(b.snapshot.meta))
      out.push(
        `group ${id}: snapshot ${canonical(a.snapshot.meta)}, want ${canonical(b.snapshot.meta)}`,
      );
    else if (!sameBytes(a.snapshot.data, b.snapshot.data))
      out.push(`group ${id}: snapshot ${a.snapshot.meta.index} data differs`);
    const lastA = lastIndex(a);
    const lastB = lastIndex(b);
    if (lastA !== lastB) out.push(`group ${id}: last index ${lastA}, want ${lastB}`);
    const n = Math.min(a.entries.length, b.entries.length);
    for (let k = 0; k < n; k++) {
      const x = a.entries[k]!;
      const y = b.entries[k]!;
      if (
        x.index !== y.index ||
        x.term !== y.term ||
        x.type !== y.type ||
        !sameBytes(x.data, y.data)
      ) {
        out.push(`group ${id}: entry ${y.index} differs (term ${x.term}, want ${y.term})`);
        break;
      }
    }
  }
  return out;
}
