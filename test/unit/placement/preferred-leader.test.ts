// A data group's preferred leader in the meta state (set by TransferLeader and the rebalancer,
// read by leader balancing): recorded without touching routing (no epoch change), refused for
// an unknown group or a removed member without changing anything, kept through a split of the
// parent and a snapshot round trip, and dropped when a move takes that replica out of the group.
import t from 'tap';
import { MetaStateMachine } from '../../../src/placement/meta-state.js';
import { metaCluster } from './meta-fixture.js';

t.test('recorded without an epoch change; refusals change nothing', (t) => {
  const { sm, run } = metaCluster(4, 200);
  const before = sm.groups.get(1)!;
  t.equal(before.preferredLeader, undefined, 'none until someone sets it');
  t.same(run({ op: 'set-preferred-leader', groupId: 1, node: 'n2' }), { ok: true });
  t.equal(sm.groups.get(1)?.preferredLeader, 'n2');
  t.equal(sm.groups.get(1)?.epoch, before.epoch, 'routing caches see no change');
  t.same(sm.groups.get(1)?.replicas, before.replicas);
  t.equal(sm.groups.get(2)?.preferredLeader, undefined, 'the other group is untouched');

  t.match(run({ op: 'set-preferred-leader', groupId: 9, node: 'n2' }), {
    ok: false,
    code: 'META_NO_GROUP',
    reason: /9/,
  });
  t.match(run({ op: 'set-preferred-leader', groupId: 1, node: 'n9' }), {
    ok: false,
    code: 'META_NO_MEMBER',
    reason: /n9/,
  });
  t.same(run({ op: 'set-member-state', id: 'n4', state: 'removed' }), { ok: true });
  t.match(run({ op: 'set-preferred-leader', groupId: 1, node: 'n4' }), {
    ok: false,
    code: 'META_MEMBER_REMOVED',
  });
  t.equal(sm.groups.get(1)?.preferredLeader, 'n2', 'the refusals left the preference as it was');
  t.end();
});

t.test('a snapshot round trip keeps it; a move of that replica out of the group drops it', (t) => {
  const { sm, run } = metaCluster(4, 200);
  run({ op: 'set-preferred-leader', groupId: 1, node: 'n3' });
  run({ op: 'set-preferred-leader', groupId: 2, node: 'n2' });
  const copy = new MetaStateMachine();
  copy.restore(sm.snapshot());
  t.equal(copy.groups.get(1)?.preferredLeader, 'n3');
  t.equal(copy.groups.get(2)?.preferredLeader, 'n2');

  // Group 1 moves n3 (its preferred leader) to n4; group 2 moves n1, not its preferred n2.
  for (const [groupId, from] of [
    [1, 'n3'],
    [2, 'n1'],
  ] as const) {
    t.same(run({ op: 'begin-move', groupId, from, to: 'n4' }), { ok: true });
    t.same(run({ op: 'promote-move', groupId }), { ok: true });
    t.same(run({ op: 'finish-move', groupId }), { ok: true });
  }
  t.equal(sm.groups.get(1)?.preferredLeader, undefined, 'n3 left group 1: no preference');
  t.same(sm.groups.get(1)?.replicas, ['n1', 'n2', 'n4']);
  t.equal(sm.groups.get(2)?.preferredLeader, 'n2', 'n2 is still in group 2');
  t.end();
});

t.test('a split keeps the parent’s preference; the child starts with none', (t) => {
  const { sm, run } = metaCluster(3, 200);
  run({ op: 'set-preferred-leader', groupId: 2, node: 'n3' });
  const r = run({ op: 'begin-split', groupId: 2, mid: 150 }) as { ok: boolean };
  t.ok(r.ok, 'split begun');
  const childId = sm.splits.get(2)?.childId ?? -1;
  t.same(run({ op: 'finish-split', groupId: 2, childId }), { ok: true });
  t.equal(sm.groups.get(2)?.preferredLeader, 'n3');
  t.equal(sm.groups.get(2)?.end, 150);
  t.ok(sm.groups.has(childId), 'the child is recorded');
  t.equal(sm.groups.get(childId)?.preferredLeader, undefined);
  t.end();
});
