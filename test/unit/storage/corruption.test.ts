// Opening a damaged store must fail loudly, never skip: a replica that silently lost or reordered
// acknowledged entries could break Raft's safety. Goal: every kind of damage the loader checks
// for is reported as a StorageError with code STORAGE_CORRUPT (or STORAGE_UNSUPPORTED_FORMAT for a
// foreign database) whose message and details name the group and the index or key. Method: build
// a healthy store, close it, damage it with classic-level opened directly (garbage values,
// deleted or moved keys, stray keys), then reopen and check the error. The healthy store is
// also reopened once, so the checks are known not to fire on good data.
import { ClassicLevel } from 'classic-level';
import t, { type Test } from 'tap';
import { encode } from '../../../src/base/codec.js';
import {
  formatKey,
  logKey,
  groupKey,
  hardStateKey,
  snapshotChunkKey,
} from '../../../src/storage/keys.js';
import { NodeStore } from '../../../src/storage/node-store.js';
import { encodeLogRecord } from '../../../src/storage/log-record.js';
import { encodeHardState } from '../../../src/storage/records.js';
import { ent, ents, hs, openRaw, openStore, scratchDir, type RawDb } from './helpers.js';

/**
 * Group 5: entries 1..10 in records from 1, 4 and 7, commit 6. Group 8: snapshot at 4 in 2
 * chunks, entries 5..6 (its records were 1..3 and 4..6; the compaction rewrote the second as a
 * record from 5).
 */
async function healthyStore(t: Test, dir: string): Promise<void> {
  const store = await openStore(t, dir);
  await store.createGroup(5, undefined);
  await store.createGroup(8, undefined);
  await store.commit([
    { groupId: 5, entries: ents(1, 3, 1) },
    { groupId: 8, entries: ents(1, 3, 2) },
  ]);
  await store.commit([
    { groupId: 5, entries: ents(4, 6, 1) },
    { groupId: 8, entries: ents(4, 6, 2), hardState: hs(2, 6) },
  ]);
  await store.commit([{ groupId: 5, entries: ents(7, 10, 1), hardState: hs(1, 6) }]);
  const data = new Uint8Array((1 << 20) + 10).fill(3);
  await store.saveSnapshot(8, {
    meta: {
      index: 4,
      term: 2,
      confState: {
        voters: ['n1'],
        votersOutgoing: [],
        learners: [],
        learnersNext: [],
        autoLeave: false,
      },
    },
    data,
  });
  await store.close();
}

async function openDamaged(t: Test, damage: (db: RawDb) => Promise<void>): Promise<unknown> {
  const dir = scratchDir(t);
  await healthyStore(t, dir);
  const raw = await openRaw(t, dir);
  await damage(raw);
  await raw.close();
  try {
    const store = await NodeStore.open(dir);
    await store.close();
    return undefined;
  } catch (err) {
    return err;
  }
}

const corrupt = (details: Record<string, unknown>, message: RegExp) => ({
  name: 'StorageError',
  code: 'STORAGE_CORRUPT',
  message,
  details,
});

t.test('the healthy store opens', async (t) => {
  const err = await openDamaged(t, async () => {});
  t.equal(err, undefined);
});

t.test('a garbage value at a log key names the group and index', async (t) => {
  const err = await openDamaged(t, (db) => db.put(logKey(5, 7), Uint8Array.of(1, 0xc1, 9, 9)));
  t.match(
    err,
    corrupt({ groupId: 5, index: 7 }, /group 5: log record from entry 7 does not decode/),
  );
  t.match(err, { cause: { name: 'CodecError' } }, 'the codec error is the cause');
  // A one-entry binary record (version 2, layout 1) of entry 7 whose data is cut short.
  const cut = await openDamaged(t, (db) => db.put(logKey(5, 7), Uint8Array.of(2, 1, 7, 0, 50)));
  t.match(
    cut,
    corrupt({ groupId: 5, index: 7 }, /log record from entry 7 does not decode.*truncated/),
  );
});

t.test(
  'a damaged record of a run of entries names the group, the record and the entry',
  async (t) => {
    const record = encodeLogRecord(ents(7, 10, 1));
    const cut = await openDamaged(t, (db) => db.put(logKey(5, 7), record.subarray(0, -1)));
    t.match(
      cut,
      corrupt(
        { groupId: 5, index: 7 },
        /group 5: log record from entry 7 does not decode: .*entry 10: data of 8 bytes is truncated/,
      ),
    );
    // The type byte of entry 8: version, first index, count, then entry 7 (term, type, length 8,
    // 8 bytes of data), then entry 8's term.
    const badType = record.slice();
    badType[1 + 1 + 1 + 11 + 1] = 9;
    const typed = await openDamaged(t, (db) => db.put(logKey(5, 7), badType));
    t.match(typed, corrupt({ groupId: 5, index: 7 }, /entry 8: unknown type code 9/));
    const longer = await openDamaged(t, (db) => db.put(logKey(5, 7), Uint8Array.of(...record, 0)));
    t.match(longer, corrupt({ groupId: 5, index: 7 }, /1 bytes follow its 4 entries/));
  },
);

t.test('a value of an unknown codec version is corrupt, not guessed at', async (t) => {
  const bytes = encodeLogRecord(ents(4, 6, 1));
  bytes[0] = 99;
  const err = await openDamaged(t, (db) => db.put(logKey(5, 4), bytes));
  t.match(
    err,
    corrupt({ groupId: 5, index: 4 }, /log record from entry 4 does not decode.*version 99/),
  );
});

