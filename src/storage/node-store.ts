/**
 * NodeStore: one LevelDB database per node holding the Raft state of every group it hosts.
 *
 * Reads are synchronous and served from per-group mirrors (group-log.ts), loaded at open; what a
 * mirror does not keep in memory (old log entries, snapshot data) it reads with LevelDB's
 * synchronous get (store-reader.ts).
 * Writes go through one internal queue, so commit, saveSnapshot, createGroup and deleteGroup
 * never interleave even when a caller does not await; each is one chained batch written with
 * `sync: true` (classic-level does not sync by default), and the mirrors change only after that
 * write has succeeded. `commit()` is the group commit of docs/ARCHITECTURE.md (The durable node):
 * the Readys of all groups of a loop turn in one batch, so one fsync serves them all.
 *
 * A failed write leaves the disk in an unknown state: the store then refuses every later write
 * with the same STORAGE_IO error, and the node is expected to exit (errors.ts).
 */
import { AssertionError, assertionFailed } from '../base/assert.js';
import { bootstrapEntries, bootstrapHardState } from '../raft/bootstrap.js';
import type { NodeId, Snapshot } from '../raft/messages.js';
import {
  LevelBackend,
  type BackendBatch,
  type BackendRange,
  type StoreBackend,
} from './backend.js';
import { StorageError } from './errors.js';
import {
  CountingSink,
  PairChecks,
  planCompaction,
  planGroupUpdate,
  type GroupUpdate,
} from './group-commit.js';
import { GroupMirror, type GroupLog } from './group-log.js';
import { formatKey, groupKey, groupRanges, isGroupId } from './keys.js';
import { loadGroups, type RecordSource } from './recovery.js';
import { StoreReader } from './store-reader.js';
import {
  STORE_LAYOUT,
  STORE_LAYOUTS_READ,
  decodeFormat,
  decodeGroupRecord,
  encodeChecked,
  encodeFormat,
  encodeGroupRecord,
  sameGroupRecord,
  type FormatRecord,
} from './records.js';

export type { StoreBackend } from './backend.js';
export type { GroupLog } from './group-log.js';
export type { GroupUpdate } from './group-commit.js';
export type { GroupBootstrap } from './records.js';

/** What one commit wrote, for metrics and the bench. */
export interface CommitStats {
  readonly groups: number;
  readonly entries: number;
  /** Key and value bytes put into the batch. */
  readonly bytes: number;
  /** Duration of the synced batch write (0 when there was nothing to write). */
  readonly fsyncMs: number;
}

export interface NodeStoreOptions {
  /**
   * Bytes of log entries each group keeps in memory; older committed entries are read from
   * LevelDB when a lagging follower or a restart needs them (group-log.ts).
   * @default LOG_TAIL_BYTES_MAX_DEFAULT (1 MiB)
   */
  readonly logTailBytesMax?: number;
}

export interface CreateGroupOptions {
  readonly voters: readonly NodeId[];
  readonly learners?: readonly NodeId[];
}

type Db = StoreBackend;
type Batch = BackendBatch;

/** Keys read per iterator step at open and in deleteGroup. */
const ITERATE_BATCH = 1000;

const FORMAT: FormatRecord = { store: 'tickraft-node-store', layout: STORE_LAYOUT };

function checkOptions(options: NodeStoreOptions): void {
  const tailBytesMax = options.logTailBytesMax;
  if (!(tailBytesMax === undefined || (Number.isSafeInteger(tailBytesMax) && tailBytesMax >= 0)))
    assertionFailed(`logTailBytesMax ${tailBytesMax} is not a byte count`);
}

function ioError(what: string, dir: string, cause: unknown): StorageError {
  // abstract-level wraps the LevelDB error ("Database failed to open" around "IO error: lock
  // ... already held"): name both, the inner one is what an operator needs.
  const inner = cause instanceof Error && cause.cause instanceof Error ? cause.cause : undefined;
  const outer = cause instanceof Error ? cause.message : String(cause);
  const why = inner === undefined ? outer : `${outer}: ${inner.message}`;
  return new StorageError('STORAGE_IO', `${what} in ${dir} failed: ${why}`, {
    cause,
    details: { dir },
  });
}

