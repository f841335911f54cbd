// Log records: runs of consecutive entries, one per group and commit (log-record.ts). Goal: the
// codec round-trips exactly and refuses damaged bytes naming the entry; through the store, the
// records on disk are exactly what the log needs (a truncation or a compaction inside a record
// rewrites it, whole records are deleted, big commits are cut at LOG_RECORD_BYTES_TARGET), and
// what a reopened store finds equals what the store reported; a store of layout 1 (one entry per
// record) is read and upgraded. Method: codec tables, then a real store whose raw keys and
// record contents are read back with classic-level after close.
import t, { type Test } from 'tap';
import { encode } from '../../../src/base/codec.js';
import type { Entry } from '../../../src/raft/messages.js';
import { decodeKey, formatKey, groupKey, hardStateKey, logKey } from '../../../src/storage/keys.js';
import {
  LOG_RECORD_BYTES_TARGET,
  LOG_RECORD_VERSION,
  decodeLogRecord,
  encodeLogRecord,
  encodeLogRecordInto,
  logRecordBytes,
} from '../../../src/storage/log-record.js';
import type { NodeStore } from '../../../src/storage/node-store.js';
import {
  decodeFormat,
  encodeEntry,
  encodeGroupRecord,
  encodeHardState,
} from '../../../src/storage/records.js';
import {
  allKeys,
  dumpGroup,
  ent,
  ents,
  hs,
  openRaw,
  openStore,
  scratchDir,
  type RawDb,
} from './helpers.js';

const plain = (es: readonly Entry[]) =>
  es.map((e) => ({ index: e.index, term: e.term, type: e.type, data: [...e.data] }));

t.test('a run of entries round-trips; many records share one buffer', (t) => {
  const numbers = [1, 127, 128, 16_384, 2 ** 32 + 5, 2 ** 53 - 40];
  let bad = 0;
  let cases = 0;
  for (const first of numbers) {
    for (const count of [1, 2, 5, 33]) {
      const entries: Entry[] = [];
      for (let k = 0; k < count; k++) {
        const size = [0, 1, 127, 128, 300][k % 5]!;
        const data = Uint8Array.from({ length: size }, (_, i) => (i * 7 + k) & 0xff);
        const term = [0, 1, 300, 2 ** 40][Math.min(3, k >> 3)]!;
        entries.push({
          index: first + k,
          term,
          type: k % 3 === 0 ? 'conf-change' : 'normal',
          data,
        });
      }
      const bytes = logRecordBytes(entries, 0, count);
      // Two copies side by side in one buffer, as putRecords writes them.
      const buffer = new Uint8Array(3 + 2 * bytes);
      const mid = encodeLogRecordInto(buffer, 3, entries, 0, count);
      const end = encodeLogRecordInto(buffer, mid, entries, 0, count);
      if (mid !== 3 + bytes || end !== buffer.byteLength) bad++;
      for (const record of [
        buffer.subarray(3, mid),
        buffer.subarray(mid),
        encodeLogRecord(entries),
      ]) {
        if (record[0] !== LOG_RECORD_VERSION) bad++;
        if (JSON.stringify(plain(decodeLogRecord(record))) !== JSON.stringify(plain(entries)))
          bad++;
      }
      cases++;
    }
  }
  t.equal(bad, 0, `${cases} runs round-trip, alone and packed in one buffer`);
  // A part of an array, as a partial record is rewritten.
  const some = ents(5, 9, 2);
  const out = new Uint8Array(logRecordBytes(some, 1, 4));
  encodeLogRecordInto(out, 0, some, 1, 4);
  t.same(plain(decodeLogRecord(out)), plain(some.slice(1, 4)));
  t.end();
});

t.test('records of layout 1 (one entry each) are read as runs of one', (t) => {
  t.same(plain(decodeLogRecord(encodeEntry(ent(7, 3)))), plain([ent(7, 3)]));
  const tuple = decodeLogRecord(encode([3, 2 ** 40, 1, Uint8Array.of(4, 5)]));
  t.same(plain(tuple), [{ index: 2 ** 40, term: 3, type: 'conf-change', data: [4, 5] }]);
  t.end();
});

