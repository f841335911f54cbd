/**
 * The in-memory mirror of one group's durable Raft state. The Raft core reads its LogStorage
 * synchronously, so each group is served from memory: the hard state, the snapshot's meta, the
 * terms of the whole log and the entries of a bounded tail. What the steady state does not need
 * (older entries, the snapshot's data) is read from LevelDB synchronously when asked for
 * (store-reader.ts), which keeps a node's memory independent of how long ago the last snapshot was.
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
import { assert, assertionFailed } from '../base/assert.js';
import { takeWithinBytes, type LogStorage } from '../raft/log-storage.js';
import {
  EMPTY_CONF_STATE,
  EMPTY_HARD_STATE,
  entryBytes,
  type ConfState,
  type Entry,
  type HardState,
  type Snapshot,
  type SnapshotMeta,
} from '../raft/messages.js';
import { SNAPSHOT_CHUNK_BYTES_MAX } from './keys.js';
import type { GroupBootstrap } from './records.js';
import type { GroupReader } from './store-reader.js';

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
  readonly snapshotMeta: SnapshotMeta;
  /** Bytes of the stored snapshot's data (0 for none). */
  readonly snapshotDataBytes: number;
  /** Entries snapshotMeta.index + 1, + 2, ... in order. */
  readonly entries: Entry[];
  /** The first index of each stored log record, ascending (empty when the log is). */
  readonly recordStarts: number[];
  readonly hardState: HardState;
}

/**
 * Bytes of log entries each group keeps in memory by default (see GroupMirror). The in-flight
 * window of a replicating follower and the entries between commit and apply are normally far
 * below it; a follower further behind is served from LevelDB.
 */
export const LOG_TAIL_BYTES_MAX_DEFAULT = 1024 * 1024;

/**
 * The mutable implementation; NodeStore hands it out typed as the read-only GroupLog.
 *
 * Memory: the snapshot's data and the log entries older than a bounded tail stay on disk only.
 * The tail is the entries from `memFirst` on, which is always a record start; older records are
 * evicted once they are committed (never truncated again) and the tail passes `tailBytesMax`;
 * their terms stay in memory as runs (one per term), so term() never reads the disk.
 */
export class GroupMirror implements GroupLog {
  readonly groupId: number;
  readonly bootstrap: GroupBootstrap | undefined;
  private snapMeta: SnapshotMeta;
  private snapDataBytes: number;
  /** tail[k] is the entry at index memFirst + k. */
  private tail: Entry[];
  private memFirst: number;
  /** Bytes (entryBytes) of the entries held in the tail. */
  private tailBytes = 0;
  /** Terms of the evicted entries [snapIndex + 1, memFirst): runStarts[k] begins runTerms[k]. */
  private runStarts: number[] = [];
  private runTerms: number[] = [];
  /** starts[k] is the first index of the k-th stored record; starts[0] is firstIndex. */
  private starts: number[];
  private hs: HardState;
  /** The last evicted record read back, kept until a compaction (catch-up reads it repeatedly). */
  private lastRead: Entry[] | undefined = undefined;

  constructor(
    groupId: number,
    bootstrap: GroupBootstrap | undefined,
    state: GroupState,
    private readonly reader: GroupReader,
    private readonly tailBytesMax: number = LOG_TAIL_BYTES_MAX_DEFAULT,
  ) {
    this.groupId = groupId;
    this.bootstrap = bootstrap;
    this.snapMeta = state.snapshotMeta;
    this.snapDataBytes = state.snapshotDataBytes;
    this.tail = state.entries;
    this.memFirst = this.snapMeta.index + 1;
    for (const e of this.tail) this.tailBytes += entryBytes(e);
    this.starts = state.recordStarts;
    this.hs = state.hardState;
    if (
      !(this.tail.length === 0
        ? this.starts.length === 0
        : this.starts[0] === this.firstIndex() && this.starts.at(-1)! <= this.lastIndex())
    )
      assertionFailed(`group ${groupId}: record starts do not cover the log`);
    this.maybeEvict();
  }

  static empty(
    groupId: number,
    bootstrap: GroupBootstrap | undefined,
    reader: GroupReader,
    tailBytesMax?: number,
  ): GroupMirror {
    return new GroupMirror(
      groupId,
      bootstrap,
      {
        snapshotMeta: EMPTY_SNAPSHOT.meta,
        snapshotDataBytes: 0,
        entries: [],
        recordStarts: [],
        hardState: EMPTY_HARD_STATE,
      },
      reader,
      tailBytesMax,
    );
  }

