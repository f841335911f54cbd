/**
 * Rebuilds every group's mirror from one pass over the database at open, and refuses damaged
 * state. LevelDB writes a batch atomically, so a crash never leaves half a Ready behind: any gap,
 * undecodable record, stray key or out-of-range hard state means the disk was damaged (or a
 * LevelDB log record was dropped on recovery), and the node must not start on it. Nothing is
 * skipped or repaired here: a replica that silently lost acknowledged entries could break
 * Raft's safety, while one that refuses to start is replaced from its peers by an operator.
 */
import { CodecError } from '../base/codec.js';
import { EMPTY_HARD_STATE, type Entry, type HardState } from '../raft/messages.js';
import { StorageError } from './errors.js';
import { EMPTY_SNAPSHOT, GroupMirror, snapshotChunkCount } from './group-log.js';
import { SNAPSHOT_CHUNK_BYTES_MAX, decodeKey, describeKey } from './keys.js';
import { decodeLogRecord } from './log-record.js';
import type { GroupReader } from './store-reader.js';
import {
  decodeGroupRecord,
  decodeHardState,
  decodeSnapshotMeta,
  type GroupRecord,
  type SnapshotMetaRecord,
} from './records.js';

/** Batches of [key, value] in key order, as LevelDB's iterator nextv() returns them. */
export type RecordSource = AsyncIterable<ReadonlyArray<readonly [Uint8Array, Uint8Array]>>;

interface Loading {
  record?: GroupRecord;
  hardState?: HardState;
  meta?: SnapshotMetaRecord;
  /** Byte length of each snapshot chunk read (the data itself is read again when needed). */
  chunkBytes: number[];
  entries: Entry[];
  /** The first index of each log record read, ascending. */
  starts: number[];
}

function corrupt(groupId: number, message: string, details: Record<string, unknown> = {}): never {
  throw new StorageError('STORAGE_CORRUPT', `group ${groupId}: ${message}`, {
    details: { groupId, ...details },
  });
}

/** Decodes a value; a codec failure becomes STORAGE_CORRUPT naming the key. */
function decodeAt<T>(key: Uint8Array, value: Uint8Array, dec: (b: Uint8Array) => T): T {
  try {
    return dec(value);
  } catch (cause) {
    if (!(cause instanceof CodecError)) throw cause;
    const k = decodeKey(key);
    const groupId = k !== undefined && 'groupId' in k ? k.groupId : undefined;
    // A log record is named by the entry it starts at (its key); the codec's message names the
    // entry inside it that does not decode.
    const index = k?.kind === 'log' ? k.first : undefined;
    const where =
      k?.kind === 'log' ? `group ${k.groupId}: log record from entry ${k.first}` : describeKey(key);
    throw new StorageError('STORAGE_CORRUPT', `${where} does not decode: ${cause.message}`, {
      cause,
      details: { key: describeKey(key), groupId, index },
    });
  }
}

/** Loads every group; throws STORAGE_CORRUPT at the first damage found. */
export async function loadGroups(
  source: RecordSource,
  reader: GroupReader,
  tailBytesMax?: number,
): Promise<Map<number, GroupMirror>> {
  const loading = new Map<number, Loading>();
  const at = (groupId: number): Loading => {
    let l = loading.get(groupId);
    if (l === undefined) {
      l = { chunkBytes: [], entries: [], starts: [] };
      loading.set(groupId, l);
    }
    return l;
  };

  for await (const batch of source) {
    for (const [key, value] of batch) {
      const k = decodeKey(key);
      if (k === undefined) {
        throw new StorageError('STORAGE_CORRUPT', `unknown key ${describeKey(key)}`, {
          details: { key: describeKey(key) },
        });
      }
      switch (k.kind) {
        case 'format':
          // Read and checked before this pass (NodeStore.open), so a foreign database is
          // reported as such rather than as corrupt.
          break;
        case 'group':
          at(k.groupId).record = decodeAt(key, value, decodeGroupRecord);
          break;
        case 'hard-state':
          at(k.groupId).hardState = decodeAt(key, value, decodeHardState);
          break;
        case 'snapshot-meta':
          at(k.groupId).meta = decodeAt(key, value, decodeSnapshotMeta);
          break;
        case 'snapshot-chunk': {
          const l = at(k.groupId);
          if (k.chunk !== l.chunkBytes.length) {
            corrupt(k.groupId, `snapshot chunk ${l.chunkBytes.length} is missing`, {
              chunk: l.chunkBytes.length,
            });
          }
          l.chunkBytes.push(value.byteLength);
          break;
        }
        case 'log': {
          const l = at(k.groupId);
          const entries = decodeAt(key, value, decodeLogRecord);
          const first = entries[0]!.index;
          if (first !== k.first) {
            corrupt(k.groupId, `log key ${k.first} holds a record from entry ${first}`, {
              index: k.first,
            });
          }
          const prev = l.entries[l.entries.length - 1];
          if (prev !== undefined && first > prev.index + 1) {
            corrupt(k.groupId, `log entry ${prev.index + 1} is missing (next stored: ${first})`, {
              index: prev.index + 1,
            });
          }
          if (prev !== undefined && first <= prev.index) {
            corrupt(
              k.groupId,
              `log entry ${first} is stored twice (a record ends at ${prev.index}, the next starts at ${first})`,
              { index: first },
            );
          }
          l.starts.push(first);
          for (const e of entries) l.entries.push(e);
          break;
        }
      }
    }
  }

  const groups = new Map<number, GroupMirror>();
  for (const [groupId, l] of loading) {
    groups.set(groupId, buildGroup(groupId, l, reader, tailBytesMax));
  }
  return groups;
}

