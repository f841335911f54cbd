// keys.ts owns the byte layout of the node's LevelDB. What the rest of the store relies on:
// LevelDB's bytewise order equals (kind, group, index) order, so a group's log is one range
// sorted by index; every key decodes back to what built it; the per-group ranges hold exactly
// that group's keys; and bad ids are refused. Method: build keys from a spread of group ids and
// indexes (including u32 and 2^32 edges), sort them as LevelDB does (Buffer.compare) and check
// the order and the round trip.
import t from 'tap';
import { AssertionError } from '../../../src/base/assert.js';
import {
  GROUP_ID_MAX,
  decodeKey,
  describeKey,
  logKey,
  logRange,
  formatKey,
  groupKey,
  groupKindRange,
  groupRanges,
  hardStateKey,
  snapshotChunkKey,
  snapshotMetaKey,
  writeLogKey,
  LOG_KEY_BYTES_TOTAL,
  type KeyRange,
} from '../../../src/storage/keys.js';

const cmp = (a: Uint8Array, b: Uint8Array): number => Buffer.compare(a, b);
const inRange = (k: Uint8Array, r: KeyRange): boolean => cmp(k, r.gte) >= 0 && cmp(k, r.lt) < 0;

const groups = [0, 1, 2, 255, 256, 65_536, 0x7fff_ffff, 0x8000_0000, GROUP_ID_MAX];
const indexes = [1, 2, 255, 256, 65_535, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 53 - 1];

t.test('log record keys sort by (group, first index), as LevelDB compares bytes', (t) => {
  const pairs = groups.flatMap((g) => indexes.map((i) => [g, i] as const));
  const shuffled = [...pairs].reverse();
  const sorted = shuffled
    .map(([g, i]) => logKey(g, i))
    .sort(cmp)
    .map((k) => decodeKey(k));
  t.same(
    sorted,
    pairs.map(([groupId, first]) => ({ kind: 'log', groupId, first })),
  );
  t.end();
});

t.test('snapshot chunk keys sort by (group, chunk)', (t) => {
  const keys = [snapshotChunkKey(2, 0), snapshotChunkKey(1, 300), snapshotChunkKey(1, 2)];
  t.same(
    keys.sort(cmp).map((k) => decodeKey(k)),
    [
      { kind: 'snapshot-chunk', groupId: 1, chunk: 2 },
      { kind: 'snapshot-chunk', groupId: 1, chunk: 300 },
      { kind: 'snapshot-chunk', groupId: 2, chunk: 0 },
    ],
  );
  t.end();
});

t.test('every key kind decodes to what built it', (t) => {
  t.same(decodeKey(formatKey()), { kind: 'format' });
  for (const g of groups) {
    t.same(decodeKey(groupKey(g)), { kind: 'group', groupId: g });
    t.same(decodeKey(hardStateKey(g)), { kind: 'hard-state', groupId: g });
    t.same(decodeKey(snapshotMetaKey(g)), { kind: 'snapshot-meta', groupId: g });
    t.same(decodeKey(snapshotChunkKey(g, 7)), { kind: 'snapshot-chunk', groupId: g, chunk: 7 });
    for (const i of indexes) t.same(decodeKey(logKey(g, i)), { kind: 'log', groupId: g, first: i });
  }
  t.equal(describeKey(logKey(7, 42)), 'log g7 from i42');
  t.equal(describeKey(Uint8Array.of(0x01, 0x02)), '0x0102');
  t.end();
});

t.test('keys of another layout do not decode', (t) => {
  t.equal(decodeKey(new Uint8Array()), undefined, 'empty');
  t.equal(decodeKey(Uint8Array.of(0x00, 0, 0, 0, 1)), undefined, 'unknown kind byte');
  t.equal(decodeKey(groupKey(1).subarray(0, 4)), undefined, 'short group key');
  t.equal(decodeKey(logKey(1, 5).subarray(0, 12)), undefined, 'short log key');
  t.equal(decodeKey(Uint8Array.of(0x46, 0)), undefined, 'format key with a tail');
  const over = logKey(1, 1);
  over.fill(0xff, 5);
  t.equal(decodeKey(over), undefined, 'index past 2^53');
  const zero = logKey(1, 1);
  zero[12] = 0;
  t.equal(decodeKey(zero), undefined, 'index 0');
  t.end();
});

t.test('per-group ranges hold exactly that group', (t) => {
  for (const g of [0, 5, GROUP_ID_MAX]) {
    const ranges = groupRanges(g);
    const own = [
      groupKey(g),
      hardStateKey(g),
      snapshotMetaKey(g),
      snapshotChunkKey(g, 0),
      snapshotChunkKey(g, 2 ** 32 - 1),
      logKey(g, 1),
      logKey(g, 2 ** 53 - 1),
    ];
    for (const k of own)
      t.ok(
        ranges.some((r) => inRange(k, r)),
        `${describeKey(k)} is covered`,
      );
    const others = [g - 1, g + 1]
      .filter((x) => x >= 0 && x <= GROUP_ID_MAX)
      .flatMap((x) => [groupKey(x), hardStateKey(x), logKey(x, 1), snapshotChunkKey(x, 0)]);
    for (const k of [...others, formatKey()]) {
      t.notOk(
        ranges.some((r) => inRange(k, r)),
        `${describeKey(k)} is outside group ${g}`,
      );
    }
  }
  const r = groupKindRange('log', 3);
  t.ok(inRange(logKey(3, 2 ** 53 - 1), r) && !inRange(logKey(4, 1), r));
  const er = logRange(3, 5, 8);
  t.same(
    [4, 5, 7, 8].map((i) => inRange(logKey(3, i), er)),
    [false, true, true, false],
    'logRange is [lo, hi)',
  );
  t.end();
});

t.test('log keys written into a shared buffer are the bytes of logKey', (t) => {
  const pairs = groups.flatMap((g) => indexes.map((i) => [g, i] as const));
  const out = new Uint8Array(3 + pairs.length * LOG_KEY_BYTES_TOTAL).fill(0xee);
  pairs.forEach(([g, i], n) => writeLogKey(out, 3 + n * LOG_KEY_BYTES_TOTAL, g, i));
  let bad = 0;
  pairs.forEach(([g, i], n) => {
    const at = 3 + n * LOG_KEY_BYTES_TOTAL;
    if (cmp(out.subarray(at, at + LOG_KEY_BYTES_TOTAL), logKey(g, i)) !== 0) bad++;
  });
  t.equal(bad, 0, `${pairs.length} keys`);
  t.same([...out.subarray(0, 3)], [0xee, 0xee, 0xee], 'nothing written before the offset');
  t.throws(() => writeLogKey(out, 0, 1, 0), AssertionError);
  t.throws(() => writeLogKey(out, 0, GROUP_ID_MAX + 1, 1), AssertionError);
  t.end();
});

t.test('ids and indexes outside the layout are refused', (t) => {
  t.throws(() => groupKey(-1), AssertionError);
  t.throws(() => groupKey(GROUP_ID_MAX + 1), AssertionError);
  t.throws(() => groupKey(1.5), AssertionError);
  t.throws(() => logKey(1, 0), AssertionError);
  t.throws(() => logKey(1, 2 ** 53), AssertionError);
  t.throws(() => snapshotChunkKey(1, -1), AssertionError);
  t.end();
});
