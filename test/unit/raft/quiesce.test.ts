// Quiescence: an idle, caught-up group stops heartbeating (only a beacon every three election
// timeouts), any activity wakes it, and a dead leader of a quiet group is still replaced.
// Driven through the synchronous harness with virtual ticks.
import t from 'tap';
import { Network } from './harness.js';

const options = { quiesceAfterTicks: 5 };

function quietNetwork(): Network {
  const net = new Network({ voters: ['n1', 'n2', 'n3'], options });
  net.startWithLeader('n1');
  return net;
}

function messagesOver(net: Network, ticks: number): number {
  const before = net.sent.length;
  net.tickAll(ticks);
  return net.sent.length - before;
}

t.test('an idle group quiesces and then sends almost nothing', (t) => {
  const net = quietNetwork();
  net.tickAll(10);
  t.ok(net.raft('n1').quiesced, 'leader quiesced');
  t.ok(net.raft('n2').quiesced && net.raft('n3').quiesced, 'followers quiesced');
  const quiet = messagesOver(net, 60);
  t.ok(quiet <= 4, `60 quiet ticks cost ${quiet} messages (two beacons to two followers)`);
  t.equal(net.raft('n1').role, 'leader', 'still the leader');
  t.notOk(net.raft('n1').isLeaseValid(), 'no lease while quiet');
  t.end();
});

t.test('a proposal wakes the group and commits', (t) => {
  const net = quietNetwork();
  net.tickAll(10);
  const r = net.propose('n1', 'wake');
  t.ok(r.ok);
  net.stabilize();
  for (const id of ['n1', 'n2', 'n3']) t.same(net.appliedTexts(id), ['wake'], `${id} applied`);
  t.notOk(net.raft('n1').quiesced, 'leader awake');
  t.notOk(net.raft('n2').quiesced, 'follower awake');
  net.tickAll(2);
  t.ok(net.raft('n1').isLeaseValid(), 'lease back after a heartbeat round');
  t.end();
});

t.test('a ReadIndex on a quiet leader wakes it and is answered', (t) => {
  const net = quietNetwork();
  net.tickAll(10);
  net.get('n1').node.readIndex(7);
  net.stabilize();
  t.same(
    net.get('n1').readStates.map((s) => s.requestId),
    [7],
  );
  t.equal(net.get('n1').readStates[0]?.ok, true);
  t.end();
});

t.test('followers of a dead quiet leader elect a new one', (t) => {
  const net = quietNetwork();
  net.tickAll(10);
  t.ok(net.raft('n2').quiesced);
  net.isolate('n1');
  let ticks = 0;
  while (
    net.leader() === 'n1' ||
    (net.raft('n2').role !== 'leader' && net.raft('n3').role !== 'leader')
  ) {
    net.tickAll(1);
    if (++ticks > 200) break;
  }
  const newLeader = ['n2', 'n3'].find((id) => net.raft(id).role === 'leader');
  t.ok(newLeader, `a new leader after ${ticks} ticks`);
  t.ok(ticks <= 9 * 10 + 2 * 10 + 5, 'within three missed beacons plus an election');
  const r = net.propose(newLeader!, 'after');
  t.ok(r.ok);
  net.stabilize();
  t.same(net.appliedTexts(newLeader!), ['after']);
  t.end();
});

t.test('a follower that restarts behind asks a quiet leader to catch it up', (t) => {
  const net = quietNetwork();
  net.propose('n1', 'x');
  net.stabilize();
  net.tickAll(10);
  t.ok(net.raft('n1').quiesced);
  net.restart('n3');
  // The restarted node lost its in-memory commit index; the next beacon makes it ask.
  net.tickAll(40);
  t.ok(net.raft('n3').log.committed >= net.raft('n1').log.committed, 'n3 caught up on commit');
  // (The harness keeps the pre-crash applied list, so 'x' shows again after the replay.)
  t.equal(net.appliedTexts('n3').at(-1), 'x', 'n3 applied x again after its restart');
  t.equal(net.raft('n3').log.applied, net.raft('n1').log.committed, 'n3 applied everything');
  t.end();
});

t.test('work due soon: followers of a dead quiet leader elect within one election timeout', (t) => {
  const net = quietNetwork();
  net.tickAll(10);
  t.ok(net.raft('n2').quiesced && net.raft('n3').quiesced, 'followers quiesced');
  net.isolate('n1');
  // The runtime tells every replica that its applied state has work due soon.
  for (const id of ['n1', 'n2', 'n3']) net.raft(id).setDueSoon(true);
  t.notOk(net.raft('n2').quiesced, 'n2 awake');
  let ticks = 0;
  while (net.raft('n2').role !== 'leader' && net.raft('n3').role !== 'leader') {
    net.tickAll(1);
    if (++ticks > 200) break;
  }
  // Election timeout 10 ticks, spread over 10 more: without the hint it took up to 9 timeouts.
  t.ok(ticks <= 2 * 10 + 2, `a new leader ${ticks} ticks after the hint`);
  t.end();
});

t.test(
  'work due soon with a live quiet leader: it wakes, keeps awake, and nobody campaigns',
  (t) => {
    const net = quietNetwork();
    net.tickAll(10);
    const term = net.raft('n1').term;
    t.ok(net.raft('n1').quiesced, 'leader quiesced');
    // Only the followers learn of it first (their clocks ran ahead): they ask the leader to wake.
    net.raft('n2').setDueSoon(true);
    net.raft('n3').setDueSoon(true);
    net.stabilize();
    t.notOk(net.raft('n1').quiesced, 'the leader woke on the followers’ request');
    net.raft('n1').setDueSoon(true);
    net.tickAll(60);
    t.notOk(net.raft('n1').quiesced, 'the leader stays awake while work is due soon');
    t.equal(net.raft('n1').term, term, 'no election');
    t.equal(net.leader(), 'n1');
    t.ok(net.raft('n1').isLeaseValid(), 'a lease, kept by heartbeats');
    for (const id of ['n1', 'n2', 'n3']) net.raft(id).setDueSoon(false);
    net.tickAll(10);
    t.ok(net.raft('n1').quiesced && net.raft('n2').quiesced, 'quiet again once nothing is due');
    t.equal(net.raft('n1').term, term);
    t.end();
  },
);

t.test('a quiet leader that does not know work is due is woken by a follower that does', (t) => {
  const net = quietNetwork();
  net.tickAll(10);
  net.raft('n2').setDueSoon(true);
  // Each time the leader quiesces again, its beacon meets a follower that wants it awake.
  for (let i = 0; i < 6; i++) {
    net.tickAll(10);
    t.equal(net.raft('n1').role, 'leader', `n1 still leads after ${(i + 1) * 10} ticks`);
  }
  t.equal(net.raft('n2').role, 'follower');
  t.end();
});
