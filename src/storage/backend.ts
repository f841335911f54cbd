/**
 * What NodeStore needs from the key-value engine under it, and the ClassicLevel (LevelDB)
 * implementation a node runs on. Keys and values are bytes, ordered bytewise.
 *
 * The contract NodeStore relies on, which any backend must keep:
 * - A batch is written atomically: after a crash or a power loss either all of it is there or
 *   none of it (LevelDB's write-ahead log drops a torn record at recovery).
 * - A batch written with `sync: true` is durable when its promise resolves, together with every
 *   batch written before it (the write-ahead log is one sequential file). Without sync a batch
 *   survives a process crash but may be lost, with every later batch, at a power loss.
 * - Opening makes durable whatever it finds: after a process crash, batches written without
 *   sync (or whose sync had not finished) that survived in the OS page cache are durable once
 *   the store is open again, so the restarted node may act on them. LevelDB 1.20 (classic-
 *   level's) does this by writing what it recovers from its log into a table it syncs and
 *   recording that in its synced manifest (db_impl.cc RecoverLogFile, builder.cc).
 * - A write is visible to reads once its promise resolves; a snapshot sees the store as it was
 *   when taken, whatever is written after.
 *
 * The deterministic simulator runs NodeStore over an in-memory backend that keeps these rules
 * and nothing more (test/sim/sim-disk.ts), to check that the node never relies on an unsynced
 * write.
 */
import { ClassicLevel } from 'classic-level';

/** A half-open key range [gte, lt); either bound may be left out. */
export interface BackendRange {
  readonly gte?: Uint8Array;
  readonly lt?: Uint8Array;
}

/** Writes queued together and written as one atomic batch. */
export interface BackendBatch {
  put(key: Uint8Array, value: Uint8Array): void;
  del(key: Uint8Array): void;
  /** Writes the batch; with `sync` it (and all before it) is on disk when this resolves. */
  write(options: { sync: boolean }): Promise<void>;
  /** Releases a batch that was not written; harmless after write(). */
  close(): Promise<void>;
}

/** A consistent read-only view of the store as it was when taken. */
export interface BackendSnapshot {
  getSync(key: Uint8Array): Uint8Array | undefined;
  close(): Promise<void>;
}

/** Reads a key range in order, a batch of entries at a time. */
export interface BackendIterator {
  /** Up to `size` [key, value] pairs; none once the range is exhausted. */
  nextv(size: number): Promise<ReadonlyArray<readonly [Uint8Array, Uint8Array]>>;
  close(): Promise<void>;
}

export interface StoreBackend {
  /** Where the data lives, for error messages (a directory for LevelDB). */
  readonly location: string;
  get(key: Uint8Array): Promise<Uint8Array | undefined>;
  /** A synchronous read of the current state (the Raft core reads its storage synchronously). */
  getSync(key: Uint8Array): Uint8Array | undefined;
  iterator(range: BackendRange): BackendIterator;
  batch(): BackendBatch;
  snapshot(): BackendSnapshot;
  close(): Promise<void>;
}

type Db = ClassicLevel<Uint8Array, Uint8Array>;

/**
 * LevelDB tuning for a write-heavy Raft log. Its defaults (a 4 MiB memtable, 2 MiB tables) are
 * made for small read-mostly stores: here every entry is written once and deleted at the next
 * compaction, keys of all groups interleave in every flushed table, and with the defaults the
 * background compaction alone cost 4-5.6 µs of CPU per entry written, more than the rest of the
 * write path (16 groups × 35 entries per synced batch, 50,000-entry logs). A 64 MiB memtable and
 * 32 MiB tables brought it to under 3 µs when every entry was a key of its own. Since a commit
 * writes one record per group (log-record.ts), LevelDB sees a few keys per commit, and a 16 MiB
 * memtable costs the same CPU per entry as 64 MiB (bench/storage.ts: 16.1-17.3, 4.8, 1.6-1.7,
 * 0.7-0.8, 0.45 µs at 1-256 entries per group and batch, either size) while a node holds up to
 * two memtables: 32 MiB instead of 128 MiB of RSS. Durability is unchanged (every batch is synced
 * to LevelDB's log before the write resolves).
 */
const LEVELDB_OPTIONS = {
  writeBufferSize: 16 * 1024 * 1024,
  maxFileSize: 32 * 1024 * 1024,
} as const;

/** The production backend: a ClassicLevel database in a directory. */
export class LevelBackend implements StoreBackend {
  private constructor(
    readonly location: string,
    private readonly db: Db,
  ) {}

  /** Opens (or creates) the database; rejects with LevelDB's error when it cannot. */
  static async open(dir: string): Promise<LevelBackend> {
    const db: Db = new ClassicLevel<Uint8Array, Uint8Array>(dir, {
      keyEncoding: 'view',
      valueEncoding: 'view',
      ...LEVELDB_OPTIONS,
    });
    await db.open();
    return new LevelBackend(dir, db);
  }

  get(key: Uint8Array): Promise<Uint8Array | undefined> {
    return this.db.get(key);
  }

  getSync(key: Uint8Array): Uint8Array | undefined {
    return this.db.getSync(key);
  }

  iterator(range: BackendRange): BackendIterator {
    return this.db.iterator(range);
  }

  /** LevelDB's chained batch already has this shape. */
  batch(): BackendBatch {
    return this.db.batch();
  }

  snapshot(): BackendSnapshot {
    const db = this.db;
    const s = db.snapshot();
    return {
      getSync: (key) => db.getSync(key, { snapshot: s }),
      close: () => s.close(),
    };
  }

  close(): Promise<void> {
    return this.db.close();
  }
}
