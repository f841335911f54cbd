// tick(n): after a stall the runtime hands the core every elapsed tick at once. The lease must
// see all of that time (a leader frozen past its lease holds none afterwards), a follower must
// campaign as if the ticks came one by one, and the catch-up must cost one heartbeat, not n.
// A node's election timer starts a campaign only once it applied what it knows is committed;
// a transfer from the leader does not wait.
import t from 'tap';
import type { Raft } from '../../../src/raft/raft.js';
import { Network, type HarnessNode } from './harness.js';

t.test('a leader stalled past its lease holds no lease after catching up', (t) => {
  const net = new Network({ voters: ['n1', 'n2', 'n3'] });
  net.startWithLeader('n1');
  const lead = 'n1';
  net.tickAll(3);
  t.ok(net.raft(lead).isLeaseValid(), 'lease held while healthy');
  net.get(lead).node.tick(50);
  t.notOk(net.raft(lead).isLeaseValid(), 'no lease right after a 50-tick stall');
  const heartbeats = net.queue.filter((m) => m.from === lead && m.type === 'heartbeat').length;
  t.ok(heartbeats <= 2, `one heartbeat per follower for the whole catch-up (${heartbeats})`);
  net.stabilize();
  net.tickAll(2);
  t.ok(net.raft(lead).isLeaseValid(), 'lease back once a quorum acknowledges a fresh round');
  t.end();
});

t.test('a follower given many ticks at once campaigns', (t) => {
  const net = new Network({ voters: ['n1', 'n2', 'n3'] });
  net.startWithLeader('n1');
  const lead = 'n1';
  net.isolate(lead);
  net.get('n2').node.tick(25);
  net.stabilize();
  t.not(net.raft('n2').role, 'follower', 'n2 started an election after 25 ticks in one call');
  t.end();
});

t.test('tick rejects a count that is not a positive integer', (t) => {
  const net = new Network({ voters: ['n1'] });
  t.throws(() => net.get('n1').node.tick(0));
  t.throws(() => net.get('n1').node.tick(1.5));
  t.end();
});

/**
 * n1 leads; n2 restarted with five committed entries still to apply. A snapshot past the
 * configuration entries comes first, so nothing n2 has left to apply is a configuration change
 * (which would stop a campaign for that reason).
 */
function restartedBehind(): { net: Network; n2: HarnessNode; raft: Raft } {
  const net = new Network({ voters: ['n1', 'n2', 'n3'] });
  net.startWithLeader('n1');
  net.snapshotAt('n2', net.raft('n2').log.applied);
  for (let i = 0; i < 5; i++) net.propose('n1', `e${i}`);
  net.stabilize();
  const n2 = net.restart('n2');
  return { net, n2, raft: n2.node.raft };
}

t.test('a node still applying what it knows is committed waits to campaign', (t) => {
  const { net, n2, raft } = restartedBehind();
  net.isolate('n1');
  t.ok(raft.log.committed > raft.log.applied, 'the restarted node has committed entries to apply');
  n2.node.tick(30);
  t.equal(raft.role, 'follower', 'no campaign before they are applied');
  net.processReadies();
  t.equal(raft.log.applied, raft.log.committed, 'applied');
  n2.node.tick(30);
  t.not(raft.role, 'follower', 'then it campaigns');
  t.end();
});

t.test('a node the leader hands the group to campaigns while still applying', (t) => {
  const { net, raft } = restartedBehind();
  const n1 = net.get('n1');
  n1.node.transferLeader('n2');
  // Only the leader's Ready: n2 must not apply meanwhile.
  while (n1.node.hasReady()) {
    const rd = n1.node.ready();
    n1.storage.append(rd.entries);
    if (rd.hardState) n1.storage.setHardState(rd.hardState);
    net.queue.push(...rd.messages);
    n1.node.advance();
  }
  t.ok(raft.log.committed > raft.log.applied, 'n2 has not applied its log yet');
  net.deliverRound((m) => m.type === 'timeout-now');
  t.equal(raft.role, 'candidate', 'the transfer starts its election at once');
  t.end();
});
