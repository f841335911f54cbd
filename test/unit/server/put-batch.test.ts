// DebugService parses PutBatch requests by hand (src/server/put-batch.ts). Goal: for any
// request proto-loader writes from proto/debug.proto, every put yields exactly the command and
// shard hash of the generic path (decode the strings, encodeKvPut, hashShardKey), and bytes that
// are not a PutBatchRequest are refused. Method: seeded random requests (ASCII, non-ASCII,
// empty and long strings) and hand-made edge cases.
import { fileURLToPath } from 'node:url';
import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { hashShardKey } from '../../../src/placement/hash.js';
import { decodeKvPut, encodeKvPut } from '../../../src/server/kv-state-machine.js';
import {
  PutBatchDecodeError,
  parsePutBatchRequest,
  putCommand,
  putCount,
  type PutCommand,
} from '../../../src/server/put-batch.js';

const raw = loadSync(fileURLToPath(new URL('../../../proto/debug.proto', import.meta.url)), {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});
const requestType = raw['tickraft.v1.PutBatchRequest'] as MessageTypeDefinition<object, object>;

const pieces = ['a', 'key-', '7', 'x'.repeat(100), 'ñ', '€', '😀', ' ', ''];
function randString(r: SeededRand): string {
  let s = '';
  for (let n = r.int(6); n > 0; n--) s += pieces[r.int(pieces.length)];
  return s;
}

t.test('every put gives the command and hash of the generic path', (t) => {
  const r = new SeededRand(3);
  let checked = 0;
  for (let round = 0; round < 200; round++) {
    const puts = Array.from({ length: r.int(40) }, () => ({
      key: randString(r),
      value: randString(r),
    }));
    const req = parsePutBatchRequest(requestType.serialize({ puts }));
    t.equal(putCount(req), puts.length);
    const out: PutCommand = { hash: 0, command: new Uint8Array() };
    puts.forEach((p, i) => {
      putCommand(req, i, out);
      const same =
        out.hash === hashShardKey(p.key) &&
        Buffer.from(out.command).equals(Buffer.from(encodeKvPut({ k: p.key, v: p.value }))) &&
        decodeKvPut(out.command).k === p.key &&
        decodeKvPut(out.command).v === p.value;
      if (!same) t.fail(`round ${round} put ${i}: ${JSON.stringify(p)}`);
      checked++;
    });
  }
  t.ok(checked > 1000, `${checked} puts checked`);
  t.end();
});

t.test('absent strings, unknown fields and repeated fields read as protobuf says', (t) => {
  const out: PutCommand = { hash: 0, command: new Uint8Array() };
  // puts { } (both strings absent); puts { value "v" key "k" unknown 7:"zz" key "k2" }; field 9.
  const bytes = Buffer.from([
    0x0a, 0x00, 0x0a, 0x0e, 0x12, 0x01, 0x76, 0x0a, 0x01, 0x6b, 0x3a, 0x02, 0x7a, 0x7a, 0x0a, 0x02,
    0x6b, 0x32, 0x48, 0x05,
  ]);
  const req = parsePutBatchRequest(bytes);
  t.equal(putCount(req), 2);
  t.same(decodeKvPut(putCommand(req, 0, out).command), { k: '', v: '' });
  t.equal(out.hash, hashShardKey(''));
  t.same(decodeKvPut(putCommand(req, 1, out).command), { k: 'k2', v: 'v' });
  t.end();
});

t.test('bytes that are not a PutBatchRequest are refused', (t) => {
  const good = requestType.serialize({ puts: [{ key: 'k', value: 'v' }] });
  const cases: [string, Buffer][] = [
    ['truncated', good.subarray(0, good.length - 1)],
    ['puts as a varint', Buffer.from([0x08, 0x01])],
    ['key as a varint', Buffer.from([0x0a, 0x02, 0x08, 0x01])],
    ['unterminated varint', Buffer.from([0x0a, 0x80])],
    ['group wire type', Buffer.from([0x0b])],
  ];
  for (const [what, bytes] of cases)
    t.throws(() => parsePutBatchRequest(bytes), PutBatchDecodeError, what);
  t.end();
});
