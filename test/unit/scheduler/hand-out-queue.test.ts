import t from 'tap';
import { AssertionError } from '../../../src/base/assert.js';
import { HandOutQueue, type HandOutLane } from '../../../src/scheduler/hand-out-queue.js';

/** Runs named `<tenant>.<origin>.<priority>.<n>`: the lane is in the name. */
function laneOf(fireId: string): HandOutLane | undefined {
  const [tenant, origin, priority] = fireId.split('.');
  if (tenant === 'gone') return undefined;
  return { tenant: tenant!, origin: origin!, priority: Number(priority) };
}

/** Hands out up to `max` runs as the dispatcher does: each one removed before the next. */
function handOut(
  q: HandOutQueue,
  max = Infinity,
  admits: (tenant: string, origin: string) => boolean = () => true,
): string[] {
  const out: string[] = [];
  for (const id of q.order(admits)) {
    if (out.length >= max) break;
    q.delete(id);
    out.push(id);
  }
  return out;
}

t.test('P0 first, then tenants in turn, then a tenant’s origins in turn', (t) => {
  const q = new HandOutQueue(laneOf);
  for (let i = 0; i < 3; i++) q.add(`noisy.a.2.${i}`);
  for (let i = 0; i < 3; i++) q.add(`noisy.b.2.${i}`);
  q.add('quiet.q.2.0');
  q.add('quiet.q.0.1');
  t.strictSame(handOut(q), [
    'quiet.q.0.1',
    'noisy.a.2.0',
    'quiet.q.2.0',
    'noisy.b.2.0',
    'noisy.a.2.1',
    'noisy.b.2.1',
    'noisy.a.2.2',
    'noisy.b.2.2',
  ]);
  t.equal(q.size, 0);
  t.end();
});

t.test('a refused origin keeps its runs; the rest are handed out past them', (t) => {
  const q = new HandOutQueue(laneOf);
  for (let i = 0; i < 500; i++) q.add(`noisy.dead.0.${i}`);
  q.add('noisy.alive.0.0');
  q.add('quiet.ok.0.0');
  const asked: string[] = [];
  const got = handOut(q, Infinity, (tenant, origin) => {
    asked.push(`${tenant}/${origin}`);
    return origin !== 'dead';
  });
  t.strictSame(got, ['noisy.alive.0.0', 'quiet.ok.0.0']);
  t.equal(asked.filter((a) => a === 'noisy/dead').length, 1, 'refused once, then passed over');
  t.equal(q.size, 500, 'the dead origin’s runs wait where they were');
  t.strictSame(
    handOut(q, 2),
    ['noisy.dead.0.0', 'noisy.dead.0.1'],
    'in their order, once admitted',
  );
  t.end();
});

t.test('a hand-out stopped at its cap resumes with the tenants not yet served', (t) => {
  const q = new HandOutQueue(laneOf);
  for (const tenant of ['a', 'b', 'c']) for (let i = 0; i < 2; i++) q.add(`${tenant}.o.1.${i}`);
  t.strictSame(handOut(q, 2), ['a.o.1.0', 'b.o.1.0']);
  t.strictSame(handOut(q, 2), ['c.o.1.0', 'a.o.1.1']);
  t.strictSame(handOut(q), ['b.o.1.1', 'c.o.1.1']);
  t.end();
});

t.test('add keeps a queued run’s place; delete, has and ids agree', (t) => {
  const q = new HandOutQueue(laneOf);
  q.add('a.o.0.1');
  q.add('a.o.0.2');
  q.add('a.o.0.1');
  t.equal(q.size, 2);
  t.ok(q.has('a.o.0.1'));
  t.ok(q.delete('a.o.0.1'));
  t.notOk(q.delete('a.o.0.1'));
  t.notOk(q.has('a.o.0.1'));
  q.add('gone.x.0.0');
  t.strictSame([...q.ids()].sort(), ['a.o.0.2', 'gone.x.0.0']);
  t.strictSame(
    handOut(q).sort(),
    ['a.o.0.2', 'gone.x.0.0'],
    'a run of a gone job is yielded to be dropped',
  );
  t.end();
});

t.test('a priority out of range is a programming error', (t) => {
  const q = new HandOutQueue(() => ({ tenant: 't', origin: 'o', priority: -1 }));
  t.throws(() => q.add('x'), AssertionError);
  t.end();
});