  // --- LogStorage (read side) ---

  initialState(): { hardState: HardState; confState: ConfState } {
    return { hardState: this.hs, confState: this.snapMeta.confState };
  }

  private get snapIndex(): number {
    return this.snapMeta.index;
  }

  firstIndex(): number {
    return this.snapIndex + 1;
  }

  lastIndex(): number {
    return this.memFirst + this.tail.length - 1;
  }

  term(i: number): number | undefined {
    if (i === this.snapIndex) return this.snapMeta.term;
    if (i < this.snapIndex || i > this.lastIndex()) return undefined;
    if (i >= this.memFirst) return this.tail[i - this.memFirst]!.term;
    return this.runTerms[lastAtOrBelow(this.runStarts, i)];
  }

  entries(lo: number, hi: number, maxBytes: number): Entry[] | undefined {
    if (lo <= this.snapIndex) return undefined;
    if (!(hi <= this.lastIndex() + 1))
      assertionFailed(`entries(${lo}, ${hi}) past last index ${this.lastIndex()}`);
    if (lo >= this.memFirst) {
      return takeWithinBytes(this.tail, lo - this.memFirst, hi - this.memFirst, maxBytes);
    }
    const out: Entry[] = [];
    let bytes = 0;
    for (const e of this.evictedEntries(lo, Math.min(hi, this.memFirst))) {
      bytes += entryBytes(e);
      if (out.length > 0 && bytes > maxBytes) return out;
      out.push(e);
    }
    for (let i = this.memFirst; i < hi; i++) {
      const e = this.tail[i - this.memFirst]!;
      bytes += entryBytes(e);
      if (out.length > 0 && bytes > maxBytes) break;
      out.push(e);
    }
    return out;
  }

  /** The snapshot, its data read from the database (only sending it or a restart needs it). */
  snapshot(): Snapshot | undefined {
    if (this.snapDataBytes === 0) return { meta: this.snapMeta, data: new Uint8Array() };
    return {
      meta: this.snapMeta,
      data: this.reader.snapshotData(this.groupId, this.snapDataBytes),
    };
  }

  hardState(): HardState {
    return this.hs;
  }

  // --- For the planners (group-commit.ts) ---

  /** The first index of each stored log record, ascending. Read-only for callers. */
  recordStarts(): readonly number[] {
    return this.starts;
  }

  /** Bytes of the stored snapshot's data. */
  snapshotDataBytes(): number {
    return this.snapDataBytes;
  }

  /** The stored entries [lo, hi), which must be in the log (a record being rewritten). */
  storedEntries(lo: number, hi: number): Entry[] {
    if (!(lo > this.snapIndex && hi <= this.lastIndex() + 1 && lo < hi))
      assertionFailed(
        `storedEntries(${lo}, ${hi}) outside the log (${this.snapIndex}, ${this.lastIndex()}]`,
      );
    const out = lo < this.memFirst ? [...this.evictedEntries(lo, Math.min(hi, this.memFirst))] : [];
    for (let i = Math.max(lo, this.memFirst); i < hi; i++) out.push(this.tail[i - this.memFirst]!);
    return out;
  }

  /** Entries held in memory (for tests and the debug figures). */
  tailEntryCount(): number {
    return this.tail.length;
  }

  /** The evicted entries [lo, hi), read record by record from the database. */
  private *evictedEntries(lo: number, hi: number): Generator<Entry> {
    let k = lastAtOrBelow(this.starts, lo);
    let i = lo;
    while (i < hi) {
      const first = this.starts[k]!;
      let record = this.lastRead;
      if (record?.[0]?.index !== first) {
        record = this.reader.logRecord(this.groupId, first);
        this.lastRead = record;
      }
      const end = first + record.length;
      if (!(end === (this.starts[k + 1] ?? end) && end > i))
        assertionFailed(
          `group ${this.groupId}: record from ${first} holds ${record.length} entries, next starts at ${this.starts[k + 1]}`,
        );
      for (; i < hi && i < end; i++) yield record[i - first]!;
      k++;
    }
  }

  // --- Changes, called by NodeStore only after the matching batch is durable ---

