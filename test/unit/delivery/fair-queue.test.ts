// The fair queue of ready deliveries. Goal: caps per tenant and per origin hold, P0 goes first,
// tenants take turns in proportion to their weights (and a tenant's origins take turns), a full
// queue says so instead of growing, and a
// tenant stuck on a dead origin neither blocks the others nor fills the queue. Method: small
// hand-written scenarios with the exact take order expected, then seeded random push / take /
// done / remove sequences checked after every step against a naive model (a plain list scanned
// in full): no cap exceeded, the taken item has the lowest priority of all items that could
// start, take() is undefined only when nothing could start, FIFO per (priority, tenant, origin),
// every item taken once, and checkInvariants() on the internal rings.
import t from 'tap';
import { AssertionError } from '../../../src/base/assert.js';
import { ValidationError } from '../../../src/base/errors.js';
import { SeededRand } from '../../../src/base/rand.js';
import { FairQueue, type FairQueueOptions } from '../../../src/delivery/fair-queue.js';

interface Item {
  readonly tenant: string;
  readonly origin: string;
  readonly priority: number;
  readonly name: string;
  readonly weight?: number;
}

let serial = 0;
const item = (tenant: string, origin: string, priority = 1, name?: string): Item => ({
  tenant,
  origin,
  priority,
  name: name ?? `${tenant}${serial++}`,
});

const roomy: FairQueueOptions = { queuedMax: 1000, tenantInflightMax: 100, originInflightMax: 100 };

function takeAll(q: FairQueue<Item>): string[] {
  const out: string[] = [];
  for (let it = q.take(); it !== undefined; it = q.take()) out.push(it.name);
  return out;
}

t.test('tenants take turns within a priority', (t) => {
  const q = new FairQueue<Item>(roomy);
  for (const name of ['a1', 'a2', 'a3']) q.push(item('a', 'https://a', 1, name));
  for (const name of ['b1', 'b2', 'b3']) q.push(item('b', 'https://b', 1, name));
  q.push(item('c', 'https://c', 1, 'c1'));
  t.strictSame(takeAll(q), ['a1', 'b1', 'c1', 'a2', 'b2', 'a3', 'b3']);
  q.checkInvariants();
  t.end();
});

t.test('a flood from one tenant does not push back another tenant', (t) => {
  const q = new FairQueue<Item>(roomy);
  for (let i = 0; i < 100; i++) q.push(item('noisy', 'https://n', 1, `n${i}`));
  q.push(item('quiet', 'https://q', 1, 'q0'));
  const order = takeAll(q);
  t.equal(order.indexOf('q0'), 1, 'the quiet tenant goes second, not 101st');
  t.end();
});

t.test('a tenant’s origins take turns, so its dead origin does not hold up the others', (t) => {
  const q = new FairQueue<Item>({ ...roomy, originInflightMax: 1 });
  for (let i = 0; i < 5; i++) q.push(item('a', 'https://dead', 1, `dead${i}`));
  for (let i = 0; i < 3; i++) q.push(item('a', 'https://live', 1, `live${i}`));
  const first = q.take();
  t.equal(first?.name, 'dead0');
  // The dead origin holds its one slot forever; the tenant's live origin keeps flowing.
  const live: string[] = [];
  for (let i = 0; i < 3; i++) {
    const it = q.take();
    if (it === undefined) break;
    live.push(it.name);
    q.done(it);
  }
  t.strictSame(live, ['live0', 'live1', 'live2']);
  t.equal(q.take(), undefined, 'only the dead origin is left, and it is at its cap');
  t.equal(q.queuedCount, 4);
  q.checkInvariants();
  t.end();
});

t.test('P0 goes first; lower priorities run when P0 cannot', (t) => {
  const q = new FairQueue<Item>({ ...roomy, tenantInflightMax: 1 });
  q.push(item('a', 'https://a', 3, 'a-p3'));
  q.push(item('b', 'https://b', 1, 'b-p1'));
  q.push(item('a', 'https://a', 0, 'a-p0'));
  q.push(item('c', 'https://c', 2, 'c-p2'));
  // a's P0 first; a is then at its cap, so b's P1 and c's P2 go before a's P3 is allowed.
  t.strictSame(takeAll(q), ['a-p0', 'b-p1', 'c-p2']);
  t.equal(q.queuedCount, 1);
  t.end();
});

