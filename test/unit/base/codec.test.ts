// The record codec: what it encodes decodes back, and a large record (a snapshot) does not make
// every later small record (a log entry) pin a block the size of the large one.
import t from 'tap';
import { decode, encode } from '../../../src/base/codec.js';

t.test('a large record gets a block of its own; records before and after stay intact', (t) => {
  const before = encode({ entry: 'before', n: 1 });
  const big = encode({ data: new Uint8Array(4 * 1024 * 1024).fill(7) });
  const after = encode({ entry: 'after', n: 2 });
  t.ok(
    after.buffer.byteLength < 1024 * 1024,
    `a small record after it sits in a small block (${after.buffer.byteLength} B)`,
  );
  t.not(after.buffer, big.buffer, 'not in the large record’s block');
  const more = Array.from({ length: 2000 }, (_, i) => encode({ i }));
  t.same(decode(before), { entry: 'before', n: 1 });
  t.same(decode(after), { entry: 'after', n: 2 });
  t.same(
    more.map((m) => (decode(m) as { i: number }).i),
    Array.from({ length: 2000 }, (_, i) => i),
    'records after the switch are never written over',
  );
  const data = (decode(big) as { data: Uint8Array }).data;
  t.equal(data.byteLength, 4 * 1024 * 1024);
  t.ok(
    data.every((b) => b === 7),
    'the large record is intact',
  );
  t.end();
});
