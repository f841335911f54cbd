// The meta group's split commands through MetaStateMachine.apply: begin-split picks the middle
// of the range and a child id never used before (two splits in flight never share one), is
// idempotent, and is refused for an unknown group, a group moving a replica or a range too small;
// a move is refused while its group splits; finish-split gives the upper half to the child on
// the parent's replicas with both epochs above the parent's old one, and survives a snapshot.
import t from 'tap';
import { MetaStateMachine } from '../../../src/placement/meta-state.js';
import { metaCluster, type MetaFixture } from './meta-fixture.js';

function cluster(): MetaFixture {
  return metaCluster(4, 2 ** 32);
}

t.test('begin-split records the middle and a fresh child id; finish-split cuts the range', (t) => {
  const { sm, run } = cluster();
  t.match(run({ op: 'begin-split', groupId: 1 }), {
    ok: true,
    split: { groupId: 1, childId: 3, mid: 50, start: 0, end: 100 },
  });
  t.match(run({ op: 'begin-split', groupId: 1 }), { ok: true, split: { childId: 3 } }, 'again');
  t.match(run({ op: 'begin-split', groupId: 2 }), {
    ok: true,
    split: { childId: 4, mid: 100 + Math.floor((2 ** 32 - 100) / 2) },
  });
  t.match(run({ op: 'begin-move', groupId: 1, from: 'n1', to: 'n4' }), {
    ok: false,
    code: 'META_SPLIT_IN_FLIGHT',
  });
  t.match(run({ op: 'finish-split', groupId: 1, childId: 9 }), {
    ok: false,
    code: 'META_NO_SPLIT',
  });
  t.same(run({ op: 'finish-split', groupId: 1, childId: 3 }), { ok: true });
  t.same(sm.groups.get(1), { id: 1, start: 0, end: 50, replicas: ['n1', 'n2', 'n3'], epoch: 2 });
  t.same(sm.groups.get(3), {
    id: 3,
    start: 50,
    end: 100,
    replicas: ['n1', 'n2', 'n3'],
    epoch: 2,
    splitFrom: 1,
  });
  t.same(run({ op: 'finish-split', groupId: 1, childId: 3 }), { ok: true }, 'a retry is a no-op');
  t.equal(sm.splits.size, 1, 'group 2 still splitting');

  const copy = new MetaStateMachine();
  copy.restore(sm.snapshot());
  t.same([...copy.groups.values()], [...sm.groups.values()]);
  t.same([...copy.splits.values()], [...sm.splits.values()]);
  t.equal(copy.maxGroupId, 4, 'the highest id used survives a snapshot');
  t.end();
});

t.test('refusals change nothing', (t) => {
  const { sm, run } = cluster();
  t.match(run({ op: 'begin-split', groupId: 7 }), { ok: false, code: 'META_NO_GROUP' });
  t.same(run({ op: 'begin-move', groupId: 1, from: 'n1', to: 'n4' }), { ok: true });
  t.match(run({ op: 'begin-split', groupId: 1 }), { ok: false, code: 'META_MOVE_IN_FLIGHT' });
  t.match(run({ op: 'begin-split', groupId: 2, mid: 100 }), {
    ok: false,
    code: 'META_SPLIT_INVALID',
  });
  t.equal(sm.splits.size, 0);
  t.equal(sm.maxGroupId, 2, 'no id taken by a refused split');
  t.end();
});