t.test('tenant cap: a tenant never has more than its share in flight', (t) => {
  const q = new FairQueue<Item>({ ...roomy, tenantInflightMax: 2 });
  for (let i = 0; i < 5; i++) q.push(item('a', `https://a${i}`, 1, `a${i}`));
  const a0 = q.take();
  const a1 = q.take();
  t.equal(q.take(), undefined, 'third item of the tenant waits');
  t.strictSame(q.tenantCounts('a'), { queuedCount: 3, inflightCount: 2 });
  if (a0 === undefined || a1 === undefined) throw new Error('expected two items');
  q.done(a0);
  t.equal(q.take()?.name, 'a2', 'a slot freed, the next one starts');
  t.equal(q.take(), undefined);
  q.checkInvariants();
  t.end();
});

t.test('origin cap is shared across tenants', (t) => {
  const q = new FairQueue<Item>({ ...roomy, originInflightMax: 2 });
  q.push(item('a', 'https://shared', 1, 'a0'));
  q.push(item('a', 'https://shared', 1, 'a1'));
  q.push(item('b', 'https://shared', 1, 'b0'));
  q.push(item('b', 'https://own', 1, 'b1'));
  t.strictSame(takeAll(q), ['a0', 'b0', 'b1'], 'a1 waits for the shared origin');
  t.equal(q.originInflightCount('https://shared'), 2);
  t.end();
});

t.test('bounded: full and tenant-full instead of growth', (t) => {
  const q = new FairQueue<Item>({ ...roomy, queuedMax: 5, tenantQueuedMax: 3 });
  t.equal(q.push(item('a', 'https://a')), 'queued');
  t.equal(q.push(item('a', 'https://a')), 'queued');
  t.equal(q.push(item('a', 'https://a')), 'queued');
  t.equal(q.push(item('a', 'https://a')), 'tenant-full', 'a stuck tenant cannot fill the queue');
  t.equal(q.push(item('b', 'https://b')), 'queued');
  t.equal(q.push(item('c', 'https://c')), 'queued');
  t.equal(q.push(item('d', 'https://d')), 'full');
  t.equal(q.queuedCount, 5);
  // In-flight items do not count against the queue bound.
  t.ok(q.take());
  t.equal(q.push(item('d', 'https://d')), 'queued');
  q.checkInvariants();
  t.end();
});

t.test('done() pairs with take() exactly once', (t) => {
  const q = new FairQueue<Item>(roomy);
  const a = item('a', 'https://a');
  const b = item('b', 'https://b');
  q.push(a);
  q.push(b);
  t.throws(() => q.push(a), AssertionError, 'the same object twice');
  t.throws(() => q.done(a), AssertionError, 'queued, not in flight');
  const taken = q.take();
  if (taken === undefined) throw new Error('expected an item');
  q.done(taken);
  t.throws(() => q.done(taken), AssertionError, 'twice');
  t.throws(() => q.push(item('a', 'https://a', 4)), AssertionError, 'priority out of range');
  t.throws(() => q.push(item('a', 'https://a', 1.5)), AssertionError, 'fractional priority');
  t.end();
});

t.test('removeQueuedWhere drops queued items and leaves in-flight ones', (t) => {
  const q = new FairQueue<Item>({ ...roomy, originInflightMax: 1 });
  const items = [0, 1, 2, 3].map((i) => item(i % 2 === 0 ? 'a' : 'b', 'https://x', 1, `i${i}`));
  for (const it of items) q.push(it);
  const first = q.take();
  t.equal(first?.name, 'i0');
  const removed = q.removeQueuedWhere((it) => it.tenant === 'a');
  t.strictSame(
    removed.map((it) => it.name),
    ['i2'],
  );
  t.equal(q.queuedCount, 2);
  q.checkInvariants();
  if (first === undefined) throw new Error('expected an item');
  q.done(first);
  t.strictSame(takeAll(q), ['i1']);
  t.equal(q.removeQueuedWhere(() => true).length, 1);
  t.equal(q.queuedCount, 0);
  q.checkInvariants();
  t.end();
});

