// A runtime whose loop is held (a slow synced write between ready() and advance()) neither ticks
// nor steps its replicas. Heartbeats without a round keep a held leader's followers from
// campaigning, change nothing in the leader and back no lease; and when the held loop then drains
// messages of two terms at once, what the old term queued does not leave after the new term's
// state is persisted.
import t from 'tap';
import { message } from '../../../src/raft/messages.js';
import { Network } from './harness.js';

const OPTIONS = { electionTimeoutTicks: 10, heartbeatTicks: 2, preVote: true, checkQuorum: true };

/** Holds n1 (leader) for `ticks` follower ticks; with `beat`, its round-less heartbeats flow. */
function holdLeader(beat: boolean, ticks: number) {
  const net = new Network({ voters: ['n1', 'n2', 'n3'], options: OPTIONS, seed: 3 });
  net.startWithLeader('n1');
  void net.propose('n1', 'a');
  net.stabilize();
  const term = net.raft('n1').term;
  let leaderReadies = 0;
  for (let i = 0; i < ticks; i++) {
    net.tick('n2');
    net.tick('n3');
    if (beat && i % OPTIONS.heartbeatTicks === 0)
      for (const m of net.raft('n1').heartbeatsWithoutRound()) net.get(m.to).node.step(m);
    if (net.get('n1').node.hasReady()) leaderReadies++;
    // The followers talk among themselves; nothing reaches the held leader.
    for (let r = 0; r < 100; r++) {
      net.processReadies();
      if (net.deliverRound((m) => m.to !== 'n1') === 0) break;
    }
  }
  return { net, term, leaderReadies };
}

t.test('followers of a held leader that beats without rounds do not campaign', (t) => {
  const { net, term, leaderReadies } = holdLeader(true, 30);
  t.equal(leaderReadies, 0, 'building the heartbeats gave the held leader no Ready');
  for (const id of ['n2', 'n3']) {
    t.equal(net.raft(id).role, 'follower', `${id} stayed a follower for 3 election timeouts`);
    t.equal(net.raft(id).term, term, `${id} is still in the leader's term`);
    t.equal(net.raft(id).lead, 'n1', `${id} still follows n1`);
  }
  // Released, the leader reads the acknowledgements and goes on in the same term.
  net.stabilize();
  void net.propose('n1', 'b');
  net.stabilize();
  t.equal(net.raft('n1').role, 'leader');
  t.equal(net.raft('n1').term, term);
  t.same(net.appliedTexts('n3'), ['a', 'b'], 'replication goes on');
  t.end();
});

t.test('without them, the same hold costs the leader its term (the control)', (t) => {
  const { net, term } = holdLeader(false, 30);
  const terms = ['n2', 'n3'].map((id) => net.raft(id).term);
  t.ok(
    terms.some((x) => x > term),
    `a follower campaigned into a later term (${terms.join(', ')} > ${term})`,
  );
  t.end();
});

t.test('round-less heartbeats: one per follower, context 0, commit within what it holds', (t) => {
  const net = new Network({ voters: ['n1', 'n2', 'n3'], options: OPTIONS, seed: 5 });
  net.startWithLeader('n1');
  net.isolate('n3');
  void net.propose('n1', 'a');
  net.stabilize();
  const beats = net.raft('n1').heartbeatsWithoutRound();
  t.same(beats.map((m) => m.to).sort(), ['n2', 'n3']);
  t.ok(
    beats.every((m) => m.type === 'heartbeat' && m.context === 0),
    'heartbeats of no round',
  );
  const committed = net.raft('n1').log.committed;
  t.equal(beats.find((m) => m.to === 'n2')!.commit, committed, 'n2 holds the commit');
  t.ok(
    beats.find((m) => m.to === 'n3')!.commit < committed,
    'n3 is not told to commit what it does not hold',
  );
  t.same(net.raft('n2').heartbeatsWithoutRound(), [], 'a follower sends none');
  t.notOk(net.get('n1').node.hasReady(), 'the leader is unchanged');
  t.end();
});

t.test(
  'a term change drops what the old term queued: no ack leaves for an overwritten entry',
  (t) => {
    // After a slow write, one drain can hold an append from the old leader and one from the new:
    // the first queues an acknowledgement of an entry the second overwrites before the Ready is
    // persisted. A receiver still in the old term must never count it.
    const net = new Network({ voters: ['n1', 'n2', 'n3'], options: OPTIONS, seed: 9 });
    net.startWithLeader('n1');
    const term = net.raft('n1').term;
    void net.propose('n1', 'x');
    net.processReadies();
    const oldApp = net.queue.find(
      (m) => m.type === 'app' && m.to === 'n3' && m.entries.length > 0,
    )!;
    t.ok(oldApp, 'the old leader appends x');
    const at = oldApp.index + 1;
    const n3 = net.get('n3').node;
    n3.step(oldApp);
    const newApp = message({
      type: 'app',
      from: 'n2',
      to: 'n3',
      term: term + 1,
      logTerm: oldApp.logTerm,
      index: oldApp.index,
      entries: [{ term: term + 1, index: at, type: 'normal', data: new Uint8Array() }],
    });
    n3.step(newApp);
    const rd = n3.ready();
    t.same(
      rd.messages.map((m) => `${m.type}@${m.term}>${m.to}`),
      [`app-resp@${term + 1}>n2`],
      'only the new term’s acknowledgement leaves',
    );
    t.equal(rd.entries.at(-1)?.term, term + 1, `entry ${at} is the new leader’s`);
    t.end();
  },
);
