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

t.test('the shard-key hash is FNV-1a over exactly the UTF-8 bytes TextEncoder gives', (t) => {
  const encoder = new TextEncoder();
  const reference = (key: string): number => {
    let h = 0x811c9dc5;
    for (const byte of encoder.encode(key)) h = Math.imul(h ^ byte, 0x01000193);
    return h >>> 0;
  };
  // Every kind of UTF-16 unit: ASCII, 2- and 3-byte code points, surrogate pairs, lone and
  // reversed surrogates, at the start, middle and end of keys.
  const units = [0x00, 0x41, 0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xd800, 0xdbff, 0xdc00, 0xdfff];
  const more = [0xe000, 0xfffd, 0xffff, 0x3b1, 0x20ac];
  const alphabet = [...units, ...more].map((c) => String.fromCharCode(c));
  alphabet.push('\u{1F600}', '\u{10FFFF}', 'job-42');
  let seed = 1;
  const next = (n: number): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed % n;
  };
  let bad = 0;
  for (let k = 0; k < 5000; k++) {
    let key = '';
    for (let n = next(8); n > 0; n--) key += alphabet[next(alphabet.length)];
    if (hashShardKey(key) !== reference(key)) bad++;
  }
  t.equal(bad, 0, '5,000 random keys hash as the TextEncoder reference does');
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

t.test('tenants written before priority weights existed read with weight 1', (t) => {
  // A snapshot and a log entry as an older node wrote them: tenants without priorityWeight.
  const old = { id: 'old', signingSecrets: ['whsec_x'], inflightMax: 10, updatedAtMs: 5 };
  const snapshot = new TextEncoder().encode(
    JSON.stringify({ initialized: true, members: [], groups: [], tenants: [old] }),
  );
  const sm = new MetaStateMachine();
  sm.restore(snapshot);
  t.equal(sm.tenants.get('old')?.priorityWeight, 1, 'restored from an old snapshot');
  const data = new TextEncoder().encode(
    JSON.stringify({ op: 'create-tenant', tenant: { ...old, id: 'older' } }),
  );
  t.same(sm.apply({ term: 1, index: 1, type: 'normal', data }), { ok: true });
  t.equal(sm.tenants.get('older')?.priorityWeight, 1, 'applied from an old log entry');
  sm.apply({
    term: 1,
    index: 2,
    type: 'normal',
    data: encodeMetaCommand({
      op: 'update-tenant',
      tenant: { ...old, priorityWeight: 7, updatedAtMs: 6 },
      expectedUpdatedAtMs: 5,
    }),
  });
  const copy = new MetaStateMachine();
  copy.restore(sm.snapshot());
  t.equal(copy.tenants.get('old')?.priorityWeight, 7, 'a weight set later survives a snapshot');
  t.end();
});
