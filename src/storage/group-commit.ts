/**
 * Turns what Raft asks to persist into LevelDB operations, for many groups in one batch.
 *
 * Each plan function checks the change against the group's mirror, queues puts and deletes into
 * the batch, and returns the matching mirror change, which the store runs only after the batch
 * is durable. Everything is checked before the batch is written: a bad change is an assertion
 * with nothing on disk, never a half-applied write. Deletes are explicit keys inside the same
 * batch (never a range clear, which LevelDB does not do atomically with other writes).
 *
 * The log is stored as records of consecutive entries (log-record.ts), one per group and commit
 * in steady state. Writing entries from index i deletes every record from i on and rewrites the
 * one that holds i after its start; a compaction to i deletes the records at or below i and
 * rewrites the one that straddles i. The mirror keeps the record starts that make this possible.
 */
import { assertionFailed } from '../base/assert.js';
import type { Entry, HardState, Snapshot } from '../raft/messages.js';
import { snapshotChunkCount, type GroupMirror } from './group-log.js';
import {
  LOG_KEY_BYTES_TOTAL,
  SNAPSHOT_CHUNK_BYTES_MAX,
  hardStateKey,
  snapshotChunkKey,
  snapshotMetaKey,
  writeLogKey,
} from './keys.js';
import {
  LOG_RECORD_BYTES_TARGET,
  decodeLogRecord,
  encodeLogRecordInto,
  entryBytesInRecord,
  recordHeaderBytes,
} from './log-record.js';
import {
  decodeHardState,
  decodeSnapshotMeta,
  encodeChecked,
  encodeHardState,
  encodeSnapshotMeta,
  sameEntry,
  sameHardState,
  sameSnapshotMeta,
} from './records.js';

/** What one group's Ready asks to persist (ready.ts step 1). */
export interface GroupUpdate {
  readonly groupId: number;
  readonly entries: readonly Entry[];
  readonly hardState?: HardState | undefined;
  readonly snapshot?: Snapshot | undefined;
}

/** The part of a LevelDB chained batch the planners use. */
export interface BatchSink {
  put(key: Uint8Array, value: Uint8Array): void;
  del(key: Uint8Array): void;
}

/** A sink that forwards to a batch and counts what is queued, for CommitStats. */
export class CountingSink implements BatchSink {
  putBytes = 0;
  opCount = 0;

  constructor(
    private readonly target: {
      put(k: Uint8Array, v: Uint8Array): unknown;
      del(k: Uint8Array): unknown;
    },
  ) {}

  put(key: Uint8Array, value: Uint8Array): void {
    this.putBytes += key.length + value.length;
    this.opCount++;
    this.target.put(key, value);
  }

  del(key: Uint8Array): void {
    this.opCount++;
    this.target.del(key);
  }
}

/**
 * Deletes the log records that start at starts[lo, hi). A compaction deletes a whole log's
 * records, so the keys are views of one buffer, as in putRecords.
 */
function deleteRecords(
  sink: BatchSink,
  groupId: number,
  starts: readonly number[],
  lo: number,
  hi: number,
): void {
  if (hi <= lo) return;
  const keys = new Uint8Array((hi - lo) * LOG_KEY_BYTES_TOTAL);
  for (let k = lo, at = 0; k < hi; k++, at += LOG_KEY_BYTES_TOTAL) {
    writeLogKey(keys, at, groupId, starts[k]!);
    sink.del(new Uint8Array(keys.buffer, at, LOG_KEY_BYTES_TOTAL));
  }
}

/**
 * Queues consecutive entries as log records of at most LOG_RECORD_BYTES_TARGET (at least one
 * entry each; in steady state one record per group and commit). Returns the first index of each
 * record. Keys and records all go into one buffer, each put as a view of it: one allocation per
 * call, and LevelDB copies what is put. `check`: decode the first record back and compare it
 * with the entries (the batch's pair assertion).
 */
function putRecords(
  sink: BatchSink,
  groupId: number,
  entries: readonly Entry[],
  check: boolean,
): number[] {
  // Where each record begins in `entries`, and the bytes of everything queued.
  const cuts = [0];
  let total = 0;
  let run = 0;
  for (let k = 0; k < entries.length; k++) {
    const b = entryBytesInRecord(entries[k]!);
    if (run > 0 && run + b > LOG_RECORD_BYTES_TARGET) {
      cuts.push(k);
      run = 0;
    }
    run += b;
    total += b;
  }
  cuts.push(entries.length);
  for (let r = 0; r + 1 < cuts.length; r++) {
    const lo = cuts[r]!;
    total += LOG_KEY_BYTES_TOTAL + recordHeaderBytes(entries[lo]!.index, cuts[r + 1]! - lo);
  }
  const out = new Uint8Array(total);
  const buffer = out.buffer;
  const starts: number[] = [];
  let at = 0;
  for (let r = 0; r + 1 < cuts.length; r++) {
    const lo = cuts[r]!;
    const hi = cuts[r + 1]!;
    const first = entries[lo]!.index;
    writeLogKey(out, at, groupId, first);
    const key = new Uint8Array(buffer, at, LOG_KEY_BYTES_TOTAL);
    const valueAt = at + LOG_KEY_BYTES_TOTAL;
    at = encodeLogRecordInto(out, valueAt, entries, lo, hi);
    const value = new Uint8Array(buffer, valueAt, at - valueAt);
    sink.put(key, value);
    starts.push(first);
    if (check && r === 0) checkRecord(groupId, value, entries, lo, hi);
  }
  if (at !== total) assertionFailed(`group ${groupId}: log records took ${at} bytes, not ${total}`);
  return starts;
}

