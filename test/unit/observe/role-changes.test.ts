// Each role change a replica can go through is named for why it happened: the kinds that point
// at a held or cut-off node (a silent leader, a lost quorum) apart from routine ones.
import t from 'tap';
import { RoleChanges } from '../../../src/observe/role-changes.js';

t.test('the first sight of a group only records it', (t) => {
  const rc = new RoleChanges();
  t.equal(rc.observe(1, 'leader', 3, 'n1'), undefined);
  t.equal(rc.observe(1, 'leader', 3, 'n1'), undefined, 'nothing changed: nothing reported');
  t.end();
});

t.test('a follower that campaigns through pre-vote: its leader went silent', (t) => {
  const rc = new RoleChanges();
  rc.observe(1, 'follower', 3, 'n2');
  t.same(rc.observe(1, 'pre-candidate', 3, ''), {
    groupId: 1,
    reason: 'leader-silent',
    from: 'follower',
    to: 'pre-candidate',
    termBefore: 3,
    term: 3,
    leaderBefore: 'n2',
    leader: '',
  });
  t.equal(rc.observe(1, 'candidate', 4, ''), undefined, 'pre-vote won: not a change of its own');
  t.equal(rc.observe(1, 'leader', 4, 'n1'), undefined, 'elected: the leader change says so');
  t.end();
});

t.test('a follower that campaigns without pre-vote: a transfer', (t) => {
  const rc = new RoleChanges();
  rc.observe(2, 'follower', 5, 'n3');
  t.equal(rc.observe(2, 'candidate', 6, '')?.reason, 'transfer');
  t.end();
});

t.test('a leader that steps down: in its own term check-quorum, else a later term', (t) => {
  const rc = new RoleChanges();
  rc.observe(1, 'leader', 7, 'n1');
  rc.observe(2, 'leader', 7, 'n1');
  const quorum = rc.observe(1, 'follower', 7, '');
  t.equal(quorum?.reason, 'check-quorum');
  t.equal(quorum?.leaderBefore, 'n1');
  const later = rc.observe(2, 'follower', 8, 'n2');
  t.equal(later?.reason, 'higher-term');
  t.equal(later?.leader, 'n2', 'with the leader it follows now');
  t.end();
});

t.test('a campaign that ends as a follower was lost', (t) => {
  const rc = new RoleChanges();
  rc.observe(1, 'pre-candidate', 2, '');
  t.equal(rc.observe(1, 'follower', 2, 'n2')?.reason, 'campaign-lost');
  rc.observe(3, 'candidate', 4, '');
  t.equal(rc.observe(3, 'follower', 5, 'n3')?.reason, 'campaign-lost');
  t.end();
});

t.test('a follower that learns a new leader is not a role change of its own', (t) => {
  const rc = new RoleChanges();
  rc.observe(1, 'follower', 2, 'n2');
  t.equal(rc.observe(1, 'follower', 3, 'n3'), undefined);
  t.end();
});

t.test('a forgotten group starts again from its next sight', (t) => {
  const rc = new RoleChanges();
  rc.observe(1, 'leader', 2, 'n1');
  rc.forget(1);
  t.equal(rc.observe(1, 'follower', 3, 'n2'), undefined);
  t.end();
});