async function* iterate(db: Db, range: BackendRange = {}): RecordSource {
  const it = db.iterator(range);
  try {
    for (;;) {
      const batch = await it.nextv(ITERATE_BATCH);
      if (batch.length === 0) return;
      yield batch;
    }
  } finally {
    await it.close();
  }
}

export class NodeStore {
  readonly dir: string;
  private readonly db: Db;
  private readonly groups: Map<number, GroupMirror>;
  private readonly reader: StoreReader;
  private readonly logTailBytesMax: number | undefined;
  /** The tail of the write queue; it never rejects (failures go to the caller's promise). */
  private tail: Promise<void> = Promise.resolve();
  private failure: StorageError | undefined = undefined;
  private isClosing = false;
  private isClosed = false;

  private constructor(
    dir: string,
    db: Db,
    groups: Map<number, GroupMirror>,
    reader: StoreReader,
    logTailBytesMax: number | undefined,
  ) {
    this.dir = dir;
    this.db = db;
    this.groups = groups;
    this.reader = reader;
    this.logTailBytesMax = logTailBytesMax;
  }

  /**
   * Opens (or creates) the store in `dir` and loads every group. Throws STORAGE_CORRUPT when
   * any group's state is damaged, STORAGE_IO when LevelDB cannot open the directory (another
   * process holds it, permissions), STORAGE_UNSUPPORTED_FORMAT for a foreign database.
   */
  static async open(dir: string, options: NodeStoreOptions = {}): Promise<NodeStore> {
    checkOptions(options);
    let db: LevelBackend;
    try {
      db = await LevelBackend.open(dir);
    } catch (cause) {
      throw ioError('opening the node store', dir, cause);
    }
    return NodeStore.openOn(db, options);
  }

  /**
   * Opens the store over an already open backend (backend.ts) and loads every group; the
   * backend is closed again when that fails. Throws like open().
   */
  static async openOn(db: StoreBackend, options: NodeStoreOptions = {}): Promise<NodeStore> {
    checkOptions(options);
    const tailBytesMax = options.logTailBytesMax;
    const dir = db.location;
    try {
      await ensureFormat(db, dir);
      const reader = new StoreReader(db, dir);
      const groups = await loadGroups(iterate(db), reader, tailBytesMax);
      return new NodeStore(dir, db, groups, reader, tailBytesMax);
    } catch (err) {
      // Release the directory lock so the caller (or a test) can inspect or reopen it.
      try {
        await db.close();
      } catch {
        // The open failure is the error to report; a failed close after it changes nothing the
        // caller can act on (the process exits on a StorageError anyway).
      }
      if (err instanceof StorageError || err instanceof AssertionError) throw err;
      throw ioError('reading the node store', dir, err);
    }
  }

  /** Ids of every group this node holds, ascending. */
  groupIds(): number[] {
    return [...this.groups.keys()].sort((a, b) => a - b);
  }

  group(groupId: number): GroupLog | undefined {
    return this.groups.get(groupId);
  }

  /**
   * Creates a group replica. With members it is a new group: the bootstrap entries and hard
   * state of raft/bootstrap.ts are written with it. Without, it is an empty replica that a
   * leader will fill by snapshot or appends.
   */
  createGroup(groupId: number, bootstrap: CreateGroupOptions | undefined): Promise<GroupLog> {
    return this.enqueue('createGroup', async () => {
      if (!isGroupId(groupId)) assertionFailed(`group id ${groupId} is not a u32`);
      if (!!this.groups.has(groupId)) assertionFailed(`group ${groupId} already exists`);
      const record = {
        bootstrap:
          bootstrap === undefined
            ? undefined
            : { voters: [...bootstrap.voters], learners: [...(bootstrap.learners ?? [])] },
      };
      const mirror = GroupMirror.empty(
        groupId,
        record.bootstrap,
        this.reader,
        this.logTailBytesMax,
      );
      const batch = this.db.batch();
      try {
        batch.put(
          groupKey(groupId),
          encodeChecked(
            `group ${groupId} record`,
            record,
            encodeGroupRecord,
            decodeGroupRecord,
            sameGroupRecord,
          ),
        );
        let apply = (): void => {};
        if (record.bootstrap !== undefined) {
          const entries = bootstrapEntries(record.bootstrap.voters, record.bootstrap.learners);
          apply = planGroupUpdate(
            mirror,
            { groupId, entries, hardState: bootstrapHardState(entries) },
            batch,
          );
        }
        await this.write(batch, `creating group ${groupId}`);
        apply();
      } finally {
        await closeUnwritten(batch);
      }
      this.groups.set(groupId, mirror);
      return mirror;
    });
  }