/** Counts by tenant of the names taken, e.g. { a: 30, b: 10 }. */
function shares(names: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const n of names) out[n.charAt(0)] = (out[n.charAt(0)] ?? 0) + 1;
  return out;
}

t.test('weights: backlogged tenants start items in proportion to their weight', (t) => {
  const q = new FairQueue<Item>(roomy);
  for (let i = 0; i < 100; i++) {
    q.push({ ...item('a', 'https://a', 1, `a${i}`), weight: 3 });
    q.push({ ...item('b', 'https://b', 1, `b${i}`), weight: 1 });
  }
  const order: string[] = [];
  for (let i = 0; i < 40; i++) order.push(q.take()!.name);
  t.strictSame(shares(order), { a: 30, b: 10 }, 'weight 3 against 1: three starts for one');
  for (let w = 0; w + 8 <= order.length; w += 8) {
    const window = shares(order.slice(w, w + 8));
    t.ok(window['b'] === 2, `starts ${w}-${w + 7} interleave: ${order.slice(w, w + 8).join(' ')}`);
  }
  q.checkInvariants();
  t.end();
});

t.test('weights hold when a shared origin at its cap is the bottleneck', (t) => {
  // One connection to an origin all three tenants call: every done() frees one start, and the
  // weights decide whose it is (1 : 2 : 5).
  const q = new FairQueue<Item>({ ...roomy, originInflightMax: 1 });
  const weights: Record<string, number> = { a: 1, b: 2, c: 5 };
  for (let i = 0; i < 200; i++)
    for (const tenant of ['a', 'b', 'c'])
      q.push({
        ...item(tenant, 'https://shared', 1, `${tenant}${i}`),
        weight: weights[tenant] ?? 1,
      });
  const order: string[] = [];
  for (let i = 0; i < 80; i++) {
    const it = q.take();
    if (it === undefined) break;
    t.equal(q.take(), undefined, 'the origin holds one at a time');
    order.push(it.name);
    q.done(it);
  }
  t.strictSame(shares(order), { a: 10, b: 20, c: 50 });
  q.checkInvariants();
  t.end();
});

t.test('weights act within a priority: a heavy tenant’s P2 waits for a light tenant’s P0', (t) => {
  const q = new FairQueue<Item>(roomy);
  for (let i = 0; i < 3; i++) q.push({ ...item('h', 'https://h', 2, `h${i}`), weight: 100 });
  for (let i = 0; i < 3; i++) q.push({ ...item('l', 'https://l', 0, `l${i}`), weight: 1 });
  t.strictSame(takeAll(q), ['l0', 'l1', 'l2', 'h0', 'h1', 'h2']);
  t.end();
});

t.test('a tenant that had nothing queued does not bank turns while it was away', (t) => {
  const q = new FairQueue<Item>(roomy);
  for (let i = 0; i < 50; i++) q.push(item('a', 'https://a', 1, `a${i}`));
  for (let i = 0; i < 20; i++) q.take();
  // b arrives late with the same weight: it alternates with a from now on, not 20 in a row.
  for (let i = 0; i < 10; i++) q.push(item('b', 'https://b', 1, `b${i}`));
  const order: string[] = [];
  for (let i = 0; i < 10; i++) order.push(q.take()!.name);
  t.strictSame(shares(order), { a: 5, b: 5 });
  t.end();
});

t.test('a weight outside [1, WEIGHT_MAX] is a programming error', (t) => {
  const q = new FairQueue<Item>(roomy);
  t.throws(() => q.push({ ...item('a', 'https://a'), weight: 0 }), AssertionError);
  t.throws(() => q.push({ ...item('a', 'https://a'), weight: 1.5 }), AssertionError);
  t.end();
});

t.test('bad options are all reported', (t) => {
  try {
    new FairQueue<Item>({ queuedMax: 0, tenantInflightMax: 1.5, originInflightMax: -1 });
    t.fail('accepted');
  } catch (err) {
    t.type(err, ValidationError);
    t.equal((err as ValidationError).code, 'DELIVERY_INVALID_OPTIONS');
    t.strictSame(
      (err as ValidationError).violations.map((v) => v.field),
      ['queuedMax', 'tenantInflightMax', 'originInflightMax'],
    );
  }
  t.end();
});

