// The value encodings under the store's keys: base/codec.ts (msgpackr behind a version byte),
// the binary log entry record, and the record codecs of storage/records.ts. Goal: every record
// round-trips exactly, and bytes that are not a record of the expected shape and version throw a
// CodecError instead of decoding into something plausible. Method: round trips of representative
// values, then a table of damaged inputs (wrong version, truncation, trailing bytes, wrong field
// types, out-of-range numbers) with the expected code.
import t from 'tap';
import { CODEC_VERSION, CodecError, decode, encode } from '../../../src/base/codec.js';
import type { Entry } from '../../../src/raft/messages.js';
import {
  ENTRY_RECORD_VERSION,
  decodeEntry,
  decodeFormat,
  decodeGroupRecord,
  decodeHardState,
  decodeSnapshotMeta,
  encodeEntry,
  encodeEntryInto,
  entryRecordBytes,
  encodeGroupRecord,
  encodeHardState,
  encodeSnapshotMeta,
  type SnapshotMetaRecord,
} from '../../../src/storage/records.js';

t.test('codec: a leading version byte, then msgpack; round trip', (t) => {
  const value = { a: 1, b: 'x', c: [1, 2, 3], d: new Uint8Array([9, 8]), e: null, f: 2 ** 53 - 1 };
  const bytes = encode(value);
  t.equal(bytes[0], CODEC_VERSION);
  t.same(decode(bytes), value);
  t.end();
});

t.test('codec: unknown versions and malformed bytes throw CodecError', (t) => {
  const good = encode({ a: 1 });
  const wrongVersion = good.slice();
  wrongVersion[0] = CODEC_VERSION + 1;
  const cases: [string, Uint8Array, string][] = [
    ['empty', new Uint8Array(), 'CODEC_MALFORMED'],
    ['unknown version', wrongVersion, 'CODEC_UNKNOWN_VERSION'],
    ['truncated', good.subarray(0, good.length - 1), 'CODEC_MALFORMED'],
    ['trailing bytes', Uint8Array.of(...good, 0x01), 'CODEC_MALFORMED'],
    ['version byte only', Uint8Array.of(CODEC_VERSION), 'CODEC_MALFORMED'],
  ];
  for (const [name, bytes, code] of cases) {
    t.throws(() => decode(bytes), { name: 'CodecError', code }, name);
  }
  t.end();
});

t.test('records round-trip', (t) => {
  const e: Entry = { index: 2 ** 40, term: 7, type: 'conf-change', data: Uint8Array.of(1, 2, 3) };
  const back = decodeEntry(encodeEntry(e));
  t.same({ ...back, data: [...back.data] }, { ...e, data: [1, 2, 3] });
  t.same(decodeHardState(encodeHardState({ term: 3, vote: 'n2', commit: 9 })), {
    term: 3,
    vote: 'n2',
    commit: 9,
  });
  const meta: SnapshotMetaRecord = {
    meta: {
      index: 10,
      term: 2,
      confState: {
        voters: ['n1', 'n2'],
        votersOutgoing: ['n3'],
        learners: ['n4'],
        learnersNext: [],
        autoLeave: true,
      },
    },
    chunkCount: 3,
    dataBytes: 2_500_000,
  };
  t.same(decodeSnapshotMeta(encodeSnapshotMeta(meta)), meta);
  t.same(decodeGroupRecord(encodeGroupRecord({ bootstrap: undefined })), { bootstrap: undefined });
  t.same(decodeGroupRecord(encodeGroupRecord({ bootstrap: { voters: ['a'], learners: ['b'] } })), {
    bootstrap: { voters: ['a'], learners: ['b'] },
  });
  t.end();
});

t.test('log entries: a binary record, many per buffer, exact round trips', (t) => {
  const numbers = [0, 1, 127, 128, 16_383, 16_384, 2 ** 31, 2 ** 32 + 5, 2 ** 53 - 1];
  const entries: Entry[] = [];
  for (const term of numbers) {
    for (const index of numbers.filter((n) => n >= 1)) {
      for (const size of [0, 1, 127, 128, 300]) {
        const data = Uint8Array.from({ length: size }, (_, i) => (i * 7 + index) & 0xff);
        entries.push({ term, index, type: size % 2 === 0 ? 'normal' : 'conf-change', data });
      }
    }
  }
  const total = entries.reduce((n, e) => n + entryRecordBytes(e), 0);
  const buffer = new Uint8Array(total);
  let at = 0;
  let bad = 0;
  for (const e of entries) {
    const start = at;
    at = encodeEntryInto(buffer, at, e);
    const record = buffer.subarray(start, at);
    if (record[0] !== ENTRY_RECORD_VERSION) bad++;
    const back = decodeEntry(record);
    const again = decodeEntry(encodeEntry(e));
    for (const b of [back, again]) {
      if (
        b.term !== e.term ||
        b.index !== e.index ||
        b.type !== e.type ||
        !Buffer.from(b.data).equals(Buffer.from(e.data))
      ) {
        bad++;
      }
    }
  }
  t.equal(at, total, 'entryRecordBytes is exact');
  t.equal(bad, 0, `${entries.length} entries round-trip, alone and packed in one buffer`);
  t.end();
});