t.test('damaged runs are refused with a CodecError naming the entry', (t) => {
  const good = encodeLogRecord([ent(300, 2, 2), ent(301, 2, 1)]);
  // version | first 300 (2 bytes) | count 2 | term 2 | type 0 | length 2 | 2 bytes | term 2 | type 0
  // | length 1 | 1 byte
  t.strictSame(good.length, 1 + 2 + 1 + (3 + 2) + (3 + 1));
  const patched = (at: number, byte: number) => {
    const b = good.slice();
    b[at] = byte;
    return b;
  };
  const cases: [string, Uint8Array, string, RegExp][] = [
    ['empty', new Uint8Array(), 'CODEC_MALFORMED', /empty/],
    ['unknown version', patched(0, 4), 'CODEC_UNKNOWN_VERSION', /version 4/],
    ['first index 0', Uint8Array.of(3, 0, 1, 1, 0, 0), 'CODEC_MALFORMED', /first index 0/],
    ['no entries', Uint8Array.of(3, 1, 0), 'CODEC_MALFORMED', /holds no entry/],
    ['count past the bytes', patched(3, 100), 'CODEC_MALFORMED', /count 100 exceeds/],
    ['unknown type', patched(10, 7), 'CODEC_MALFORMED', /entry 301: unknown type code 7/],
    ['trailing byte', Uint8Array.of(...good, 0), 'CODEC_MALFORMED', /1 bytes follow its 2/],
    ['length longer', patched(6, 3), 'CODEC_MALFORMED', /from 300: entry 301/],
    [
      'past 2^53',
      Uint8Array.of(3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 2, 1, 0, 0, 1, 0, 0),
      'CODEC_MALFORMED',
      /pass 2\^53/,
    ],
  ];
  for (let cut = 1; cut < good.length; cut++) {
    cases.push([`cut at ${cut}`, good.subarray(0, cut), 'CODEC_MALFORMED', /truncated/]);
  }
  for (const [name, bytes, code, message] of cases) {
    t.throws(() => decodeLogRecord(bytes), { name: 'CodecError', code, message }, name);
  }
  t.end();
});

/** The raw log records of a group: [first index, [entry index, term]...] per record. */
async function records(db: RawDb, groupId: number): Promise<[number, number[][]][]> {
  const out: [number, number[][]][] = [];
  for await (const [key, value] of db.iterator()) {
    const k = decodeKey(key);
    if (k?.kind !== 'log' || k.groupId !== groupId) continue;
    out.push([k.first, decodeLogRecord(value).map((e) => [e.index, e.term])]);
  }
  return out;
}

const span = (lo: number, hi: number, term: number): number[][] =>
  ents(lo, hi, term).map((e) => [e.index, e.term]);

/** Closes the store, checks its raw records, reopens it and checks it reads back the same. */
async function checkDisk(
  t: Test,
  store: NodeStore,
  groupId: number,
  expected: [number, number[][]][],
  what: string,
): Promise<NodeStore> {
  const before = dumpGroup(store.group(groupId)!);
  await store.close();
  const raw = await openRaw(t, store.dir);
  t.same(await records(raw, groupId), expected, what);
  await raw.close();
  const again = await openStore(t, store.dir);
  t.same(dumpGroup(again.group(groupId)!), before, `${what}: reopened, the same log`);
  return again;
}

t.test(
  'one record per group and commit; conflicting tails rewrite or delete records',
  async (t) => {
    let store = await openStore(t, scratchDir(t));
    await store.createGroup(1, undefined);
    await store.commit([{ groupId: 1, entries: ents(1, 4, 1), hardState: hs(1, 2) }]);
    await store.commit([{ groupId: 1, entries: ents(5, 8, 1) }]);
    await store.commit([{ groupId: 1, entries: ents(9, 12, 1) }]);
    store = await checkDisk(
      t,
      store,
      1,
      [
        [1, span(1, 4, 1)],
        [5, span(5, 8, 1)],
        [9, span(9, 12, 1)],
      ],
      'three commits, three records',
    );

    // From 7: the record from 5 is rewritten as 5..6, the record from 9 is deleted.
    await store.commit([{ groupId: 1, entries: ents(7, 7, 2), hardState: hs(2, 2) }]);
    store = await checkDisk(
      t,
      store,
      1,
      [
        [1, span(1, 4, 1)],
        [5, span(5, 6, 1)],
        [7, span(7, 7, 2)],
      ],
      'a tail inside a record',
    );

    // From 5, exactly at a record's start: it is replaced, the records after it are deleted.
    await store.commit([{ groupId: 1, entries: ents(5, 6, 3), hardState: hs(3, 2) }]);
    store = await checkDisk(
      t,
      store,
      1,
      [
        [1, span(1, 4, 1)],
        [5, span(5, 6, 3)],
      ],
      'a tail at a record start',
    );

    // From 3, across two records: 1..2 stays (rewritten), 3.. is new.
    await store.commit([{ groupId: 1, entries: ents(3, 3, 4), hardState: hs(4, 2) }]);
    await checkDisk(
      t,
      store,
      1,
      [
        [1, span(1, 2, 1)],
        [3, span(3, 3, 4)],
      ],
      'a tail across records',
    );
  },
);

