// The value encodings under the store's keys: base/codec.ts (msgpackr behind a version byte) and
// the record codecs of storage/records.ts. Goal: every record round-trips exactly, and bytes that
// are not a record of the expected shape and version throw a CodecError instead of decoding into
// something plausible. Method: round trips of representative values, then a table of damaged
// inputs (wrong version, truncation, trailing bytes, wrong field types) with the expected code.
import t from 'tap';
import { CODEC_VERSION, CodecError, decode, encode } from '../../../src/base/codec.js';
import type { Entry } from '../../../src/raft/messages.js';
import {
  decodeEntry,
  decodeFormat,
  decodeGroupRecord,
  decodeHardState,
  decodeSnapshotMeta,
  encodeEntry,
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
