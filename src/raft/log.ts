/**
 * RaftLog: the stable log (LogStorage, durable) plus the unstable tail (entries and an incoming
 * snapshot not yet handed to the runtime for persistence), with the commit and apply cursors.
 *
 * Invariants:
 * - applied <= applying <= committed <= lastIndex();
 * - a committed entry is never truncated (asserted in append);
 * - unstable.entries, if any, start at unstable.offset and directly follow the stable log or
 *   the unstable snapshot.
 */
import { assert, assertionFailed } from '../base/assert.js';
import { entryBytes, type Entry, type Snapshot } from './messages.js';
import type { LogStorage } from './log-storage.js';

export class RaftLog {
  readonly storage: LogStorage;
  /** Snapshot received from the leader, not yet persisted. */
  unstableSnapshot: Snapshot | undefined = undefined;
  /** Entries not yet persisted; the first has index `unstableOffset`. */
  unstableEntries: Entry[] = [];
  unstableOffset: number;
  committed: number;
  /** Highest index handed to the runtime to apply (in a Ready not yet advanced). */
  applying: number;
  applied: number;

  constructor(storage: LogStorage, applied = 0) {
    this.storage = storage;
    const first = storage.firstIndex();
    this.unstableOffset = storage.lastIndex() + 1;
    // The snapshot point is committed and applied by definition.
    this.committed = first - 1;
    this.applied = Math.max(first - 1, applied);
    this.applying = this.applied;
  }

  firstIndex(): number {
    if (this.unstableSnapshot) return this.unstableSnapshot.meta.index + 1;
    return this.storage.firstIndex();
  }

  lastIndex(): number {
    if (this.unstableEntries.length > 0) {
      return this.unstableOffset + this.unstableEntries.length - 1;
    }
    if (this.unstableSnapshot) return this.unstableSnapshot.meta.index;
    return this.storage.lastIndex();
  }

  /** Term of entry i, or undefined when compacted or beyond the log. */
  term(i: number): number | undefined {
    if (i === 0) return 0;
    if (i > this.lastIndex()) return undefined;
    if (this.unstableSnapshot && i === this.unstableSnapshot.meta.index) {
      return this.unstableSnapshot.meta.term;
    }
    if (this.unstableEntries.length > 0 && i >= this.unstableOffset) {
      return this.unstableEntries[i - this.unstableOffset]!.term;
    }
    if (this.unstableSnapshot && i < this.unstableSnapshot.meta.index) return undefined;
    return this.storage.term(i);
  }

  lastTerm(): number {
    const t = this.term(this.lastIndex());
    assert(t !== undefined, 'term of the last index must be known');
    return t;
  }

  matchTerm(i: number, term: number): boolean {
    return this.term(i) === term;
  }

  /** Raft §5.4.1: is (lastTerm, lastIndex) at least as up to date as ours? */
  isUpToDate(lastIndex: number, lastTerm: number): boolean {
    const ourTerm = this.lastTerm();
    return lastTerm > ourTerm || (lastTerm === ourTerm && lastIndex >= this.lastIndex());
  }

  /**
   * Follower side of append: if the entry at `index` has term `logTerm`, append `entries`
   * (truncating a conflicting suffix) and advance commit. Returns the last new index, or
   * undefined when the log does not match at `index`.
   */
  maybeAppend(
    index: number,
    logTerm: number,
    commit: number,
    entries: readonly Entry[],
  ): number | undefined {
    if (!this.matchTerm(index, logTerm)) return undefined;
    const lastNew = index + entries.length;
    const conflict = this.findConflict(entries);
    if (conflict !== 0) {
      if (!(conflict > this.committed))
        assertionFailed(`entry ${conflict} conflicts with committed ${this.committed}`);
      this.append(entries.slice(conflict - (index + 1)));
    }
    this.commitTo(Math.min(commit, lastNew));
    return lastNew;
  }

  /** First index among `entries` whose term differs from ours (or is new); 0 if none. */
  private findConflict(entries: readonly Entry[]): number {
    for (const e of entries) {
      if (!this.matchTerm(e.index, e.term)) return e.index;
    }
    return 0;
  }

  /**
   * The largest index <= `index` whose term is <= `term`: the leader or follower skips a whole
   * term of mismatching entries in one round trip (etcd's findConflictByTerm).
   */
  findConflictByTerm(index: number, term: number): { index: number; term: number } {
    let i = Math.min(index, this.lastIndex());
    for (; i > 0; i--) {
      const t = this.term(i);
      if (t === undefined) return { index: i, term: 0 };
      if (t <= term) return { index: i, term: t };
    }
    return { index: 0, term: 0 };
  }