t.test('a gap in the log names the first missing index', async (t) => {
  const err = await openDamaged(t, (db) => db.del(logKey(5, 4)));
  t.match(
    err,
    corrupt({ groupId: 5, index: 4 }, /group 5: log entry 4 is missing \(next stored: 7\)/),
  );
});

t.test('records that overlap are corrupt', async (t) => {
  const err = await openDamaged(t, (db) => db.put(logKey(5, 5), encodeLogRecord(ents(5, 6, 1))));
  t.match(err, corrupt({ groupId: 5, index: 5 }, /group 5: log entry 5 is stored twice/));
});

t.test('a log that does not start right after the snapshot is corrupt', async (t) => {
  const err = await openDamaged(t, (db) => db.del(logKey(5, 1)));
  t.match(err, corrupt({ groupId: 5, index: 1 }, /group 5: log entry 1 is missing/));
  const after = await openDamaged(t, async (db) => {
    await db
      .batch()
      .del(logKey(8, 5))
      .put(logKey(8, 6), encodeLogRecord([ent(6, 2)]))
      .write();
  });
  t.match(after, corrupt({ groupId: 8, index: 5 }, /group 8: log entry 5 is missing/));
  const covered = await openDamaged(t, (db) => db.put(logKey(8, 4), encodeLogRecord([ent(4, 2)])));
  t.match(covered, corrupt({ groupId: 8, index: 4 }, /log entry 4 is covered by the snapshot/));
});

t.test('a record under the wrong key is detected', async (t) => {
  const err = await openDamaged(t, (db) => db.put(logKey(5, 7), encodeLogRecord(ents(8, 10, 1))));
  t.match(err, corrupt({ groupId: 5, index: 7 }, /log key 7 holds a record from entry 8/));
});

t.test('terms going down inside a log are corrupt', async (t) => {
  const err = await openDamaged(t, async (db) => {
    await db.put(logKey(5, 7), encodeLogRecord([ent(7, 1), ent(8, 1), ent(9, 3), ent(10, 1)]));
  });
  t.match(err, corrupt({ groupId: 5, index: 10 }, /log entry 10 has term 1, below 3/));
});

t.test('a hard state commit outside [snapshot, last] is corrupt', async (t) => {
  const high = await openDamaged(t, (db) => db.put(hardStateKey(5), encodeHardState(hs(1, 11))));
  t.match(
    high,
    corrupt({ groupId: 5, index: 11 }, /hard state commit 11 outside \[snapshot 0, last 10\]/),
  );
  const low = await openDamaged(t, (db) => db.put(hardStateKey(8), encodeHardState(hs(2, 3))));
  t.match(low, corrupt({ groupId: 8, index: 3 }, /commit 3 outside \[snapshot 4, last 6\]/));
});

t.test('a missing snapshot chunk is corrupt', async (t) => {
  const err = await openDamaged(t, (db) => db.del(snapshotChunkKey(8, 1)));
  t.match(err, corrupt({ groupId: 8, index: 4 }, /snapshot 4 has 1 chunks, its meta says 2/));
  const first = await openDamaged(t, (db) => db.del(snapshotChunkKey(8, 0)));
  t.match(first, corrupt({ groupId: 8, chunk: 0 }, /snapshot chunk 0 is missing/));
  const short = await openDamaged(t, (db) => db.put(snapshotChunkKey(8, 1), new Uint8Array(3)));
  t.match(short, corrupt({ groupId: 8, chunk: 1 }, /chunk 1 has 3 bytes, not 10/));
});

t.test('state of a group without its group record is corrupt', async (t) => {
  const err = await openDamaged(t, (db) => db.del(groupKey(5)));
  t.match(err, corrupt({ groupId: 5 }, /group 5: has stored state but no group record/));
});

t.test('a key of no known kind is corrupt', async (t) => {
  const err = await openDamaged(t, (db) => db.put(Uint8Array.of(0x01, 2, 3), Uint8Array.of(0)));
  t.match(err, { code: 'STORAGE_CORRUPT', message: /unknown key 0x010203/ });
  const short = await openDamaged(t, (db) => db.put(logKey(5, 3).subarray(0, 9), encode(1)));
  t.match(short, { code: 'STORAGE_CORRUPT', message: /unknown key 0x4c/ });
});

t.test('a LevelDB that is not a node store is refused', async (t) => {
  const dir = scratchDir(t);
  const db = new ClassicLevel(dir);
  await db.put('hello', 'world');
  await db.close();
  await t.rejects(NodeStore.open(dir), {
    name: 'StorageError',
    code: 'STORAGE_UNSUPPORTED_FORMAT',
    message: /not a tickraft node store/,
  });
  const other = await openDamaged(t, (db) =>
    db.put(formatKey(), encode({ store: 'tickraft-node-store', layout: 3 })),
  );
  t.match(other, {
    code: 'STORAGE_UNSUPPORTED_FORMAT',
    message: /layout 3; this build reads 1 and 2/,
  });
});

t.test('after a failed open the directory is released', async (t) => {
  const dir = scratchDir(t);
  await healthyStore(t, dir);
  const raw = await openRaw(t, dir);
  await raw.del(logKey(5, 4));
  await raw.close();
  await t.rejects(NodeStore.open(dir), { code: 'STORAGE_CORRUPT' });
  const again = await openRaw(t, dir);
  await again.put(logKey(5, 4), encodeLogRecord(ents(4, 6, 1)));
  await again.close();
  const store = await openStore(t, dir);
  t.equal(store.group(5)?.lastIndex(), 10, 'repaired by hand, it opens');
});