  /**
   * Persists what the Readys of a loop turn ask for (ready.ts step 1), all groups in one synced
   * batch. Per group: snapshot, then entries, then hard state. Each group appears at most once.
   * When the promise resolves the updates are durable and visible through group(id).
   */
  commit(updates: readonly GroupUpdate[], options: { sync?: boolean } = {}): Promise<CommitStats> {
    // A Ready without new entries, snapshot, term or vote (mustSync false: only the commit
    // index moved) may skip the fsync: a lost commit index is learnt again from the leader.
    const sync = options.sync ?? true;
    return this.enqueue('commit', async () => {
      const batch = this.db.batch();
      const sink = new CountingSink(batch);
      const applies: Array<() => void> = [];
      let entryCount = 0;
      const seen = new Set<number>();
      const checks = new PairChecks();
      try {
        for (const u of updates) {
          if (!!seen.has(u.groupId))
            assertionFailed(`group ${u.groupId} appears twice in one commit`);
          seen.add(u.groupId);
          applies.push(planGroupUpdate(this.mirror(u.groupId), u, sink, checks));
          entryCount += u.entries.length;
        }
        const fsyncMs = sink.opCount === 0 ? 0 : await this.write(batch, 'group commit', sync);
        for (const apply of applies) apply();
        return { groups: updates.length, entries: entryCount, bytes: sink.putBytes, fsyncMs };
      } finally {
        await closeUnwritten(batch);
      }
    });
  }

  /**
   * Stores the state machine's snapshot at an applied index and compacts the log up to it
   * (GroupLog.snapshot() returns it afterwards and firstIndex moves past it). Writes nothing
   * when the group already has a snapshot at or after that index: a leader's snapshot was
   * installed since the state machine took this one, and the newer one stays.
   */
  saveSnapshot(groupId: number, snapshot: Snapshot): Promise<void> {
    return this.enqueue('saveSnapshot', async () => {
      const batch = this.db.batch();
      try {
        const apply = planCompaction(this.mirror(groupId), snapshot, batch);
        if (apply === undefined) return;
        await this.write(batch, `snapshot of group ${groupId} at ${snapshot.meta.index}`);
        apply();
      } finally {
        await closeUnwritten(batch);
      }
    });
  }

  /** Removes every key of the group, in one synced batch; the group is gone afterwards. */
  deleteGroup(groupId: number): Promise<void> {
    return this.enqueue('deleteGroup', async () => {
      this.mirror(groupId);
      const batch = this.db.batch();
      try {
        // The group's keys are found by iterating its ranges, not from the mirror, so that
        // nothing of it can survive even if the mirror and the disk disagreed.
        for (const range of groupRanges(groupId)) {
          for await (const records of this.read(iterate(this.db, range), groupId)) {
            for (const [key] of records) batch.del(key);
          }
        }
        await this.write(batch, `deleting group ${groupId}`);
      } finally {
        await closeUnwritten(batch);
      }
      this.groups.delete(groupId);
      // Pair assertion: reading the ranges back finds nothing.
      for (const range of groupRanges(groupId)) {
        if ((await firstKeys(this.db, range, 1)).length !== 0)
          assertionFailed(`group ${groupId} still has keys after deleteGroup`);
      }
    });
  }

