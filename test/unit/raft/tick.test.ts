// tick(n): after a stall the runtime hands the core every elapsed tick at once. The lease must
// see all of that time (a leader frozen past its lease holds none afterwards), a follower must
// campaign as if the ticks came one by one, and the catch-up must cost one heartbeat, not n.
import t from 'tap';
import { Network } from './harness.js';

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
