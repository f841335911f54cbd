// Placement maths: the ring covers the 32-bit space exactly once, lookups agree with a linear
// scan, the shard-key hash is stable (pinned values: changing it would move every job), and a
// bootstrap plan spreads replicas and preferred leaders evenly and is the same on every node.
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { planBootstrap } from '../../../src/placement/bootstrap-plan.js';
import { hashShardKey } from '../../../src/placement/hash.js';
import { encodeMetaCommand, MetaStateMachine } from '../../../src/placement/meta-state.js';
import { lookupRange, RING_SIZE, splitRing } from '../../../src/placement/ring.js';

t.test('ring ranges cover [0, 2^32) without gaps or overlaps', (t) => {
  for (const n of [1, 2, 3, 7, 16, 1000]) {
    const ranges = splitRing(n, 1);
    t.equal(ranges[0]!.start, 0);
    t.equal(ranges[ranges.length - 1]!.end, RING_SIZE);
    let contiguous = true;
    for (let i = 1; i < ranges.length; i++)
      if (ranges[i]!.start !== ranges[i - 1]!.end) contiguous = false;
    t.ok(contiguous, `${n} ranges are contiguous`);
  }
  t.end();
});

t.test('lookupRange agrees with a linear scan', (t) => {
  const rand = new SeededRand(3);
  const ranges = splitRing(13, 1);
  let mismatches = 0;
  for (let i = 0; i < 5000; i++) {
    const h = rand.u32();
    const linear = ranges.find((r) => r.start <= h && h < r.end)!;
    if (lookupRange(ranges, h).groupId !== linear.groupId) mismatches++;
  }
  t.equal(mismatches, 0);
  t.equal(lookupRange(ranges, 0).groupId, 1);
  t.equal(lookupRange(ranges, RING_SIZE - 1).groupId, 13);
  t.end();
});

t.test('the shard-key hash is pinned', (t) => {
  // FNV-1a 32-bit reference values.
  t.equal(hashShardKey(''), 0x811c9dc5);
  t.equal(hashShardKey('a'), 0xe40c292c);
  t.equal(hashShardKey('foobar'), 0xbf9cf968);
  t.end();
});

t.test('a bootstrap plan balances replicas and preferred leaders', (t) => {
  const plan = planBootstrap(['n3', 'n1', 'n2'], 16);
  t.same(plan.metaVoters, ['n1', 'n2', 'n3']);
  const replicas = new Map<string, number>();
  const leaders = new Map<string, number>();
  for (const g of plan.groups) {
    t.equal(new Set(g.replicas).size, 3, `group ${g.groupId} has 3 distinct replicas`);
    for (const r of g.replicas) replicas.set(r, (replicas.get(r) ?? 0) + 1);
    leaders.set(g.replicas[0]!, (leaders.get(g.replicas[0]!) ?? 0) + 1);
  }
  t.same([...replicas.values()], [16, 16, 16], 'every node holds every group with 3 nodes');
  const lc = [...leaders.values()];
  t.ok(Math.max(...lc) - Math.min(...lc) <= 1, `preferred leaders balanced: ${lc.join(',')}`);
  t.same(planBootstrap(['n2', 'n1', 'n3'], 16), plan, 'same plan whatever the flag order');
  const five = planBootstrap(['a', 'b', 'c', 'd', 'e'], 10);
  const counts = new Map<string, number>();
  for (const g of five.groups) for (const r of g.replicas) counts.set(r, (counts.get(r) ?? 0) + 1);
  t.same([...counts.values()], [6, 6, 6, 6, 6], 'five nodes: 30 replicas spread 6 each');
  t.throws(() => planBootstrap(['n1', 'n1'], 4), /distinct/);
  t.end();
});

t.test('meta state machine: init once, snapshot round trip', (t) => {
  const sm = new MetaStateMachine();
  const plan = planBootstrap(['n1', 'n2', 'n3'], 4);
  const cmd = encodeMetaCommand({
    op: 'init',
    members: plan.metaVoters.map((id) => ({
      id,
      peerAddress: `127.0.0.1:${id.slice(1)}`,
      apiAddress: '',
    })),
    groups: plan.groups.map((g) => ({
      id: g.groupId,
      start: g.start,
      end: g.end,
      replicas: g.replicas,
    })),
  });
  const entry = { term: 1, index: 1, type: 'normal' as const, data: cmd };
  t.same(sm.apply(entry), { ok: true });
  t.same(sm.apply({ ...entry, index: 2 }), {
    ok: false,
    code: 'META_ALREADY_INITIALIZED',
    reason: 'cluster already initialized',
  });
  const copy = new MetaStateMachine();
  copy.restore(sm.snapshot());
  t.same([...copy.members.values()], [...sm.members.values()]);
  t.same([...copy.groups.values()], [...sm.groups.values()]);
  t.ok(copy.initialized);
  t.end();
});
