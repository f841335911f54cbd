// The per-tenant in-flight cap of the fair queue: an item's inflightMax (the tenant's share on
// this node of its cluster-wide in-flight limit), bounded by the node-wide tenantInflightMax. The
// last pushed item's value is the tenant's from then on. Goal: a capped tenant never has more in
// flight than its cap while the others keep starting (the queue stays work-conserving); a freed
// slot lets the next one start; raising the cap starts more at once, lowering it below what is in
// flight starts nothing until enough end; hasRoomFor and startableCount leave out what waits
// behind the cap. checkInvariants() after every operation.
import t from 'tap';
import { FairQueue, type FairQueueOptions } from '../../../src/delivery/fair-queue.js';

interface Item {
  readonly tenant: string;
  readonly origin: string;
  readonly priority: number;
  readonly name: string;
  readonly inflightMax?: number;
}

let serial = 0;
const item = (tenant: string, inflightMax?: number, name?: string): Item => ({
  tenant,
  origin: `https://${tenant}.example`,
  priority: 1,
  name: name ?? `${tenant}${serial++}`,
  ...(inflightMax === undefined ? {} : { inflightMax }),
});

const roomy: FairQueueOptions = { queuedMax: 1000, tenantInflightMax: 100, originInflightMax: 100 };

/** A queue whose every operation is followed by checkInvariants(). */
function checked(options: FairQueueOptions): {
  push: (it: Item) => string;
  take: () => Item | undefined;
  done: (it: Item | undefined) => void;
  takeAll: () => string[];
  q: FairQueue<Item>;
} {
  const q = new FairQueue<Item>(options);
  const take = (): Item | undefined => {
    const it = q.take();
    q.checkInvariants();
    return it;
  };
  return {
    q,
    push: (it) => {
      const r = q.push(it);
      q.checkInvariants();
      return r;
    },
    take,
    done: (it) => {
      if (it === undefined) throw new Error('expected an item in flight');
      q.done(it);
      q.checkInvariants();
    },
    takeAll: () => {
      const out: string[] = [];
      for (let it = take(); it !== undefined; it = take()) out.push(it.name);
      return out;
    },
  };
}

t.test('a capped tenant has at most its cap in flight while another keeps starting', (t) => {
  const { q, push, take, takeAll } = checked(roomy);
  for (let i = 0; i < 5; i++) push(item('a', 2, `a${i}`));
  for (let i = 0; i < 3; i++) push(item('b', undefined, `b${i}`));
  t.strictSame(takeAll(), ['a0', 'b0', 'a1', 'b1', 'b2'], 'a stops at 2, b goes on');
  t.strictSame(q.tenantCounts('a'), { queuedCount: 3, inflightCount: 2 });
  t.strictSame(q.tenantCounts('b'), { queuedCount: 0, inflightCount: 3 });

  // Work-conserving: b's items pushed while a is held start at once.
  for (let i = 3; i < 6; i++) push(item('b', undefined, `b${i}`));
  t.strictSame(takeAll(), ['b3', 'b4', 'b5']);
  t.equal(q.inflightCount, 8);

  t.equal(take(), undefined, 'a’s three others still wait for its cap');
  t.end();
});

t.test('done() of one lets the next start, one at a time', (t) => {
  const { q, push, take, done } = checked(roomy);
  for (let i = 0; i < 4; i++) push(item('a', 2, `a${i}`));
  const a0 = take();
  const a1 = take();
  t.strictSame([a0?.name, a1?.name], ['a0', 'a1']);
  t.equal(take(), undefined, 'a is at its cap of 2');
  done(a0);
  const a2 = take();
  t.equal(a2?.name, 'a2', 'a slot freed: the next one starts');
  t.equal(take(), undefined, 'and only one');
  done(a1);
  done(a2);
  t.equal(take()?.name, 'a3');
  t.strictSame(q.tenantCounts('a'), { queuedCount: 0, inflightCount: 1 });
  t.end();
});