t.test('compaction deletes covered records and rewrites the one it cuts', async (t) => {
  const snap = (index: number, term: number) => ({
    meta: {
      index,
      term,
      confState: {
        voters: ['n1'],
        votersOutgoing: [],
        learners: [],
        learnersNext: [],
        autoLeave: false,
      },
    },
    data: Uint8Array.of(index),
  });
  let store = await openStore(t, scratchDir(t));
  await store.createGroup(2, undefined);
  await store.commit([{ groupId: 2, entries: ents(1, 4, 1) }]);
  await store.commit([{ groupId: 2, entries: ents(5, 8, 1) }]);
  await store.commit([{ groupId: 2, entries: ents(9, 12, 1), hardState: hs(1, 12) }]);

  await store.saveSnapshot(2, snap(4, 1));
  store = await checkDisk(
    t,
    store,
    2,
    [
      [5, span(5, 8, 1)],
      [9, span(9, 12, 1)],
    ],
    'at a record end: nothing to rewrite',
  );
  await store.saveSnapshot(2, snap(10, 1));
  store = await checkDisk(t, store, 2, [[11, span(11, 12, 1)]], 'inside a record: rewritten');
  await store.saveSnapshot(2, snap(12, 1));
  store = await checkDisk(t, store, 2, [], 'at the last index: no record left');
  t.same([store.group(2)!.firstIndex(), store.group(2)!.lastIndex()], [13, 12]);
  await store.commit([{ groupId: 2, entries: ents(13, 14, 1) }]);
  await checkDisk(t, store, 2, [[13, span(13, 14, 1)]], 'appends after a full compaction');
});

t.test('a big commit is cut into records of about LOG_RECORD_BYTES_TARGET', async (t) => {
  let store = await openStore(t, scratchDir(t));
  await store.createGroup(3, undefined);
  const size = 10_000;
  const perRecord = Math.floor(LOG_RECORD_BYTES_TARGET / (size + 4));
  const count = perRecord * 2 + 3;
  await store.commit([{ groupId: 3, entries: ents(1, count, 1, size), hardState: hs(1, 1) }]);
  const starts = [1, 1 + perRecord, 1 + 2 * perRecord];
  store = await checkDisk(
    t,
    store,
    3,
    starts.map((s, k) => [s, span(s, k < 2 ? s + perRecord - 1 : count, 1)]),
    `${count} entries of ${size} B in ${starts.length} records`,
  );
  // A tail inside the second record, then a compaction inside the first.
  await store.commit([{ groupId: 3, entries: ents(perRecord + 5, perRecord + 5, 2, size) }]);
  await store.commit([{ groupId: 3, entries: [], hardState: hs(2, perRecord + 5) }]);
  await store.saveSnapshot(3, {
    meta: { index: 2, term: 1, confState: store.group(3)!.initialState().confState },
    data: new Uint8Array(),
  });
  await checkDisk(
    t,
    store,
    3,
    [
      [3, span(3, perRecord, 1)],
      [1 + perRecord, span(1 + perRecord, perRecord + 4, 1)],
      [perRecord + 5, span(perRecord + 5, perRecord + 5, 2)],
    ],
    'cut records rewritten',
  );
});

t.test('a store of layout 1 (one entry per record) is read and upgraded', async (t) => {
  const dir = scratchDir(t);
  const raw = await openRaw(t, dir);
  const batch = raw.batch();
  batch.put(formatKey(), encode({ store: 'tickraft-node-store', layout: 1 }));
  batch.put(groupKey(4), encodeGroupRecord({ bootstrap: undefined }));
  batch.put(hardStateKey(4), encodeHardState(hs(1, 3)));
  // Entry 1 as the oldest msgpack tuple, 2..6 as version 2 binary records.
  batch.put(logKey(4, 1), encode([1, 1, 0, ent(1, 1).data]));
  for (const e of ents(2, 6, 1)) batch.put(logKey(4, e.index), encodeEntry(e));
  await batch.write();
  await raw.close();

  const store = await openStore(t, dir);
  t.same(
    store
      .group(4)!
      .entries(1, 7, Infinity)!
      .map((e) => [e.index, e.term, [...e.data]]),
    ents(1, 6, 1).map((e) => [e.index, e.term, [...e.data]]),
  );
  // A tail from 5 replaces single-entry records; a compaction to 2 deletes two of them.
  await store.commit([{ groupId: 4, entries: ents(5, 7, 2), hardState: hs(2, 4) }]);
  await store.saveSnapshot(4, {
    meta: { index: 2, term: 1, confState: store.group(4)!.initialState().confState },
    data: new Uint8Array(),
  });
  const again = await checkDisk(
    t,
    store,
    4,
    [
      [3, span(3, 3, 1)],
      [4, span(4, 4, 1)],
      [5, span(5, 7, 2)],
    ],
    'old records kept as runs of one, new ones as runs',
  );
  await again.close();
  const raw2 = await openRaw(t, dir);
  t.same(decodeFormat((await raw2.get(formatKey()))!), {
    store: 'tickraft-node-store',
    layout: 2,
  });
  t.ok((await allKeys(raw2)).length > 0);
});
