// The job table's id index against a Map (the structure it replaced) under seeded random adds,
// deletes and lookups: same answers, same rows, same insertion order, through many growths and
// backward shifts, half the adds through probeAbsent()/addProbed() as the job table makes them.
// Then ids crafted to share their home slot: the table must turn into its fallback Map before
// probes grow past its bound, and keep answering the same.
import t, { type Test } from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { hashOf, IdIndex } from '../../../src/scheduler/id-index.js';

function sameAsMap(t: Test, index: IdIndex, ref: Map<string, number>, what: string): boolean {
  if (index.size !== ref.size) {
    t.fail(`${what}: size ${index.size}, Map ${ref.size}`);
    return false;
  }
  const got = [...index.entries()];
  const want = [...ref.entries()];
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    t.fail(`${what}: entries differ from the Map's (order or rows)`);
    return false;
  }
  return true;
}

/** 300 ids, which fit in 512 slots, all hashing to slot 0 of that table. */
function craftedIds(prefix: string): string[] {
  const crafted: string[] = [];
  for (let i = 0; crafted.length < 300; i++) {
    const id = `${prefix}${i}`;
    if ((hashOf(id) & 511) === 0) crafted.push(id);
  }
  return crafted;
}

t.test('answers as a Map does, in the same order', (t) => {
  for (let seed = 1; seed <= 12; seed++) {
    const r = new SeededRand(seed);
    const index = new IdIndex();
    const ref = new Map<string, number>();
    const free: number[] = [];
    let rows = 0;
    const universe = 200 + r.int(3000);
    let ok = true;
    for (let step = 0; step < 20_000 && ok; step++) {
      const id = `job-${r.int(universe)}`;
      const roll = r.int(10);
      if (roll < 5) {
        const had = ref.has(id);
        // Half the adds as the job table makes them: one probe that answers and keeps the slot.
        const probed = r.chance(0.5);
        if (probed ? index.probeAbsent(id) === had : index.get(id) !== (ref.get(id) ?? -1))
          ok = false;
        if (!had) {
          const row = free.pop() ?? rows++;
          if (probed) index.addProbed(id, row);
          else index.add(id, row);
          ref.set(id, row);
        }
      } else if (roll < 8) {
        const want = ref.get(id) ?? -1;
        const got = index.delete(id);
        if (got !== want) ok = false;
        if (want !== -1) {
          ref.delete(id);
          free.push(want);
        }
      } else if (index.get(id) !== (ref.get(id) ?? -1) || index.has(id) !== ref.has(id)) ok = false;
      if (!ok) t.fail(`seed ${seed}, step ${step}: answers for ${id} differ`);
      if (ok && step % 997 === 0) ok = sameAsMap(t, index, ref, `seed ${seed}, step ${step}`);
    }
    if (ok) ok = sameAsMap(t, index, ref, `seed ${seed}, at the end`);
    t.ok(ok, `seed ${seed}: ${ref.size} ids left, never a different answer`);
    t.notOk(index.isFallback, `seed ${seed}: random ids never push the table to its fallback`);
  }
  t.end();
});

t.test('probed adds of crafted ids reach the fallback too, same answers', (t) => {
  const crafted = craftedIds('y');
  const index = new IdIndex();
  const ref = new Map<string, number>();
  crafted.forEach((id, row) => {
    if (!index.probeAbsent(id)) t.fail(`${id} reported present`);
    index.addProbed(id, row);
    ref.set(id, row);
  });
  t.ok(index.isFallback, 'probes past the bound turned the table into a Map');
  t.ok(sameAsMap(t, index, ref, 'after the fallback'));
  t.end();
});

t.test('addProbed refuses an id its probe did not just find absent', (t) => {
  const index = new IdIndex();
  t.throws(() => index.addProbed('a', 0), /without its probeAbsent/);
  t.ok(index.probeAbsent('a'));
  t.throws(() => index.addProbed('b', 0), /without its probeAbsent/);
  t.ok(index.probeAbsent('c'));
  index.add('d', 0);
  t.throws(() => index.addProbed('c', 1), /without its probeAbsent/, 'an add in between voids it');
  t.end();
});

t.test('a million ids do not cluster enough to need the fallback', (t) => {
  const index = new IdIndex();
  for (let i = 0; i < 1_000_000; i++) index.add(`reg-${String(i).padStart(8, '0')}`, i);
  t.notOk(index.isFallback);
  t.equal(index.get('reg-00123456'), 123_456);
  t.equal(index.get('reg-10000000'), -1);
  t.end();
});

t.test('ids crafted to share a home slot send it to its fallback, same answers', (t) => {
  const crafted = craftedIds('x');
  const index = new IdIndex();
  const ref = new Map<string, number>();
  crafted.forEach((id, row) => {
    index.add(id, row);
    ref.set(id, row);
  });
  t.ok(index.isFallback, 'probes past the bound turned the table into a Map');
  t.ok(sameAsMap(t, index, ref, 'after the fallback'));
  t.equal(index.delete(crafted[7]!), 7);
  ref.delete(crafted[7]!);
  index.add('late', 300);
  ref.set('late', 300);
  t.ok(sameAsMap(t, index, ref, 'after a delete and an add'));
  for (const id of crafted) t.equal(index.get(id), ref.get(id) ?? -1);
  t.notOk(index.probeAbsent(crafted[3]!), 'a probe finds an id the fallback holds');
  t.ok(index.probeAbsent('later'));
  index.addProbed('later', 301);
  ref.set('later', 301);
  t.ok(sameAsMap(t, index, ref, 'after a probed add to the fallback'));
  index.clear();
  t.equal(index.size, 0);
  t.notOk(index.isFallback, 'clear() starts a table again');
  t.end();
});