  /**
   * Waits for queued writes, then closes the database. Closing twice is harmless; any other call
   * after close is a programmer error.
   */
  close(): Promise<void> {
    if (this.isClosing) return this.tail;
    this.isClosing = true;
    // Not through enqueue(): a store that failed must still release the database.
    const run = this.tail.then(async () => {
      this.isClosed = true;
      await this.db.close();
    });
    this.tail = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  private mirror(groupId: number): GroupMirror {
    const m = this.groups.get(groupId);
    if (m === undefined) assertionFailed(`group ${groupId} does not exist on this node`);
    return m;
  }

  /**
   * Runs a write after every earlier one. Any failure other than an assertion (which stops a bad
   * call before it writes, and crashes the process anyway) leaves the disk in an unknown state:
   * it becomes STORAGE_IO and every later write is refused with it.
   */
  private enqueue<T>(what: string, op: () => Promise<T>): Promise<T> {
    const run = this.tail.then(async () => {
      if (!!this.isClosed) assertionFailed(`${what} after the node store was closed`);
      if (this.failure !== undefined) throw this.failure;
      try {
        // Until op has written and changed the mirrors, reads see the database as it was.
        this.reader.pin();
        return await op();
      } catch (err) {
        if (err instanceof AssertionError) throw err;
        this.failure = err instanceof StorageError ? err : ioError(what, this.dir, err);
        throw this.failure;
      } finally {
        await this.reader.unpin();
      }
    });
    this.tail = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /** Writes a batch with sync; returns how long the write took. */
  private write(batch: Batch, what: string, sync = true): Promise<number> {
    return writeBatch(batch, what, this.dir, sync);
  }

  /** Turns LevelDB read errors during an iteration into STORAGE_IO. */
  private async *read(source: RecordSource, groupId: number): RecordSource {
    try {
      yield* source;
    } catch (cause) {
      throw ioError(`reading group ${groupId}`, this.dir, cause);
    }
  }
}

/**
 * Checks the format record, or writes it into a new, empty database. Runs before the groups are
 * loaded so that a foreign database is reported as such, not as a corrupt store.
 */
async function ensureFormat(db: Db, dir: string): Promise<void> {
  const bytes = await db.get(formatKey());
  if (bytes === undefined) {
    if ((await firstKeys(db, {}, 1)).length > 0) {
      throw new StorageError(
        'STORAGE_UNSUPPORTED_FORMAT',
        `${dir} holds a LevelDB database that is not a tickraft node store`,
        { details: { dir } },
      );
    }
    await writeFormat(db, dir, 'creating the node store');
    return;
  }
  let format: FormatRecord;
  try {
    format = decodeFormat(bytes);
  } catch (cause) {
    throw new StorageError('STORAGE_UNSUPPORTED_FORMAT', `${dir} has an unreadable format record`, {
      cause,
      details: { dir },
    });
  }
  if (!STORE_LAYOUTS_READ.includes(format.layout)) {
    throw new StorageError(
      'STORAGE_UNSUPPORTED_FORMAT',
      `${dir} has store layout ${format.layout}; this build reads ${STORE_LAYOUTS_READ.join(' and ')}`,
      { details: { dir, layout: format.layout } },
    );
  }
  if (format.layout !== STORE_LAYOUT) {
    // An older layout this build reads: say so on disk before writing anything of the new one
    // (records.ts STORE_LAYOUT).
    await writeFormat(db, dir, 'upgrading the node store format');
  }
}

/** The first `limit` keys of a range. */
async function firstKeys(db: Db, range: BackendRange, limit: number): Promise<Uint8Array[]> {
  const it = db.iterator(range);
  try {
    return (await it.nextv(limit)).map(([key]) => key);
  } finally {
    await it.close();
  }
}

async function writeFormat(db: Db, dir: string, what: string): Promise<void> {
  const batch = db.batch();
  try {
    batch.put(formatKey(), encodeChecked('format', FORMAT, encodeFormat, decodeFormat, sameFormat));
    await writeBatch(batch, what, dir, true);
  } finally {
    await closeUnwritten(batch);
  }
}

function sameFormat(a: FormatRecord, b: FormatRecord): boolean {
  return a.store === b.store && a.layout === b.layout;
}

/** Writes a chained batch with `sync: true`; returns how long the write took. */
async function writeBatch(batch: Batch, what: string, dir: string, sync: boolean): Promise<number> {
  const startMs = performance.now();
  try {
    await batch.write({ sync });
  } catch (cause) {
    throw ioError(what, dir, cause);
  }
  return performance.now() - startMs;
}

/** Releases a batch that was not written (an assertion or an early return stopped it). */
async function closeUnwritten(batch: Batch): Promise<void> {
  // close() after a successful write() is a no-op, so this is safe in a finally block.
  await batch.close();
}