/** The naive model: a list of queued items and counters, scanned in full. */
class Model {
  readonly queued: Item[] = [];
  readonly tenantInflight = new Map<string, number>();
  readonly originInflight = new Map<string, number>();
  constructor(readonly options: Required<FairQueueOptions>) {}
  /** Room unless the tenant's items to the origin (or the tenant's, at its cap) wait behind a full cap. */
  hasRoomFor(tenant: string, origin: string): boolean {
    const max = this.options.blockedQueuedMax;
    const ofTenant = this.queued.filter((x) => x.tenant === tenant);
    if (
      (this.tenantInflight.get(tenant) ?? 0) >= this.options.tenantInflightMax &&
      ofTenant.length >= max
    )
      return false;
    if ((this.originInflight.get(origin) ?? 0) < this.options.originInflightMax) return true;
    return ofTenant.filter((x) => x.origin === origin).length < max;
  }
  canStart(it: Item): boolean {
    return (
      (this.tenantInflight.get(it.tenant) ?? 0) < this.options.tenantInflightMax &&
      (this.originInflight.get(it.origin) ?? 0) < this.options.originInflightMax
    );
  }
  bump(map: Map<string, number>, key: string, by: number): void {
    map.set(key, (map.get(key) ?? 0) + by);
  }
}

t.test('seeded random operations keep every promise of the queue', (t) => {
  let steps = 0;
  // The first broken promise of each seed, so a regression prints a few lines, not thousands.
  const problems: string[] = [];
  for (let seed = 1; seed <= 60; seed++) {
    const r = new SeededRand(seed);
    const options: Required<FairQueueOptions> = {
      queuedMax: 5 + r.int(60),
      tenantQueuedMax: 1 + r.int(30),
      tenantInflightMax: 1 + r.int(4),
      originInflightMax: 1 + r.int(4),
      priorityCount: 1 + r.int(4),
      blockedQueuedMax: 1 + r.int(6),
    };
    const q = new FairQueue<Item>(options);
    const model = new Model(options);
    const inflight: Item[] = [];
    const taken = new Set<Item>();
    const tenants = Array.from({ length: 1 + r.int(6) }, (_, i) => `t${i}`);
    const origins = Array.from({ length: 1 + r.int(5) }, (_, i) => `https://o${i}`);
    let problem: string | undefined;
    const bad = (what: string): void => {
      problem ??= `seed ${seed}: ${what}`;
    };
    for (let step = 0; step < 1500 && problem === undefined; step++, steps++) {
      const roll = r.int(100);
      if (roll < 45) {
        const it: Item = {
          ...item(
            tenants[r.int(tenants.length)] as string,
            origins[r.int(origins.length)] as string,
            r.int(options.priorityCount),
          ),
          weight: 1 + r.int(5),
        };
        const tenantQueued = model.queued.filter((x) => x.tenant === it.tenant).length;
        const want =
          model.queued.length >= options.queuedMax
            ? 'full'
            : tenantQueued >= options.tenantQueuedMax
              ? 'tenant-full'
              : 'queued';
        const got = q.push(it);
        if (got !== want) bad(`step ${step}: push ${got}, model says ${want}`);
        if (got === 'queued') model.queued.push(it);
      } else if (roll < 80) {
        const startable = model.queued.filter((x) => model.canStart(x));
        const got = q.take();
        if (got === undefined) {
          if (startable.length > 0) bad(`step ${step}: idle with work to start`);
          continue;
        }
        const bestPriority = Math.min(...startable.map((x) => x.priority));
        if (!model.canStart(got)) bad(`step ${step}: cap exceeded`);
        if (got.priority !== bestPriority) bad(`step ${step}: priority order`);
        // FIFO within (priority, tenant, origin): nothing older of the same lane was skipped.
        const older = model.queued.find(
          (x) => x.tenant === got.tenant && x.origin === got.origin && x.priority === got.priority,
        );
        if (older !== got) bad(`step ${step}: lane order`);
        if (taken.has(got)) bad(`step ${step}: taken twice`);
        taken.add(got);
        model.queued.splice(model.queued.indexOf(got), 1);
        model.bump(model.tenantInflight, got.tenant, 1);
        model.bump(model.originInflight, got.origin, 1);
        inflight.push(got);
      } else if (roll < 97) {
        if (inflight.length === 0) continue;
        const [it] = inflight.splice(r.int(inflight.length), 1);
        if (it === undefined) continue;
        q.done(it);
        model.bump(model.tenantInflight, it.tenant, -1);
        model.bump(model.originInflight, it.origin, -1);
      } else {
        const victim = tenants[r.int(tenants.length)];
        const removed = q.removeQueuedWhere((x) => x.tenant === victim);
        const want = model.queued.filter((x) => x.tenant === victim);
        if (removed.length !== want.length) bad(`step ${step}: remove count`);
        for (const x of want) model.queued.splice(model.queued.indexOf(x), 1);
      }
      q.checkInvariants();
      if (q.queuedCount !== model.queued.length || q.inflightCount !== inflight.length) {
        bad(`step ${step}: counts`);
      }
      const startable = model.queued.filter((x) => model.canStart(x)).length;
      if (q.startableCount !== startable)
        bad(`step ${step}: startable ${q.startableCount}, model says ${startable}`);
      for (const tenant of tenants)
        for (const origin of origins)
          if (q.hasRoomFor(tenant, origin) !== model.hasRoomFor(tenant, origin))
            bad(`step ${step}: hasRoomFor(${tenant}, ${origin}) disagrees with the model`);
    }
    if (problem !== undefined) problems.push(problem);
  }
  t.strictSame(problems, [], `${steps} random steps checked`);
  t.end();
});