/** Checks the chunks' sizes against the meta; returns the data's byte length. */
function checkSnapshotChunks(groupId: number, meta: SnapshotMetaRecord, chunkBytes: number[]) {
  if (
    chunkBytes.length !== meta.chunkCount ||
    meta.chunkCount !== snapshotChunkCount(meta.dataBytes)
  ) {
    corrupt(
      groupId,
      `snapshot ${meta.meta.index} has ${chunkBytes.length} chunks, its meta says ${meta.chunkCount} ` +
        `for ${meta.dataBytes} bytes`,
      { index: meta.meta.index },
    );
  }
  let offset = 0;
  for (const [c, bytes] of chunkBytes.entries()) {
    const expected = Math.min(SNAPSHOT_CHUNK_BYTES_MAX, meta.dataBytes - offset);
    if (bytes !== expected) {
      corrupt(groupId, `snapshot chunk ${c} has ${bytes} bytes, not ${expected}`, {
        index: meta.meta.index,
        chunk: c,
      });
    }
    offset += bytes;
  }
  return meta.dataBytes;
}

function buildGroup(
  groupId: number,
  l: Loading,
  reader: GroupReader,
  tailBytesMax: number | undefined,
): GroupMirror {
  if (l.record === undefined) corrupt(groupId, 'has stored state but no group record');
  if (l.meta === undefined && l.chunkBytes.length > 0) {
    corrupt(groupId, 'has snapshot chunks but no snapshot meta');
  }
  const snapshotMeta = l.meta === undefined ? EMPTY_SNAPSHOT.meta : l.meta.meta;
  const snapshotDataBytes =
    l.meta === undefined ? 0 : checkSnapshotChunks(groupId, l.meta, l.chunkBytes);
  const snapIndex = snapshotMeta.index;

  const first = l.entries[0];
  if (first !== undefined && first.index !== snapIndex + 1) {
    const index = first.index <= snapIndex ? first.index : snapIndex + 1;
    corrupt(
      groupId,
      first.index <= snapIndex
        ? `log entry ${first.index} is covered by the snapshot at ${snapIndex}`
        : `log entry ${snapIndex + 1} is missing (the log starts at ${first.index})`,
      { index },
    );
  }
  let prevTerm = snapshotMeta.term;
  for (const e of l.entries) {
    if (e.term < prevTerm) {
      corrupt(groupId, `log entry ${e.index} has term ${e.term}, below ${prevTerm} before it`, {
        index: e.index,
      });
    }
    prevTerm = e.term;
  }

  const hardState = l.hardState ?? EMPTY_HARD_STATE;
  const lastIndex = snapIndex + l.entries.length;
  if (hardState.commit < snapIndex || hardState.commit > lastIndex) {
    corrupt(
      groupId,
      `hard state commit ${hardState.commit} outside [snapshot ${snapIndex}, last ${lastIndex}]`,
      { index: hardState.commit },
    );
  }
  return new GroupMirror(
    groupId,
    l.record.bootstrap,
    { snapshotMeta, snapshotDataBytes, entries: l.entries, recordStarts: l.starts, hardState },
    reader,
    tailBytesMax,
  );
}