t.test('raising the cap with a later item lets more start at once', (t) => {
  const { q, push, take, takeAll } = checked(roomy);
  for (let i = 0; i < 5; i++) push(item('a', 2, `a${i}`));
  t.strictSame(takeAll(), ['a0', 'a1']);
  t.equal(push(item('a', 4, 'a5')), 'queued');
  t.strictSame(takeAll(), ['a2', 'a3'], 'two more at once, up to the new cap of 4');
  t.equal(take(), undefined);
  t.strictSame(q.tenantCounts('a'), { queuedCount: 2, inflightCount: 4 });
  t.end();
});

t.test('lowering the cap below what is in flight starts nothing until below the new cap', (t) => {
  const { q, push, take, done } = checked(roomy);
  for (let i = 0; i < 6; i++) push(item('a', 4, `a${i}`));
  const running = [take(), take(), take(), take()];
  t.strictSame(
    running.map((it) => it?.name),
    ['a0', 'a1', 'a2', 'a3'],
  );
  push(item('a', 1, 'a6'));
  t.equal(take(), undefined, '4 in flight, cap 1');
  t.equal(q.startableCount, 0, 'nothing of a is startable');
  push(item('b', undefined, 'b0'));
  t.equal(take()?.name, 'b0', 'another tenant is not held up');
  for (let i = 0; i < 3; i++) {
    done(running[i]);
    t.equal(take(), undefined, `${3 - i} of a in flight: still not below the cap of 1`);
  }
  done(running[3]);
  t.equal(take()?.name, 'a4', 'none in flight: one starts');
  t.equal(take(), undefined, 'and only one');
  t.strictSame(q.tenantCounts('a'), { queuedCount: 2, inflightCount: 1 });
  t.end();
});

t.test('hasRoomFor refuses once the tenant is at its cap and blockedQueuedMax items wait', (t) => {
  const { q, push, take, done } = checked({ ...roomy, blockedQueuedMax: 2 });
  const origin = 'https://a.example';
  t.ok(q.hasRoomFor('a', origin), 'a tenant the queue does not know');
  push(item('a', 2));
  push(item('a', 2));
  const first = take();
  take();
  t.ok(q.hasRoomFor('a', origin), 'at its cap, nothing waiting yet');
  push(item('a', 2));
  t.ok(q.hasRoomFor('a', origin), 'one waiting behind the cap');
  push(item('a', 2));
  t.notOk(q.hasRoomFor('a', origin), 'two waiting behind the cap: no more');
  t.notOk(q.hasRoomFor('a', 'https://elsewhere'), 'the cap is the tenant’s, whatever the origin');
  t.ok(q.hasRoomFor('b', origin), 'another tenant to the same origin still has room');
  done(first);
  t.ok(q.hasRoomFor('a', origin), 'below its cap again');
  t.end();
});

t.test('startableCount leaves out the items held by the tenant cap', (t) => {
  const { q, push, take, done } = checked(roomy);
  for (let i = 0; i < 5; i++) push(item('a', 2));
  t.equal(q.startableCount, 5, 'below its cap, all of a’s could start');
  const a0 = take();
  take();
  t.equal(q.startableCount, 0, 'at its cap, none of the 3 left could');
  for (let i = 0; i < 3; i++) push(item('b'));
  t.equal(q.startableCount, 3, 'only b’s');
  t.equal(q.queuedCount, 6);
  done(a0);
  t.equal(q.startableCount, 6, 'a below its cap again');
  t.end();
});

t.test('an item’s inflightMax above the node-wide cap is bounded by it', (t) => {
  const { q, push, take, takeAll } = checked({ ...roomy, tenantInflightMax: 3 });
  for (let i = 0; i < 6; i++) push(item('a', 10, `a${i}`));
  t.strictSame(takeAll(), ['a0', 'a1', 'a2'], 'the node-wide cap of 3, not 10');
  t.equal(take(), undefined);
  t.strictSame(q.tenantCounts('a'), { queuedCount: 3, inflightCount: 3 });
  t.end();
});