/** Pair assertion: a record as written decodes to the entries it was made of. */
function checkRecord(
  groupId: number,
  record: Uint8Array,
  entries: readonly Entry[],
  lo: number,
  hi: number,
): void {
  const back = decodeLogRecord(record);
  let same = back.length === hi - lo;
  for (let k = 0; same && k < back.length; k++) same = sameEntry(back[k]!, entries[lo + k]!);
  if (!same)
    assertionFailed(
      `group ${groupId}: the log record from ${entries[lo]!.index} does not decode to what was encoded`,
    );
}

/**
 * Rewrites the stored entries [lo, hi) of a record that a truncation or a compaction cuts, as a
 * record that starts at lo. They were one record or part of one, so they fit in one.
 */
function rewriteRecord(
  sink: BatchSink,
  mirror: GroupMirror,
  lo: number,
  hi: number,
  checks: PairChecks,
): void {
  const written = putRecords(sink, mirror.groupId, mirror.storedEntries(lo, hi), checks.entry);
  checks.entry = false;
  if (!(written.length === 1 && written[0] === lo))
    assertionFailed(
      `group ${mirror.groupId}: rewriting entries ${lo}..${hi - 1} took ${written.length} records`,
    );
}

/** Queues snapshot meta and data chunks, and deletes chunks of the old snapshot past the new. */
function putSnapshot(sink: BatchSink, mirror: GroupMirror, snap: Snapshot): void {
  const groupId = mirror.groupId;
  const dataBytes = snap.data.byteLength;
  const chunkCount = snapshotChunkCount(dataBytes);
  const meta = encodeChecked(
    `group ${groupId} snapshot meta`,
    { meta: snap.meta, chunkCount, dataBytes },
    encodeSnapshotMeta,
    decodeSnapshotMeta,
    sameSnapshotMeta,
  );
  sink.put(snapshotMetaKey(groupId), meta);
  for (let c = 0; c < chunkCount; c++) {
    const lo = c * SNAPSHOT_CHUNK_BYTES_MAX;
    sink.put(snapshotChunkKey(groupId, c), snap.data.subarray(lo, lo + SNAPSHOT_CHUNK_BYTES_MAX));
  }
  const oldChunkCount = snapshotChunkCount(mirror.snapshotDataBytes());
  for (let c = chunkCount; c < oldChunkCount; c++) sink.del(snapshotChunkKey(groupId, c));
}

/**
 * Which pair assertions (encode, decode back, compare) a batch still owes. One of each kind per
 * batch catches a codec that loses a field, at the write rather than at the next restart; doing
 * them for every group of a 16-group commit adds nothing but CPU. A batch creates one of these
 * and hands it to every plan; the first entry records and the first hard state are checked.
 */
export class PairChecks {
  entry = true;
  hardState = true;
}

/**
 * Plans one group's update: snapshot (replaces the log), then entries (writing entry i
 * replaces every stored entry at or after i), then hard state, as ready.ts orders them.
 * `checks`: the pair assertions still owed by the batch (all of them by default).
 */