  append(entries: readonly Entry[]): number {
    if (entries.length === 0) return this.lastIndex();
    const first = entries[0]!.index;
    if (!(first - 1 >= this.committed))
      assertionFailed(`append at ${first} would truncate committed ${this.committed}`);
    const end = this.unstableOffset + this.unstableEntries.length;
    if (first === end) {
      for (const e of entries) this.unstableEntries.push(e);
    } else if (first <= this.unstableOffset) {
      // Replaces the whole unstable tail (and, once persisted, the stable suffix from `first`).
      this.unstableOffset = first;
      this.unstableEntries = entries.slice();
    } else {
      this.unstableEntries = this.unstableEntries.slice(0, first - this.unstableOffset);
      for (const e of entries) this.unstableEntries.push(e);
    }
    return this.lastIndex();
  }

  commitTo(index: number): void {
    if (index <= this.committed) return;
    if (!(index <= this.lastIndex()))
      assertionFailed(`commit ${index} beyond last index ${this.lastIndex()}`);
    this.committed = index;
  }

  /** Entries in [lo, hi) from storage and the unstable tail, bounded by maxBytes (>= 1 entry). */
  slice(lo: number, hi: number, maxBytes: number): Entry[] | undefined {
    if (lo >= hi) return [];
    if (lo < this.firstIndex()) return undefined;
    if (!(hi <= this.lastIndex() + 1))
      assertionFailed(`slice(${lo}, ${hi}) beyond last index ${this.lastIndex()}`);
    const out: Entry[] = [];
    let bytes = 0;
    const stableHi = Math.min(hi, this.unstableOffset);
    if (lo < stableHi) {
      const stable = this.storage.entries(lo, stableHi, maxBytes);
      if (stable === undefined) return undefined;
      for (const e of stable) {
        bytes += entryBytes(e);
        out.push(e);
      }
      if (stable.length < stableHi - lo) return out;
    }
    for (let i = Math.max(lo, this.unstableOffset); i < hi; i++) {
      const e = this.unstableEntries[i - this.unstableOffset]!;
      bytes += entryBytes(e);
      if (out.length > 0 && bytes > maxBytes) break;
      out.push(e);
    }
    return out;
  }

  /** Committed entries not yet handed out for applying, bounded by maxBytes. */
  nextCommittedEntries(maxBytes: number): Entry[] {
    if (this.unstableSnapshot) return [];
    const lo = Math.max(this.applying + 1, this.firstIndex());
    const hi = this.committed + 1;
    if (lo >= hi) return [];
    const ents = this.slice(lo, hi, maxBytes);
    if (ents === undefined)
      assertionFailed(`committed entries [${lo}, ${hi}) must not be compacted`);
    return ents;
  }

  hasNextCommittedEntries(): boolean {
    return !this.unstableSnapshot && this.committed > this.applying;
  }

  /** Installs a leader's snapshot: the log becomes exactly the snapshot point. */
  restore(snapshot: Snapshot): void {
    this.unstableSnapshot = snapshot;
    this.unstableEntries = [];
    this.unstableOffset = snapshot.meta.index + 1;
    this.committed = snapshot.meta.index;
  }

  /** The runtime persisted everything up to `index` (entries) and the pending snapshot. */
  stableTo(index: number, snapshotIndex: number | undefined): void {
    if (snapshotIndex !== undefined && this.unstableSnapshot?.meta.index === snapshotIndex) {
      this.unstableSnapshot = undefined;
      // A restored snapshot is applied by the runtime in the same Ready.
      this.applied = Math.max(this.applied, snapshotIndex);
      this.applying = Math.max(this.applying, snapshotIndex);
    }
    if (index >= this.unstableOffset && this.unstableEntries.length > 0) {
      const n = Math.min(index - this.unstableOffset + 1, this.unstableEntries.length);
      this.unstableEntries = this.unstableEntries.slice(n);
      this.unstableOffset += n;
    }
  }

  appliedTo(index: number): void {
    // Called for every applied entry: the message is built only if the check fails.
    if (index > this.committed)
      assertionFailed(`applied ${index} beyond committed ${this.committed}`);
    if (index > this.applied) this.applied = index;
    if (index > this.applying) this.applying = index;
  }

  /** The highest index whose entry is durable and agrees with this log. */
  lastStableIndex(): number {
    if (this.unstableSnapshot) return 0;
    if (this.unstableEntries.length > 0) return this.unstableOffset - 1;
    return this.storage.lastIndex();
  }
}
