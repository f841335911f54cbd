/**
 * The read side of durable Raft state, as the core consumes it (etcd's Storage contract), and
 * MemoryLogStorage, the in-memory implementation used by tests and the simulator. The runtime
 * writes to storage only between Ready and advance (see ready.ts); the core only reads.
 *
 * Invariant: the log held by storage is [firstIndex, lastIndex]; the entry at firstIndex - 1 is
 * the last one covered by the snapshot, and term(firstIndex - 1) answers with its term.
 */
import { assert, assertionFailed } from '../base/assert.js';
import { bootstrapEntries, bootstrapHardState } from './bootstrap.js';
import {
  EMPTY_CONF_STATE,
  EMPTY_HARD_STATE,
  entryBytes,
  type ConfState,
  type Entry,
  type HardState,
  type NodeId,
  type Snapshot,
} from './messages.js';

export interface LogStorage {
  initialState(): { hardState: HardState; confState: ConfState };
  /**
   * Entries in [lo, hi), at least one if any exist, stopping before `maxBytes` is passed.
   * Returns undefined when lo has been compacted away (the caller then needs a snapshot).
   */
  entries(lo: number, hi: number, maxBytes: number): Entry[] | undefined;
  /** Term of entry i, for i in [firstIndex - 1, lastIndex]; undefined when out of that range. */
  term(i: number): number | undefined;
  firstIndex(): number;
  lastIndex(): number;
  /** The latest snapshot, or undefined when none can be had right now. */
  snapshot(): Snapshot | undefined;
}

/**
 * `ents[from, to)`, stopping before the total passes `maxBytes` but always at least one entry:
 * the size rule every LogStorage.entries() follows.
 */
export function takeWithinBytes(
  ents: readonly Entry[],
  from: number,
  to: number,
  maxBytes: number,
): Entry[] {
  const out: Entry[] = [];
  let bytes = 0;
  for (let i = from; i < to; i++) {
    const e = ents[i]!;
    bytes += entryBytes(e);
    if (out.length > 0 && bytes > maxBytes) break;
    out.push(e);
  }
  return out;
}

/**
 * Holds everything in arrays. `ents[0]` is a dummy entry standing for the snapshot point, so
 * index arithmetic is `ents[i - ents[0].index]`.
 */
export class MemoryLogStorage implements LogStorage {
  private hardState: HardState = EMPTY_HARD_STATE;
  private snap: Snapshot;
  private ents: Entry[];

  constructor(confState: ConfState = EMPTY_CONF_STATE) {
    this.snap = { meta: { index: 0, term: 0, confState }, data: new Uint8Array() };
    this.ents = [{ term: 0, index: 0, type: 'normal', data: new Uint8Array() }];
  }

  initialState(): { hardState: HardState; confState: ConfState } {
    return { hardState: this.hardState, confState: this.snap.meta.confState };
  }

  private get offset(): number {
    return this.ents[0]!.index;
  }

  firstIndex(): number {
    return this.offset + 1;
  }

  lastIndex(): number {
    return this.offset + this.ents.length - 1;
  }

  term(i: number): number | undefined {
    if (i < this.offset || i > this.lastIndex()) return undefined;
    return this.ents[i - this.offset]!.term;
  }

  entries(lo: number, hi: number, maxBytes: number): Entry[] | undefined {
    if (lo <= this.offset) return undefined;
    if (!(hi <= this.lastIndex() + 1))
      assertionFailed(`entries(${lo}, ${hi}) past last index ${this.lastIndex()}`);
    return takeWithinBytes(this.ents, lo - this.offset, hi - this.offset, maxBytes);
  }

  snapshot(): Snapshot | undefined {
    return this.snap;
  }

  hardStateNow(): HardState {
    return this.hardState;
  }

  setHardState(hs: HardState): void {
    this.hardState = hs;
  }

  /** Appends entries, discarding any stored entries at or after the first new index. */
  append(entries: readonly Entry[]): void {
    if (entries.length === 0) return;
    const first = entries[0]!.index;
    if (!(first > this.offset))
      assertionFailed(`append at ${first} at or below the snapshot ${this.offset}`);
    if (!(first <= this.lastIndex() + 1))
      assertionFailed(`append at ${first} leaves a gap after ${this.lastIndex()}`);
    this.ents.length = first - this.offset;
    for (const e of entries) this.ents.push(e);
  }

  /** Replaces the whole log with a snapshot (follower install or restore). */
  applySnapshot(snap: Snapshot): void {
    assert(snap.meta.index >= this.offset, 'snapshot older than the stored one');
    this.snap = snap;
    this.ents = [
      { term: snap.meta.term, index: snap.meta.index, type: 'normal', data: new Uint8Array() },
    ];
  }

  /** Records a snapshot of the state machine at `index` (which must be applied) and compacts. */
  createSnapshot(index: number, confState: ConfState, data: Uint8Array): Snapshot {
    if (!(index > this.offset && index <= this.lastIndex()))
      assertionFailed(`snapshot index ${index} out of range`);
    const term = this.term(index)!;
    this.snap = { meta: { index, term, confState }, data };
    this.compact(index);
    return this.snap;
  }

  /** Drops entries before `index`; the entry at `index` becomes the dummy. */
  compact(index: number): void {
    if (index <= this.offset) return;
    if (!(index <= this.lastIndex()))
      assertionFailed(`compact ${index} past last index ${this.lastIndex()}`);
    const e = this.ents[index - this.offset]!;
    this.ents = [
      { term: e.term, index: e.index, type: 'normal', data: new Uint8Array() },
      ...this.ents.slice(index - this.offset + 1),
    ];
  }

  /** Storage for a new group member created with the group (see bootstrap.ts). */
  static bootstrap(voters: readonly NodeId[], learners: readonly NodeId[] = []): MemoryLogStorage {
    const s = new MemoryLogStorage();
    const entries = bootstrapEntries(voters, learners);
    s.append(entries);
    s.setHardState(bootstrapHardState(entries));
    return s;
  }

  /** A deep-enough copy for a simulated crash: what was synced survives, nothing else. */
  clone(): MemoryLogStorage {
    const c = new MemoryLogStorage(this.snap.meta.confState);
    c.hardState = this.hardState;
    c.snap = this.snap;
    c.ents = this.ents.slice();
    return c;
  }
}
