// Inflights bounds how many append messages (and how many entry bytes) a leader has in flight to
// one follower. The tests check the count and byte bounds, freeing by acknowledged index,
// reset, and the internal compaction of the FIFO; a seeded differential test then compares
// long random add/free sequences with a plain array model.
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { Inflights } from '../../../src/raft/inflights.js';

t.test('starts empty and not full', (t) => {
  const f = new Inflights(3, 100);
  t.equal(f.count, 0);
  t.equal(f.inflightBytes, 0);
  t.notOk(f.isFull());
  t.end();
});

t.test('fills up by message count', (t) => {
  const f = new Inflights(3, 0);
  f.add(1, 10);
  f.add(2, 10);
  t.notOk(f.isFull(), 'two of three');
  f.add(3, 10);
  t.ok(f.isFull(), 'three of three');
  t.equal(f.count, 3);
  t.equal(f.inflightBytes, 30);
  t.end();
});

t.test('fills up by bytes; maxBytes 0 means no byte bound', (t) => {
  const f = new Inflights(100, 50);
  f.add(1, 20);
  t.notOk(f.isFull());
  f.add(2, 29);
  t.notOk(f.isFull(), '49 < 50');
  f.add(3, 1);
  t.ok(f.isFull(), '50 >= 50');
  const g = new Inflights(100, 0);
  g.add(1, 1_000_000_000);
  t.notOk(g.isFull(), 'no byte bound');
  t.end();
});

t.test('freeLE frees every message up to an index and only those', (t) => {
  const f = new Inflights(10, 0);
  f.add(2, 5);
  f.add(4, 6);
  f.add(7, 7);
  f.freeLE(1);
  t.equal(f.count, 3, 'nothing at or below 1');
  f.freeLE(4);
  t.equal(f.count, 1, 'frees 2 and 4');
  t.equal(f.inflightBytes, 7);
  f.freeLE(5);
  t.equal(f.count, 1, '7 stays');
  f.freeLE(3);
  t.equal(f.count, 1, 'a stale (lower) ack frees nothing');
  f.freeLE(100);
  t.equal(f.count, 0);
  t.equal(f.inflightBytes, 0);
  f.freeLE(200);
  t.equal(f.count, 0, 'freeing an empty window is harmless');
  t.end();
});

t.test('freeing makes room again', (t) => {
  const f = new Inflights(2, 0);
  f.add(1, 1);
  f.add(2, 1);
  t.ok(f.isFull());
  f.freeLE(1);
  t.notOk(f.isFull());
  f.add(3, 1);
  t.ok(f.isFull());
  t.end();
});

t.test('reset empties the window', (t) => {
  const f = new Inflights(2, 10);
  f.add(1, 5);
  f.add(2, 5);
  t.ok(f.isFull());
  f.reset();
  t.equal(f.count, 0);
  t.equal(f.inflightBytes, 0);
  t.notOk(f.isFull());
  f.add(9, 1);
  f.freeLE(8);
  t.equal(f.count, 1, 'works normally after reset');
  t.end();
});

t.test('compaction of a long FIFO keeps counts exact', (t) => {
  const f = new Inflights(1000, 0);
  for (let i = 1; i <= 500; i++) f.add(i, 2);
  for (let i = 1; i <= 500; i += 3) {
    f.freeLE(i);
    t.equal(f.count, 500 - i, `count after freeLE(${i})`);
    t.equal(f.inflightBytes, 2 * (500 - i), `bytes after freeLE(${i})`);
  }
  for (let i = 501; i <= 600; i++) f.add(i, 1);
  f.freeLE(550);
  t.equal(f.count, 50);
  t.equal(f.inflightBytes, 50);
  t.end();
});

t.test('seeded differential test against an array model', (t) => {
  const rand = new SeededRand(77);
  for (let run = 0; run < 50; run++) {
    const maxMsgs = 1 + rand.int(20);
    const maxBytes = rand.chance(0.3) ? 0 : 1 + rand.int(200);
    const f = new Inflights(maxMsgs, maxBytes);
    let model: { last: number; bytes: number }[] = [];
    let last = 0;
    let bad = 0;
    for (let op = 0; op < 400; op++) {
      const r = rand.int(10);
      if (r < 5) {
        last += 1 + rand.int(3);
        const bytes = rand.int(40);
        f.add(last, bytes);
        model.push({ last, bytes });
      } else if (r < 9) {
        const upTo = last - rand.int(8);
        f.freeLE(upTo);
        model = model.filter((m) => m.last > upTo);
      } else {
        f.reset();
        model = [];
      }
      const bytes = model.reduce((a, m) => a + m.bytes, 0);
      const full = model.length >= maxMsgs || (maxBytes > 0 && bytes >= maxBytes);
      if (f.count !== model.length || f.inflightBytes !== bytes || f.isFull() !== full) bad++;
    }
    t.equal(bad, 0, `run ${run} (maxMsgs ${maxMsgs}, maxBytes ${maxBytes}) agrees with model`);
  }
  t.end();
});
