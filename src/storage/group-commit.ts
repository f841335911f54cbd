/**
 * Turns what Raft asks to persist into LevelDB operations, for many groups in one batch.
 *
 * Each plan function checks the change against the group's mirror, queues puts and deletes into
 * the batch, and returns the matching mirror change, which the store runs only after the batch
 * is durable. Everything is checked before the batch is written: a bad change is an assertion
 * with nothing on disk, never a half-applied write. Deletes are explicit keys inside the same
 * batch (never a range clear, which LevelDB does not do atomically with other writes).
 */
import { assert, assertionFailed } from '../base/assert.js';
import type { Entry, HardState, Snapshot } from '../raft/messages.js';
import { snapshotChunkCount, type GroupMirror } from './group-log.js';
import {
  ENTRY_KEY_BYTES_TOTAL,
  SNAPSHOT_CHUNK_BYTES_MAX,
  hardStateKey,
  snapshotChunkKey,
  snapshotMetaKey,
  writeEntryKey,
} from './keys.js';
import {
  decodeEntry,
  decodeHardState,
  decodeSnapshotMeta,
  encodeChecked,
  encodeEntryInto,
  encodeHardState,
  encodeSnapshotMeta,
  entryRecordBytes,
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
 * Deletes the stored log entries with index in [lo, hi]. A compaction deletes a whole log (tens
 * of thousands of keys), so the keys are views of one buffer, as in planGroupUpdate.
 */
function deleteEntries(sink: BatchSink, groupId: number, lo: number, hi: number): void {
  if (hi < lo) return;
  const keys = new Uint8Array((hi - lo + 1) * ENTRY_KEY_BYTES_TOTAL);
  for (let i = lo, at = 0; i <= hi; i++, at += ENTRY_KEY_BYTES_TOTAL) {
    writeEntryKey(keys, at, groupId, i);
    sink.del(new Uint8Array(keys.buffer, at, ENTRY_KEY_BYTES_TOTAL));
  }
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
  const oldChunkCount = snapshotChunkCount(mirror.snapshot()!.data.byteLength);
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

  const snap = u.snapshot;
  if (snap !== undefined) {
    const idx = snap.meta.index;
    assert(idx >= snapIndex, `group ${g}: snapshot ${idx} is older than the stored ${snapIndex}`);
    deleteEntries(sink, g, mirror.firstIndex(), mirror.lastIndex());
    putSnapshot(sink, mirror, snap);
    snapIndex = idx;
    last = idx;
    termAt = (i) => (i === idx ? snap.meta.term : undefined);
    replaced = true;
  }

  const entries = u.entries;
  if (entries.length > 0) {
    const first = entries[0]!.index;
    assert(
      first > snapIndex && first <= last + 1,
      `group ${g}: entries from ${first} do not attach to the log (${snapIndex}, ${last}]`,
    );
    let prevTerm = termAt(first - 1)!;
    // The keys and records of this update all go into one buffer, each put as a view of it:
    // one allocation per group and batch rather than two per entry, and views of an off-heap
    // buffer are handed to LevelDB (which copies what is put) without moving any bytes first.
    let recordBytes = 0;
    for (let k = 0; k < entries.length; k++) {
      recordBytes += ENTRY_KEY_BYTES_TOTAL + entryRecordBytes(entries[k]!);
    }
    const records = new Uint8Array(recordBytes);
    const buffer = records.buffer;
    let at = 0;
    let tailAt = 0;
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
      writeEntryKey(records, at, g, e.index);
      const key = new Uint8Array(buffer, at, ENTRY_KEY_BYTES_TOTAL);
      tailAt = at + ENTRY_KEY_BYTES_TOTAL;
      at = encodeEntryInto(records, tailAt, e);
      sink.put(key, new Uint8Array(buffer, tailAt, at - tailAt));
    }
    assert(at === recordBytes, `group ${g}: entry records took ${at} bytes, not ${recordBytes}`);
    const newLast = first + entries.length - 1;
    assert(
      replaced || newLast >= Math.min(stored.commit, last),
      `group ${g}: writing ${first}..${newLast} truncates committed entries (commit ${stored.commit})`,
    );
    deleteEntries(sink, g, newLast + 1, last);
    last = newLast;
    // Pair assertion, one per batch: the tail record as written decodes to the entry.
    if (checks.entry) {
      checks.entry = false;
      const tail = entries[entries.length - 1]!;
      assert(
        sameEntry(decodeEntry(records.subarray(tailAt, at)), tail),
        `group ${g}: entry ${tail.index} does not decode to what was encoded`,
      );
    }
  }

  const hs = u.hardState;
  if (hs !== undefined) putHardState(sink, g, hs, checks);
  // Invariant (checked again at open): the durable commit lies in [snapshot index, last index].
  const commit = (hs ?? stored).commit;
  assert(
    commit >= snapIndex && commit <= last,
    `group ${g}: hard state commit ${commit} outside [${snapIndex}, ${last}]`,
  );

  return () => {
    if (snap !== undefined) mirror.installSnapshot(snap);
    mirror.append(entries);
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
  assert(idx <= mirror.lastIndex(), `group ${g}: snapshot ${idx} past last ${mirror.lastIndex()}`);
  assert(
    mirror.term(idx) === snap.meta.term,
    `group ${g}: snapshot ${idx} has term ${snap.meta.term}, the log has ${mirror.term(idx)}`,
  );
  // Only applied (hence committed) state may be snapshotted.
  assert(
    idx <= mirror.hardState().commit,
    `group ${g}: snapshot ${idx} past commit ${mirror.hardState().commit}`,
  );
  putSnapshot(sink, mirror, snap);
  deleteEntries(sink, g, mirror.firstIndex(), idx);
  return () => mirror.compactTo(snap);
}