export function planGroupUpdate(
  mirror: GroupMirror,
  u: GroupUpdate,
  sink: BatchSink,
  checks: PairChecks = new PairChecks(),
): () => void {
  const g = mirror.groupId;
  const stored = mirror.hardState();
  // The log as it will be after the snapshot step: (snapIndex, last], with termAt() over it.
  let snapIndex = mirror.firstIndex() - 1;
  let last = mirror.lastIndex();
  let termAt = (i: number): number | undefined => mirror.term(i);
  let replaced = false;

  const starts = mirror.recordStarts();
  const snap = u.snapshot;
  if (snap !== undefined) {
    const idx = snap.meta.index;
    if (!(idx >= snapIndex))
      assertionFailed(`group ${g}: snapshot ${idx} is older than the stored ${snapIndex}`);
    deleteRecords(sink, g, starts, 0, starts.length);
    putSnapshot(sink, mirror, snap);
    snapIndex = idx;
    last = idx;
    termAt = (i) => (i === idx ? snap.meta.term : undefined);
    replaced = true;
  }

  const entries = u.entries;
  let newStarts: number[] = [];
  if (entries.length > 0) {
    const first = entries[0]!.index;
    if (!(first > snapIndex && first <= last + 1))
      assertionFailed(
        `group ${g}: entries from ${first} do not attach to the log (${snapIndex}, ${last}]`,
      );
    let prevTerm = termAt(first - 1)!;
    for (let k = 0; k < entries.length; k++) {
      const e = entries[k]!;
      // (Per entry: messages are built only when a check fails.)
      if (e.index !== first + k)
        assertionFailed(`group ${g}: entry ${e.index} is not at ${first + k}`);
      if (e.term < prevTerm) {
        assertionFailed(`group ${g}: entry ${e.index} term ${e.term} < ${prevTerm}`);
      }
      // Invariant: a committed entry never changes (Raft's log matching and leader completeness).
      if (!replaced && e.index <= stored.commit && e.index <= last && termAt(e.index) !== e.term) {
        assertionFailed(
          `group ${g}: entry ${e.index} overwrites a committed entry (commit ${stored.commit})`,
        );
      }
      prevTerm = e.term;
    }
    const newLast = first + entries.length - 1;
    if (!(replaced || newLast >= Math.min(stored.commit, last)))
      assertionFailed(
        `group ${g}: writing ${first}..${newLast} truncates committed entries (commit ${stored.commit})`,
      );
    if (!replaced && first <= last) {
      // A conflicting tail: every record from `first` on is deleted (one that starts exactly
      // there is overwritten by the new record instead), and one that holds `first` after its
      // own start is rewritten without its tail.
      let k = starts.length;
      while (k > 0 && starts[k - 1]! >= first) k--;
      deleteRecords(
        sink,
        g,
        starts,
        k < starts.length && starts[k] === first ? k + 1 : k,
        starts.length,
      );
      const end = k < starts.length ? starts[k]! - 1 : last;
      if (k > 0 && end >= first) rewriteRecord(sink, mirror, starts[k - 1]!, first, checks);
    }
    newStarts = putRecords(sink, g, entries, checks.entry);
    checks.entry = false;
    last = newLast;
  }

  const hs = u.hardState;
  if (hs !== undefined) putHardState(sink, g, hs, checks);
  // Invariant (checked again at open): the durable commit lies in [snapshot index, last index].
  const commit = (hs ?? stored).commit;
  if (!(commit >= snapIndex && commit <= last))
    assertionFailed(`group ${g}: hard state commit ${commit} outside [${snapIndex}, ${last}]`);

  return () => {
    if (snap !== undefined) mirror.installSnapshot(snap);
    mirror.append(entries, newStarts);
    if (hs !== undefined) mirror.setHardState(hs);
  };
}

/** Queues a group's hard state, with the batch's hard state pair assertion if still owed. */
function putHardState(sink: BatchSink, g: number, hs: HardState, checks: PairChecks): void {
  let bytes: Uint8Array;
  if (checks.hardState) {
    checks.hardState = false;
    bytes = encodeChecked(
      `group ${g} hard state`,
      hs,
      encodeHardState,
      decodeHardState,
      sameHardState,
    );
  } else {
    bytes = encodeHardState(hs);
  }
  sink.put(hardStateKey(g), bytes);
}

/**
 * Plans the state machine's snapshot at an applied index: write it, delete the log up to it.
 * Returns undefined when the group already has a snapshot at or after that index (a leader's
 * snapshot was installed meanwhile); nothing is queued then.
 */
export function planCompaction(
  mirror: GroupMirror,
  snap: Snapshot,
  sink: BatchSink,
): (() => void) | undefined {
  const g = mirror.groupId;
  const idx = snap.meta.index;
  if (idx < mirror.firstIndex()) return undefined;
  if (!(idx <= mirror.lastIndex()))
    assertionFailed(`group ${g}: snapshot ${idx} past last ${mirror.lastIndex()}`);
  if (mirror.term(idx) !== snap.meta.term)
    assertionFailed(
      `group ${g}: snapshot ${idx} has term ${snap.meta.term}, the log has ${mirror.term(idx)}`,
    );
  // Only applied (hence committed) state may be snapshotted.
  if (!(idx <= mirror.hardState().commit))
    assertionFailed(`group ${g}: snapshot ${idx} past commit ${mirror.hardState().commit}`);
  putSnapshot(sink, mirror, snap);
  // Records wholly at or below idx go; the last of them may hold entries past idx, which are
  // rewritten as a record from idx + 1.
  const starts = mirror.recordStarts();
  let k = 0;
  while (k < starts.length && starts[k]! <= idx) k++;
  deleteRecords(sink, g, starts, 0, k);
  const end = k < starts.length ? starts[k]! - 1 : mirror.lastIndex();
  if (end > idx) rewriteRecord(sink, mirror, idx + 1, end + 1, new PairChecks());
  return () => mirror.compactTo(snap);
}
