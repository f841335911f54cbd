// The meta group's membership commands through MetaStateMachine.apply, as every replica runs
// them: joins refused on a used id or address (and idempotent for the same node asking again),
// drain and removal rules, and a replica move's phases (begin → promote → finish bumps the
// epoch; abort only before promote). A refused command changes nothing, and the state
// survives a snapshot round trip.
import t from 'tap';
import { MetaStateMachine } from '../../../src/placement/meta-state.js';
import { metaCluster, type MetaFixture } from './meta-fixture.js';

function cluster(): MetaFixture {
  return metaCluster(3, 200);
}

t.test('a join is refused on an id or address in use, and idempotent for the same node', (t) => {
  const { sm, run } = cluster();
  const n4 = {
    op: 'add-member',
    id: 'n4',
    peerAddress: '127.0.0.1:7104',
    apiAddress: '127.0.0.1:7004',
  } as const;
  t.same(run(n4), { ok: true });
  t.equal(sm.members.get('n4')?.state, 'active');
  t.same(run(n4), { ok: true }, 'the same node asking again');
  t.match(run({ ...n4, peerAddress: '127.0.0.1:7999', apiAddress: '' }), {
    ok: false,
    code: 'META_MEMBER_EXISTS',
  });
  t.match(run({ ...n4, id: 'n5' }), { ok: false, code: 'META_ADDRESS_IN_USE', reason: /7104.*n4/ });
  t.match(run({ ...n4, id: 'n5', peerAddress: '127.0.0.1:7105', apiAddress: '127.0.0.1:7001' }), {
    ok: false,
    code: 'META_ADDRESS_IN_USE',
  });
  t.match(run({ ...n4, id: 'n5', peerAddress: '127.0.0.1:7001', apiAddress: '' }), {
    ok: false,
    code: 'META_ADDRESS_IN_USE',
  });
  t.match(run({ ...n4, id: '', peerAddress: '' }), { ok: false, code: 'META_MEMBER_INVALID' });
  t.equal(sm.members.size, 4, 'refusals changed nothing');
  t.end();
});

t.test('removal waits until the member holds nothing; removed ids are not reused', (t) => {
  const { sm, run } = cluster();
  t.match(run({ op: 'set-member-state', id: 'n3', state: 'removed' }), {
    ok: false,
    code: 'META_MEMBER_HAS_REPLICAS',
  });
  t.same(run({ op: 'set-member-state', id: 'n3', state: 'draining' }), { ok: true });
  run({ op: 'add-member', id: 'n4', peerAddress: 'h:4', apiAddress: 'h:5' });
  t.match(run({ op: 'set-member-state', id: 'n9', state: 'draining' }), { code: 'META_NO_MEMBER' });
  t.same(run({ op: 'set-member-state', id: 'n4', state: 'removed' }), { ok: true });
  t.match(run({ op: 'add-member', id: 'n4', peerAddress: 'h:4', apiAddress: 'h:5' }), {
    code: 'META_MEMBER_EXISTS',
    reason: /never reused/,
  });
  t.same(
    run({ op: 'add-member', id: 'n5', peerAddress: 'h:4', apiAddress: 'h:5' }),
    { ok: true },
    'a removed member’s address is free',
  );
  t.equal(sm.members.get('n3')?.state, 'draining');
  t.end();
});

t.test('a move goes learner → promote → finish, or aborts before promote', (t) => {
  const { sm, run } = cluster();
  run({ op: 'add-member', id: 'n4', peerAddress: 'h:4', apiAddress: 'h:5' });
  t.match(run({ op: 'begin-move', groupId: 1, from: 'n1', to: 'n2' }), {
    code: 'META_MOVE_INVALID',
  });
  t.match(run({ op: 'begin-move', groupId: 1, from: 'n9', to: 'n4' }), {
    code: 'META_MOVE_INVALID',
  });
  t.match(run({ op: 'begin-move', groupId: 9, from: 'n1', to: 'n4' }), { code: 'META_NO_GROUP' });
  t.same(run({ op: 'begin-move', groupId: 1, from: 'n1', to: 'n4' }), { ok: true });
  t.same(run({ op: 'begin-move', groupId: 1, from: 'n1', to: 'n4' }), { ok: true }, 'retried');
  t.match(run({ op: 'begin-move', groupId: 1, from: 'n2', to: 'n4' }), {
    code: 'META_MOVE_IN_FLIGHT',
  });
  t.match(run({ op: 'finish-move', groupId: 1 }), { code: 'META_MOVE_PHASE' });
  t.match(run({ op: 'set-member-state', id: 'n4', state: 'removed' }), {
    code: 'META_MEMBER_HAS_REPLICAS',
  });
  t.same(run({ op: 'promote-move', groupId: 1 }), { ok: true });
  t.match(run({ op: 'abort-move', groupId: 1 }), { code: 'META_MOVE_PHASE' });
  const copy = new MetaStateMachine();
  copy.restore(sm.snapshot());
  t.same(
    copy.moves.get(1),
    { groupId: 1, from: 'n1', to: 'n4', phase: 'promote' },
    'moves survive a snapshot',
  );
  t.same(run({ op: 'finish-move', groupId: 1 }), { ok: true });
  t.same(sm.groups.get(1), { id: 1, start: 0, end: 100, replicas: ['n2', 'n3', 'n4'], epoch: 2 });
  t.equal(sm.moves.size, 0);
  t.same(run({ op: 'begin-move', groupId: 2, from: 'n2', to: 'n4' }), { ok: true });
  t.same(run({ op: 'abort-move', groupId: 2 }), { ok: true });
  t.same(sm.groups.get(2)?.replicas, ['n1', 'n2', 'n3']);
  t.equal(sm.groups.get(2)?.epoch, 1, 'an abandoned move leaves the epoch');
  t.end();
});