t.test('deterministic: the same pushes and releases give the same order', (t) => {
  const run = (): string[] => {
    const q = new FairQueue<Item>({ queuedMax: 100, tenantInflightMax: 2, originInflightMax: 2 });
    const r = new SeededRand(99);
    for (let i = 0; i < 60; i++) {
      q.push(item(`t${r.int(4)}`, `https://o${r.int(3)}`, r.int(4), `i${i}`));
    }
    const order: string[] = [];
    const inflight: Item[] = [];
    for (let i = 0; i < 200; i++) {
      const it = q.take();
      if (it !== undefined) {
        order.push(it.name);
        inflight.push(it);
      } else if (inflight.length > 0) {
        q.done(inflight.shift() as Item);
      }
    }
    return order;
  };
  const a = run();
  t.equal(a.length, 60);
  t.strictSame(run(), a);
  t.end();
});

t.test('items behind a full origin are not startable, and the origin stops taking more', (t) => {
  const q = new FairQueue<Item>({
    queuedMax: 1000,
    tenantInflightMax: 100,
    originInflightMax: 2,
    blockedQueuedMax: 3,
  });
  for (let i = 0; i < 5; i++) q.push(item('noisy', 'https://dead', 1, `d${i}`));
  t.equal(q.startableCount, 5, 'below the cap every queued item can start');
  const started = [q.take(), q.take()];
  t.equal(q.startableCount, 0, 'the origin is at its cap: the 3 left wait for its answers');
  t.equal(q.queuedCount, 3);
  t.notOk(q.hasRoomFor('noisy', 'https://dead'), '3 already wait behind the cap: no room');
  t.ok(q.hasRoomFor('noisy', 'https://alive'), 'the same tenant’s other origin has room');
  t.ok(q.hasRoomFor('quiet', 'https://dead'), 'another tenant may queue for the same origin');
  q.push(item('quiet', 'https://ok', 0, 'q0'));
  t.equal(q.startableCount, 1, 'only the quiet item is work for this node');
  t.equal(q.take()?.name, 'q0');
  q.done(started[0]!);
  t.equal(q.startableCount, 3, 'a freed slot makes the waiting items startable again');
  t.ok(q.hasRoomFor('noisy', 'https://dead'));
  q.checkInvariants();
  t.end();
});
