/**
 * Synchronous reads of what the group mirrors do not keep in memory: log records older than a
 * group's in-memory tail, and snapshot data (group-log.ts). The Raft core reads its storage
 * synchronously, so these use LevelDB's getSync: a lagging follower's catch-up, a snapshot sent
 * to a follower and a restart's replay read from the database, which the steady state never does.
 *
 * Invariant: a read sees exactly the state the mirrors describe. Mirrors change only after the
 * write that made the change is durable, so while a write is in flight reads go to a LevelDB
 * snapshot taken just before it (pin/unpin around every write of NodeStore's queue): a
 * compaction deleting a record, or a new snapshot replacing the chunks, is seen by readers only
 * together with the mirror change.
 */
import { CodecError } from '../base/codec.js';
import type { Entry } from '../raft/messages.js';
import type { BackendSnapshot, StoreBackend } from './backend.js';
import { StorageError } from './errors.js';
import { SNAPSHOT_CHUNK_BYTES_MAX, logKey, snapshotChunkKey } from './keys.js';
import { decodeLogRecord } from './log-record.js';

/** What a group mirror reads from the database on demand. */
export interface GroupReader {
  /** The entries of the group's log record that starts at `first`. */
  logRecord(groupId: number, first: number): Entry[];
  /** The data of the group's stored snapshot, `dataBytes` long. */
  snapshotData(groupId: number, dataBytes: number): Uint8Array;
}

function corrupt(groupId: number, message: string, cause?: unknown): StorageError {
  return new StorageError('STORAGE_CORRUPT', `group ${groupId}: ${message}`, {
    cause,
    details: { groupId },
  });
}

export class StoreReader implements GroupReader {
  private pinned: BackendSnapshot | undefined = undefined;

  constructor(
    private readonly db: StoreBackend,
    private readonly dir: string,
  ) {}

  /** Before a write: reads go to the database as it is now until unpin(). */
  pin(): void {
    if (this.pinned === undefined) this.pinned = this.db.snapshot();
  }

  /** After the write and its mirror changes: reads see the database again. */
  async unpin(): Promise<void> {
    const s = this.pinned;
    this.pinned = undefined;
    await s?.close();
  }

  logRecord(groupId: number, first: number): Entry[] {
    const bytes = this.get(logKey(groupId, first), groupId);
    if (bytes === undefined) throw corrupt(groupId, `log record from entry ${first} is missing`);
    let entries: Entry[];
    try {
      entries = decodeLogRecord(bytes);
    } catch (cause) {
      if (!(cause instanceof CodecError)) throw cause;
      throw corrupt(groupId, `log record from entry ${first} does not decode: ${cause.message}`);
    }
    if (entries[0]!.index !== first) {
      throw corrupt(groupId, `log key ${first} holds a record from entry ${entries[0]!.index}`);
    }
    return entries;
  }

  snapshotData(groupId: number, dataBytes: number): Uint8Array {
    const data = new Uint8Array(dataBytes);
    for (let c = 0, at = 0; at < dataBytes; c++) {
      const chunk = this.get(snapshotChunkKey(groupId, c), groupId);
      const expected = Math.min(SNAPSHOT_CHUNK_BYTES_MAX, dataBytes - at);
      if (chunk?.byteLength !== expected) {
        throw corrupt(
          groupId,
          `snapshot chunk ${c} has ${chunk?.byteLength ?? 'no'} bytes, not ${expected}`,
        );
      }
      data.set(chunk, at);
      at += expected;
    }
    return data;
  }

  private get(key: Uint8Array, groupId: number): Uint8Array | undefined {
    try {
      return this.pinned === undefined ? this.db.getSync(key) : this.pinned.getSync(key);
    } catch (cause) {
      throw new StorageError('STORAGE_IO', `reading group ${groupId} in ${this.dir} failed`, {
        cause,
        details: { dir: this.dir, groupId },
      });
    }
  }
}
