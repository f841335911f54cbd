/**
 * The in-memory mirror of one group's durable Raft state. The Raft core reads its LogStorage
 * synchronously, so each group is served from memory; LevelDB is read only when the store opens.
 *
 * Invariant: the mirror equals what is on disk. NodeStore changes it only after the batch that
 * made the same change has been written and synced, so the core never sees state a crash could
 * lose. The log held is [firstIndex, lastIndex]; the snapshot covers everything up to
 * firstIndex - 1, and term(firstIndex - 1) is the snapshot's term.
 *
 * The mirror also knows how the log is cut into records on disk (log-record.ts): the first index
 * of each, ascending, the first one at firstIndex. A truncation or compaction that falls inside a
 * record has to rewrite it, and deletes name records by their first index.
 */
import { assert } from '../base/assert.js';
import { takeWithinBytes, type LogStorage } from '../raft/log-storage.js';
import {
  EMPTY_CONF_STATE,
  EMPTY_HARD_STATE,
  type ConfState,
  type Entry,
  type HardState,
  type Snapshot,
} from '../raft/messages.js';
import { SNAPSHOT_CHUNK_BYTES_MAX } from './keys.js';
import type { GroupBootstrap } from './records.js';

/** What the Raft core and the runtime see of a group's storage. */
export interface GroupLog extends LogStorage {
  readonly groupId: number;
  /** The initial membership the group was created with; undefined for an empty replica. */
  readonly bootstrap: GroupBootstrap | undefined;
  hardState(): HardState;
}

/** The snapshot of a group that has none yet: index 0, empty data. */
export const EMPTY_SNAPSHOT: Snapshot = {
  meta: { index: 0, term: 0, confState: EMPTY_CONF_STATE },
  data: new Uint8Array(),
};

/** How many chunks the store cuts snapshot data into. */
export function snapshotChunkCount(dataBytes: number): number {
  return Math.ceil(dataBytes / SNAPSHOT_CHUNK_BYTES_MAX);
}

export interface GroupState {
  readonly snapshot: Snapshot;
  /** Entries snapshot.meta.index + 1, + 2, ... in order. */
  readonly entries: Entry[];
  /** The first index of each stored log record, ascending (empty when the log is). */
  readonly recordStarts: number[];
  readonly hardState: HardState;
}

/** The mutable implementation; NodeStore hands it out typed as the read-only GroupLog. */
export class GroupMirror implements GroupLog {
  readonly groupId: number;
  readonly bootstrap: GroupBootstrap | undefined;
  private snap: Snapshot;
  /** ents[k] is the entry at index snapIndex + 1 + k. */
  private ents: Entry[];
  /** starts[k] is the first index of the k-th stored record; starts[0] is firstIndex. */
  private starts: number[];
  private hs: HardState;

  constructor(groupId: number, bootstrap: GroupBootstrap | undefined, state: GroupState) {
    this.groupId = groupId;
    this.bootstrap = bootstrap;
    this.snap = state.snapshot;
    this.ents = state.entries;
    this.starts = state.recordStarts;
    this.hs = state.hardState;
    assert(
      this.ents.length === 0
        ? this.starts.length === 0
        : this.starts[0] === this.firstIndex() && this.starts.at(-1)! <= this.lastIndex(),
      `group ${groupId}: record starts do not cover the log`,
    );
  }

  static empty(groupId: number, bootstrap: GroupBootstrap | undefined): GroupMirror {
    return new GroupMirror(groupId, bootstrap, {
      snapshot: EMPTY_SNAPSHOT,
      entries: [],
      recordStarts: [],
      hardState: EMPTY_HARD_STATE,
    });
  }

  // --- LogStorage (read side) ---

  initialState(): { hardState: HardState; confState: ConfState } {
    return { hardState: this.hs, confState: this.snap.meta.confState };
  }

  private get snapIndex(): number {
    return this.snap.meta.index;
  }

  firstIndex(): number {
    return this.snapIndex + 1;
  }

  lastIndex(): number {
    return this.snapIndex + this.ents.length;
  }

  term(i: number): number | undefined {
    if (i === this.snapIndex) return this.snap.meta.term;
    if (i < this.snapIndex || i > this.lastIndex()) return undefined;
    return this.ents[i - this.snapIndex - 1]!.term;
  }

  entries(lo: number, hi: number, maxBytes: number): Entry[] | undefined {
    if (lo <= this.snapIndex) return undefined;
    assert(hi <= this.lastIndex() + 1, `entries(${lo}, ${hi}) past last index ${this.lastIndex()}`);
    return takeWithinBytes(this.ents, lo - this.snapIndex - 1, hi - this.snapIndex - 1, maxBytes);
  }

  snapshot(): Snapshot | undefined {
    return this.snap;
  }

  hardState(): HardState {
    return this.hs;
  }

  // --- For the planners (group-commit.ts) ---

  /** The first index of each stored log record, ascending. Read-only for callers. */
  recordStarts(): readonly number[] {
    return this.starts;
  }

  /** The stored entries [lo, hi), which must be in the log (a record being rewritten). */
  storedEntries(lo: number, hi: number): Entry[] {
    assert(
      lo > this.snapIndex && hi <= this.lastIndex() + 1 && lo < hi,
      `storedEntries(${lo}, ${hi}) outside the log (${this.snapIndex}, ${this.lastIndex()}]`,
    );
    return this.ents.slice(lo - this.snapIndex - 1, hi - this.snapIndex - 1);
  }

  // --- Changes, called by NodeStore only after the matching batch is durable ---

  /** A follower installs a leader's snapshot: the log becomes exactly the snapshot point. */
  installSnapshot(snap: Snapshot): void {
    assert(snap.meta.index >= this.snapIndex, 'installed snapshot older than the stored one');
    this.snap = snap;
    this.ents = [];
    this.starts = [];
  }

  /**
   * Writes entries; those at or after the first new index are replaced. `newStarts`: the first
   * index of each record they were written in (the first is entries[0].index). A stored record
   * that held the first new index keeps its start: the planner rewrote it without the tail.
   */
  append(entries: readonly Entry[], newStarts: readonly number[]): void {
    if (entries.length === 0) return;
    const first = entries[0]!.index;
    assert(
      first > this.snapIndex && first <= this.lastIndex() + 1,
      `append at ${first} outside (${this.snapIndex}, ${this.lastIndex() + 1}]`,
    );
    assert(newStarts[0] === first, `records of entries from ${first} start at ${newStarts[0]}`);
    this.ents.length = first - this.snapIndex - 1;
    for (const e of entries) this.ents.push(e);
    const starts = this.starts;
    while (starts.length > 0 && starts[starts.length - 1]! >= first) starts.pop();
    for (const s of newStarts) starts.push(s);
  }

  setHardState(hs: HardState): void {
    this.hs = hs;
  }

  /** The state machine's snapshot at an index in the log: entries up to it are dropped. */
  compactTo(snap: Snapshot): void {
    const index = snap.meta.index;
    assert(
      index > this.snapIndex && index <= this.lastIndex(),
      `compaction to ${index} outside (${this.snapIndex}, ${this.lastIndex()}]`,
    );
    this.ents = this.ents.slice(index - this.snapIndex);
    this.snap = snap;
    // Records wholly covered by the snapshot are gone; one that held index + 1 was rewritten to
    // start there (planCompaction).
    const starts = this.starts.filter((s) => s > index);
    if (this.ents.length > 0 && starts[0] !== index + 1) starts.unshift(index + 1);
    this.starts = starts;
  }
}
