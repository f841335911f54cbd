import t from 'tap';
import { groupLeaderOf, type ReplicaView } from '../../../src/cluster/group-leader.js';

const r = (nodeId: string, role: string, term: number, lead = ''): ReplicaView => ({
  nodeId,
  role,
  term,
  lead,
});

t.test('the leader of the highest term, whatever order the replicas answer in', (t) => {
  const replicas = [r('n1', 'leader', 5, 'n1'), r('n2', 'follower', 5, 'n1')];
  t.same(groupLeaderOf(replicas), { term: 5, leader: 'n1', leaderReplica: replicas[0] });
  t.same(groupLeaderOf([...replicas].reverse()).leader, 'n1');
  t.end();
});

t.test('a deposed leader is never paired with a newer term', (t) => {
  // n1 still thinks it leads term 5; n2 has moved to term 6 and knows no leader yet.
  const stale = [r('n1', 'leader', 5, 'n1'), r('n2', 'pre-candidate', 6), r('n3', 'follower', 5)];
  t.same(groupLeaderOf(stale), { term: 6, leader: '', leaderReplica: undefined });
  t.same(groupLeaderOf([...stale].reverse()).leader, '');
  t.end();
});

t.test('a follower of the highest term names its leader when that leader did not answer', (t) => {
  const replicas = [r('n1', 'leader', 5, 'n1'), r('n2', 'follower', 6, 'n3'), r('n3', '', 0)];
  t.same(groupLeaderOf(replicas), { term: 6, leader: 'n3', leaderReplica: undefined });
  t.end();
});

t.test('the leader that answered wins over a hint', (t) => {
  const replicas = [r('n2', 'follower', 7, 'n3'), r('n3', 'leader', 7, 'n3')];
  t.equal(groupLeaderOf(replicas).leader, 'n3');
  t.equal(groupLeaderOf(replicas).leaderReplica?.nodeId, 'n3');
  t.end();
});

t.test('no answers: no term, no leader', (t) => {
  t.same(groupLeaderOf([r('n1', '', 0), r('n2', '', 0)]), {
    term: 0,
    leader: '',
    leaderReplica: undefined,
  });
  t.end();
});