  /** A follower installs a leader's snapshot: the log becomes exactly the snapshot point. */
  installSnapshot(snap: Snapshot): void {
    assert(snap.meta.index >= this.snapIndex, 'installed snapshot older than the stored one');
    this.snapMeta = snap.meta;
    this.snapDataBytes = snap.data.byteLength;
    this.resetTail(snap.meta.index + 1, []);
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
    if (!(first > this.snapIndex && first <= this.lastIndex() + 1))
      assertionFailed(`append at ${first} outside (${this.snapIndex}, ${this.lastIndex() + 1}]`);
    // Only committed entries are evicted, and a committed entry is never replaced.
    if (!(first >= this.memFirst))
      assertionFailed(`append at ${first} replaces evicted entries (< ${this.memFirst})`);
    if (newStarts[0] !== first)
      assertionFailed(`records of entries from ${first} start at ${newStarts[0]}`);
    const keep = first - this.memFirst;
    for (let k = keep; k < this.tail.length; k++) this.tailBytes -= entryBytes(this.tail[k]!);
    this.tail.length = keep;
    for (const e of entries) {
      this.tail.push(e);
      this.tailBytes += entryBytes(e);
    }
    const starts = this.starts;
    while (starts.length > 0 && starts[starts.length - 1]! >= first) starts.pop();
    for (const s of newStarts) starts.push(s);
    this.maybeEvict();
  }

  setHardState(hs: HardState): void {
    this.hs = hs;
    this.maybeEvict();
  }

  /** The state machine's snapshot at an index in the log: entries up to it are dropped. */
  compactTo(snap: Snapshot): void {
    const index = snap.meta.index;
    if (!(index > this.snapIndex && index <= this.lastIndex()))
      assertionFailed(`compaction to ${index} outside (${this.snapIndex}, ${this.lastIndex()}]`);
    this.snapMeta = snap.meta;
    this.snapDataBytes = snap.data.byteLength;
    this.lastRead = undefined;
    if (index < this.memFirst) {
      // The tail stays; the runs now begin at index + 1.
      const k = lastAtOrBelow(this.runStarts, index + 1);
      this.runStarts = this.runStarts.slice(k);
      this.runTerms = this.runTerms.slice(k);
      if (this.runStarts.length > 0) this.runStarts[0] = index + 1;
    } else {
      this.resetTail(index + 1, this.tail.slice(index + 1 - this.memFirst));
    }
    // Records wholly covered by the snapshot are gone; one that held index + 1 was rewritten to
    // start there (planCompaction).
    const starts = this.starts.filter((s) => s > index);
    if (this.lastIndex() > index && starts[0] !== index + 1) starts.unshift(index + 1);
    this.starts = starts;
  }

  private resetTail(memFirst: number, entries: Entry[]): void {
    this.tail = entries;
    this.memFirst = memFirst;
    this.tailBytes = 0;
    for (const e of entries) this.tailBytes += entryBytes(e);
    this.runStarts = [];
    this.runTerms = [];
    this.lastRead = undefined;
  }

  /**
   * Evicts whole committed records from the front of the tail once it holds more than
   * tailBytesMax, down to three quarters of it: the tail is copied once per quarter of the budget
   * written, not once per commit. The last record always stays.
   */
  private maybeEvict(): void {
    if (this.tailBytes <= this.tailBytesMax) return;
    const target = this.tailBytesMax * 0.75;
    let k = lastAtOrBelow(this.starts, this.memFirst);
    let n = 0;
    while (this.tailBytes > target && k + 1 < this.starts.length) {
      const next = this.starts[k + 1]!;
      if (next - 1 > this.hs.commit) break;
      for (; this.memFirst + n < next; n++) {
        const e = this.tail[n]!;
        this.tailBytes -= entryBytes(e);
        if (this.runTerms.at(-1) !== e.term) {
          this.runStarts.push(this.memFirst + n);
          this.runTerms.push(e.term);
        }
      }
      k++;
    }
    if (n === 0) return;
    this.tail = this.tail.slice(n);
    this.memFirst += n;
  }
}

/** The position of the last element of an ascending array that is <= v (0 if none is). */
function lastAtOrBelow(sorted: readonly number[], v: number): number {
  let lo = 0;
  let hi = sorted.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (sorted[mid]! <= v) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