t.test('log entries written by earlier builds (msgpack 4-tuples) are still read', (t) => {
  const back = decodeEntry(encode([3, 2 ** 40, 1, Uint8Array.of(4, 5)]));
  t.same(
    { ...back, data: [...back.data] },
    {
      term: 3,
      index: 2 ** 40,
      type: 'conf-change',
      data: [4, 5],
    },
  );
  t.end();
});

t.test('damaged binary log entry records are refused', (t) => {
  const good = encodeEntry({ term: 300, index: 70_000, type: 'normal', data: Uint8Array.of(1, 2) });
  // version | term 300 (2 bytes) | index 70,000 (3 bytes) | type | length 2 | data
  t.strictSame([...good], [2, 0xac, 0x02, 0xf0, 0xa2, 0x04, 0, 2, 1, 2]);
  const patched = (at: number, byte: number) => {
    const b = good.slice();
    b[at] = byte;
    return b;
  };
  const cases: [string, Uint8Array, string, RegExp][] = [
    ['empty', new Uint8Array(), 'CODEC_MALFORMED', /empty/],
    ['unknown version', patched(0, 3), 'CODEC_UNKNOWN_VERSION', /version 3/],
    ['unknown type', patched(6, 7), 'CODEC_MALFORMED', /type code 7/],
    ['index 0', Uint8Array.of(2, 1, 0, 0, 0), 'CODEC_MALFORMED', /bad index 0/],
    ['trailing byte', Uint8Array.of(...good, 0), 'CODEC_MALFORMED', /followed by more bytes/],
    ['data cut short', good.subarray(0, good.length - 1), 'CODEC_MALFORMED', /truncated/],
    ['length longer than data', patched(7, 3), 'CODEC_MALFORMED', /truncated/],
    ['length shorter than data', patched(7, 1), 'CODEC_MALFORMED', /followed by more bytes/],
    [
      'term of 2^53',
      Uint8Array.of(2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10, 1, 0, 0),
      'CODEC_MALFORMED',
      /term .* not below 2\^53/,
    ],
    [
      'index varint of 9 bytes',
      Uint8Array.of(2, 1, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0, 0),
      'CODEC_MALFORMED',
      /index is longer than 8 bytes/,
    ],
    ['term not shortest', Uint8Array.of(2, 0x81, 0x00, 1, 0, 0), 'CODEC_MALFORMED', /shortest/],
  ];
  for (let cut = 1; cut < good.length; cut++) {
    cases.push([`cut at ${cut}`, good.subarray(0, cut), 'CODEC_MALFORMED', /truncated/]);
  }
  for (const [name, bytes, code, message] of cases) {
    t.throws(() => decodeEntry(bytes), { name: 'CodecError', code, message }, name);
  }
  t.end();
});

t.test('records of the wrong shape are refused', (t) => {
  const cases: [string, () => unknown][] = [
    ['entry as a map', () => decodeEntry(encode({ term: 1, index: 1 }))],
    ['entry with 3 fields', () => decodeEntry(encode([1, 1, 0]))],
    ['entry index 0', () => decodeEntry(encode([1, 0, 0, new Uint8Array()]))],
    ['entry negative term', () => decodeEntry(encode([-1, 1, 0, new Uint8Array()]))],
    ['entry unknown type', () => decodeEntry(encode([1, 1, 9, new Uint8Array()]))],
    ['entry data a string', () => decodeEntry(encode([1, 1, 0, 'x']))],
    ['hard state vote a number', () => decodeHardState(encode({ term: 1, vote: 2, commit: 0 }))],
    ['hard state fraction', () => decodeHardState(encode({ term: 1.5, vote: '', commit: 0 }))],
    ['hard state an array', () => decodeHardState(encode([1, '', 0]))],
    ['meta without confState', () => decodeSnapshotMeta(encode({ index: 1, term: 1 }))],
    ['group record bootstrap 1', () => decodeGroupRecord(encode({ bootstrap: 1 }))],
    ['format of something else', () => decodeFormat(encode({ store: 'other', layout: 1 }))],
    ['a lone msgpack 0xc1 byte', () => decodeEntry(Uint8Array.of(CODEC_VERSION, 0xc1))],
  ];
  for (const [name, fn] of cases) t.throws(fn, CodecError, name);
  t.end();
});
