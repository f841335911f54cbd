// Named scenarios: whole-cluster situations that Raft must get right, run on the synchronous
// harness network (test/unit/raft/harness.ts) with cut links, isolated nodes, crashes
// (restart from persisted storage), dropped and replayed messages. Each scenario builds the
// situation step by step, asserting the state at each step, so a failure names the step that
// went wrong: the paper's Figure 8, check-quorum step-down, pre-vote on rejoin, leadership
// transfer, learners, removing the leader through joint consensus, snapshot catch-up, ReadIndex
// and the leader lease, proposal limits and membership changes. Scenarios that check a rule of
// the paper end their title with its section.
import t, { type Test } from 'tap';
import { message, type ConfChange, type Message, type NodeId } from '../../../src/raft/messages.js';
import { Raft, type RaftInit } from '../../../src/raft/raft.js';
import { Network, type HarnessOptions } from './harness.js';

const ET = 10;
const enc = (s: string): Uint8Array => new TextEncoder().encode(s);

/** A network of `voters` (default n1..n3) with n1 elected leader. */
function cluster(opts: Partial<HarnessOptions> = {}): Network {
  const net = new Network({ voters: ['n1', 'n2', 'n3'], ...opts });
  net.startWithLeader(opts.voters?.[0] ?? 'n1');
  return net;
}

/** Delivers only the first queued message. */
function deliverOne(net: Network): Message | undefined {
  const m = net.queue[0];
  let first = true;
  net.deliverRound(() => {
    const pick = first;
    first = false;
    return pick;
  });
  return m;
}

/** Ticks every node one at a time (settling the network in between) until `pred` holds. */
function tickUntil(net: Network, pred: () => boolean, maxTicks = 10 * ET): number {
  for (let i = 1; i <= maxTicks; i++) {
    net.tickAll(1);
    if (pred()) return i;
  }
  return -1;
}

/** Ticks only the given nodes, settling the network after each round. */
function tickOnly(net: Network, ids: NodeId[], n = 1): void {
  for (let i = 0; i < n; i++) {
    for (const id of ids) net.tick(id);
    net.stabilize();
  }
}

function mustPropose(net: Network, id: NodeId, text: string): number {
  const r = net.propose(id, text);
  if (!r.ok) throw new Error(`proposal ${text} on ${id} refused: ${r.reason}`);
  return r.index;
}

const leaseValid = (net: Network, id: NodeId): boolean => net.get(id).node.isLeaseValid();

const voteTypes = new Set(['vote', 'pre-vote', 'vote-resp', 'pre-vote-resp']);

// ---------------------------------------------------------------------------------------------
// Figure 8

/** The paper's Figure 8 schedule, up to (c). Classic Raft: no pre-vote, no check-quorum. */
function figure8UpToC(t: Test, makeRaft?: (init: RaftInit) => Raft): Network {
  const net = new Network({
    voters: ['n1', 'n2', 'n3', 'n4', 'n5'],
    // One entry per append, so "entry A arrived but A + 1 did not" can happen.
    options: { preVote: false, checkQuorum: false, maxMsgBytes: 1 },
    ...(makeRaft ? { makeRaft } : {}),
  });
  net.startWithLeader('n1');
  const base = net.raft('n1').log.lastIndex(); // 5 bootstrap entries + n1's no-op
  const A = base + 1;
  t.equal(net.raft('n1').log.committed, base, 'start: everything so far is committed');

  // (a) n1 leads term 2 and replicates entry A ('a') to n2 only.
  for (const id of ['n3', 'n4', 'n5']) net.cut('n1', id);
  t.equal(mustPropose(net, 'n1', 'a'), A);
  net.stabilize();
  const termA = net.raft('n1').term;
  t.equal(net.raft('n2').log.term(A), termA, '(a) n2 holds entry A');
  t.equal(net.raft('n3').log.lastIndex(), base, '(a) n3 does not');

  // (b) n1 crashes; n5 wins the next term with votes from n3 and n4 and writes its own entry
  // at index A, which nobody else receives.
  net.heal();
  net.isolate('n1');
  net.drop('app');
  net.drop('heartbeat');
  for (let i = 0; i < 5 && net.raft('n5').role !== 'leader'; i++) net.elect('n5');
  t.equal(net.raft('n5').role, 'leader', '(b) n5 leads');
  const termB = net.raft('n5').term;
  t.equal(net.raft('n5').log.term(A), termB, '(b) n5 has its own entry at A');

  // (c) n5 crashes; n1 restarts and wins a later term (n4 cannot hear it). It replicates entry A
  // to n3, so A is now on a majority (n1, n2, n3), but its term-4 no-op does not reach n3.
  net.heal();
  net.isolate('n5');
  net.restart('n1');
  net.cut('n1', 'n4');
  const B = A + 1;
  net.blockIf(
    (m) =>
      m.type === 'app' &&
      m.to === 'n3' &&
      m.entries.some((e) => e.index === B) &&
      net.raft('n3').log.lastIndex() >= A,
  );
  for (let i = 0; i < 5 && net.raft('n1').role !== 'leader'; i++) net.elect('n1');
  net.stabilize();
  const l = net.raft('n1');
  t.equal(l.role, 'leader', '(c) n1 leads again');
  t.ok(l.term > termB, '(c) in a later term');
  t.equal(l.log.term(B), l.term, '(c) its no-op sits at A + 1');
  for (const id of ['n1', 'n2', 'n3']) {
    t.equal(net.raft(id).log.term(A), termA, `(c) ${id} holds entry A of term ${termA}`);
  }
  const holders = [...l.progress.entries()].filter(([id, pr]) => id !== 'n1' && pr.match >= A);
  t.equal(holders.length + 1, 3, '(c) the leader knows a majority (3 of 5) stores entry A');
  t.equal(net.raft('n3').log.lastIndex(), A, '(c) n3 lacks the no-op');
  return net;
}

// (a)-(c) of Figure 8 put an older-term entry on a majority while the leader's own entry is not;
// it must stay uncommitted, because (d) shows another leader may still overwrite it. §5.4.2
t.test(
  'Figure 8: a leader never commits an older-term entry by counting replicas (§5.4.2)',
  (t) => {
    const net = figure8UpToC(t);
    const base = net.raft('n1').log.committed;
    const A = base + 1;
    t.equal(net.raft('n1').log.committed, A - 1, '(c) entry A is NOT committed');
    for (const id of ['n1', 'n2', 'n3', 'n4']) {
      t.same(net.appliedTexts(id), [], `(c) ${id} has not applied 'a'`);
    }

    // (d) n1 crashes again; n5 restarts and can win (n2 refuses it, n3 and n4 vote for it), then
    // overwrites entry A everywhere it reaches. That is safe only because A was never committed.
    net.heal();
    net.isolate('n1');
    net.restart('n5');
    for (let i = 0; i < 5 && net.raft('n5').role !== 'leader'; i++) net.elect('n5');
    net.stabilize();
    const n5 = net.raft('n5');
    t.equal(n5.role, 'leader', '(d) n5 is elected without entry A');
    for (const id of ['n2', 'n3', 'n4', 'n5']) {
      t.not(net.raft(id).log.term(A), net.raft('n1').log.term(A), `(d) ${id}: entry A replaced`);
      t.same(net.appliedTexts(id), [], `(d) ${id} never applied 'a'`);
    }
    t.ok(n5.log.committed > A, '(d) n5 commits its own term');

    // n1 comes back and is brought in line.
    net.heal();
    net.tickAll(3);
    t.same(net.logTerms('n1'), net.logTerms('n5'), 'after healing n1 has the same log as n5');
    t.same(net.appliedTexts('n1'), [], "n1 never applied 'a' either");
    t.end();
  },
);

// The other branch of Figure 8: once the leader's current-term entry reaches a majority, it
// and every entry before it are committed, and the conflicting node can no longer win. §5.4.2
t.test(
  'Figure 8 (e): committing a current-term entry commits the older one with it (§5.4.2)',
  (t) => {
    const net = figure8UpToC(t);
    const A = net.raft('n1').log.committed + 1;
    // The no-op now reaches n3 as well.
    net.heal();
    net.isolate('n5');
    net.tickAll(2);
    t.ok(net.raft('n1').log.committed >= A + 1, '(e) the no-op of the current term commits');
    for (const id of ['n1', 'n2', 'n3']) t.same(net.appliedTexts(id), ['a'], `(e) ${id} applies a`);
    // Now n5 can never win: a majority has a log more up to date than its own.
    net.heal();
    net.isolate('n1');
    net.restart('n5');
    for (let i = 0; i < 5; i++) net.elect('n5');
    t.not(net.raft('n5').role, 'leader', '(e) n5 cannot be elected any more');
    const n = tickUntil(net, () => ['n2', 'n3', 'n4'].includes(net.leader() ?? ''));
    t.ok(n > 0, 'another node is elected');
    net.heal();
    net.tickAll(3);
    for (const id of ['n1', 'n2', 'n3', 'n4', 'n5']) {
      t.same(net.appliedTexts(id), ['a'], `${id} keeps 'a'`);
    }
    t.end();
  },
);

class NoTermCheckRaft extends Raft {
  protected override isCommittable(): boolean {
    return true;
  }
}

// The same schedule with the current-term rule removed (via the isCommittable test seam): the
// old entry is committed and a leader without it is then elected. This shows the scenario above
// can fail, i.e. that it really exercises the rule. §5.4.2
t.test(
  'Figure 8 without the current-term rule loses a committed entry (the check matters)',
  (t) => {
    // The same schedule with the §5.4.2 rule removed: the scenario above must be able to fail.
    const net = figure8UpToC(t, (init) => new NoTermCheckRaft(init));
    const A = net.raft('n1').log.committed;
    t.equal(net.raft('n1').log.term(A), net.raft('n2').log.term(A), 'entry A was committed');
    t.same(net.appliedTexts('n1'), ['a'], "and n1 applied 'a'");
    net.heal();
    net.isolate('n1');
    net.drop('app');
    net.drop('heartbeat');
    net.restart('n5');
    for (let i = 0; i < 5 && net.raft('n5').role !== 'leader'; i++) net.elect('n5');
    const n5 = net.raft('n5');
    t.equal(n5.role, 'leader', 'n5 is elected');
    t.not(n5.log.term(A), net.raft('n1').log.term(A), 'a leader lacks a committed entry');
    t.end();
  },
);

// ---------------------------------------------------------------------------------------------
// Elections, partitions and crashes

// With check-quorum a leader that has not heard from a quorum for an election timeout steps down
// on its own; the connected majority elects a new leader and keeps committing.
t.test('an isolated leader steps down (check-quorum) and the rest elect a new leader', (t) => {
  const net = cluster();
  const term = net.raft('n1').term;
  net.tickAll(5 * ET);
  t.equal(net.leader(), 'n1', 'a leader in contact with a quorum keeps leading');
  t.equal(net.raft('n1').term, term, 'in the same term');

  net.isolate('n1');
  let stepDown = -1;
  for (let i = 1; i <= 3 * ET && stepDown < 0; i++) {
    net.tick('n1');
    if (net.raft('n1').role !== 'leader') stepDown = i;
  }
  t.ok(stepDown > 0 && stepDown <= 2 * ET, `n1 steps down within two election timeouts`);
  t.equal(net.raft('n1').role, 'follower');
  t.equal(net.raft('n1').term, term, 'stepping down does not change the term');
  t.equal(net.raft('n1').lead, '', 'and it knows no leader');
  t.notOk(leaseValid(net, 'n1'), 'no lease after stepping down');

  const n = tickUntil(net, () => ['n2', 'n3'].includes(net.leader() ?? ''));
  t.ok(n > 0, 'n2 or n3 is elected');
  const lead = net.leader()!;
  t.ok(net.raft(lead).term > term, 'in a later term');
  const idx = mustPropose(net, lead, 'after');
  net.stabilize();
  t.ok(net.raft(lead).log.committed >= idx, 'the new leader commits with the other follower');

  net.heal();
  net.tickAll(2);
  t.equal(net.raft('n1').lead, lead, 'n1 follows the new leader after healing');
  t.same(net.appliedTexts('n1'), ['after'], 'and catches up');
  t.end();
});

// A node cut off from the group keeps failing pre-elections without raising its term, so when
// it returns it follows the current leader instead of forcing a new election. Without pre-vote
// the same schedule disrupts the leader, which shows the check is meaningful.
t.test('a partitioned node rejoins without disrupting the leader (pre-vote)', (t) => {
  const net = cluster();
  const term = net.raft('n1').term;
  net.isolate('n3');
  const sentBefore = net.sent.length;
  net.tickAll(6 * ET);
  const fromN3 = net.sent.slice(sentBefore).filter((m) => m.from === 'n3');
  t.ok(
    fromN3.some((m) => m.type === 'pre-vote'),
    'the isolated node keeps trying pre-elections',
  );
  t.notOk(
    fromN3.some((m) => m.type === 'vote'),
    'but never starts a real election',
  );
  t.equal(net.raft('n3').term, term, "the isolated node's term does not rise");
  mustPropose(net, 'n1', 'while-away');
  net.stabilize();

  net.heal();
  net.tickAll(3 * ET);
  t.equal(net.leader(), 'n1', 'n1 still leads');
  t.equal(net.raft('n1').term, term, 'in the same term');
  t.equal(net.raft('n3').lead, 'n1', 'n3 follows n1');
  t.same(net.appliedTexts('n3'), ['while-away'], 'n3 catches up');

  // Without pre-vote the same schedule does disrupt the leader: the guard above is what helps.
  const classic = cluster({ options: { preVote: false } });
  const cterm = classic.raft('n1').term;
  classic.isolate('n3');
  classic.tickAll(6 * ET);
  t.ok(classic.raft('n3').term > cterm, 'without pre-vote the isolated term rises');
  classic.heal();
  classic.tickAll(3 * ET);
  t.ok(classic.raft('n1').term > cterm, 'and the leader is forced into a later term');
  t.end();
});

// The vote is persisted before the grant is sent, so a voter that crashes and restarts still
// refuses a second candidate in the same term. §5.2
t.test('a node that crashes after voting does not vote again in that term (§5.2)', (t) => {
  const net = new Network({ voters: ['n1', 'n2', 'n3'] });
  // A fresh node ignores vote requests for an election timeout: tick n1 past that first.
  net.tick('n1', ET);
  net.processReadies();
  net.queue = [];
  const term = net.raft('n1').term + 1;
  const vote = (from: NodeId): Message =>
    message({ type: 'vote', from, to: 'n1', term, index: 9, logTerm: 1 });
  const granted = (): boolean =>
    net.queue.some((m) => m.type === 'vote-resp' && m.to === 'n2' && !m.reject);
  net.get('n1').node.step(vote('n2'));
  net.processReadies();
  t.ok(granted(), 'n1 votes for n2');
  t.equal(net.get('n1').storage.hardStateNow().vote, 'n2', 'the vote is persisted');
  net.queue = [];
  net.restart('n1');
  t.equal(net.raft('n1').vote, 'n2', 'the vote survives the crash');
  t.equal(net.raft('n1').term, term);
  net.get('n1').node.step(vote('n3'));
  net.processReadies();
  t.match(
    net.queue.filter((m) => m.type === 'vote-resp'),
    [{ to: 'n3', reject: true }],
    'a second candidate in the same term is refused',
  );
  t.end();
});

// ---------------------------------------------------------------------------------------------
// Leadership transfer

// Leadership transfer to a follower that lags: the leader first brings it up to date, refusing
// proposals meanwhile, and only then sends TimeoutNow; the transferee wins the next term.
t.test('transfer to a lagging follower: caught up first, then TimeoutNow', (t) => {
  const net = cluster();
  const term = net.raft('n1').term;
  net.isolate('n3');
  for (let i = 0; i < 5; i++) mustPropose(net, 'n1', `e${i}`);
  net.stabilize();
  t.ok(net.raft('n3').log.lastIndex() < net.raft('n1').log.lastIndex(), 'n3 lags');
  net.heal();

  t.equal(net.get('n1').node.transferLeader('n3'), undefined, 'the transfer starts');
  t.equal(net.raft('n1').leadTransferee, 'n3');
  const refused = net.propose('n1', 'during');
  t.match(refused, { ok: false, reason: 'transferring', leaderHint: 'n1' }, 'proposals refused');
  t.notOk(leaseValid(net, 'n1'), 'no lease while transferring');

  let rounds = 0;
  const proposalsDuring: string[] = [];
  const sawTimeoutNow = net.runUntil(() => {
    rounds++;
    const p = net.propose('n1', 'during');
    proposalsDuring.push(p.ok ? 'accepted' : p.reason);
    return net.queue.some((m) => m.type === 'timeout-now');
  });
  t.ok(sawTimeoutNow, 'the leader sends TimeoutNow');
  t.ok(rounds > 1, 'only after some catch-up rounds');
  t.ok(
    proposalsDuring.every((r) => r === 'transferring'),
    'every proposal during the transfer is refused as transferring',
  );
  t.equal(
    net.raft('n3').log.lastIndex(),
    net.raft('n1').log.lastIndex(),
    'the transferee is fully caught up when TimeoutNow leaves',
  );
  t.match(
    net.queue.find((m) => m.type === 'timeout-now'),
    { from: 'n1', to: 'n3' },
  );
  net.stabilize();
  t.equal(net.leader(), 'n3', 'n3 leads');
  t.equal(net.raft('n3').term, term + 1, 'in the next term');
  t.equal(net.raft('n1').role, 'follower');
  t.equal(net.raft('n1').leadTransferee, '', 'transfer state cleared');
  const idx = mustPropose(net, 'n3', 'after');
  net.stabilize();
  for (const id of ['n1', 'n2', 'n3']) {
    t.same(net.appliedTexts(id), ['e0', 'e1', 'e2', 'e3', 'e4', 'after'], `${id} applied`);
    t.ok(net.raft(id).log.committed >= idx);
  }
  t.end();
});

// A transfer that cannot complete within an election timeout is abandoned and the leader goes on
// accepting proposals.
t.test('a transfer to an unreachable node is abandoned after an election timeout', (t) => {
  const net = cluster();
  const term = net.raft('n1').term;
  net.isolate('n3');
  mustPropose(net, 'n1', 'x');
  net.stabilize();
  t.equal(net.get('n1').node.transferLeader('n3'), undefined);
  t.match(net.propose('n1', 'y'), { ok: false, reason: 'transferring' });
  tickOnly(net, ['n1', 'n2'], ET);
  t.equal(net.raft('n1').leadTransferee, '', 'the transfer is abandoned');
  t.equal(net.leader(), 'n1', 'n1 still leads');
  t.equal(net.raft('n1').term, term);
  t.match(net.propose('n1', 'z'), { ok: true }, 'proposals are accepted again');
  t.end();
});

// ---------------------------------------------------------------------------------------------
// Learners

// Learners receive and apply entries but are never asked to vote, never answer votes, never
// campaign (not even on TimeoutNow), and their acknowledgements do not count towards commit.
t.test('a learner never votes nor counts for commit, but receives entries', (t) => {
  const net = new Network({ voters: ['n1', 'n2', 'n3'], learners: ['n4'] });
  net.startWithLeader('n1');
  t.ok(net.raft('n1').progress.get('n4')?.isLearner, 'n4 is tracked as a learner');
  t.notOk(net.raft('n4').isVoter('n4'), 'n4 knows it is a learner');

  // Only the learner acknowledges: nothing commits.
  net.isolate('n2');
  net.isolate('n3');
  const before = net.raft('n1').log.committed;
  const idx = mustPropose(net, 'n1', 'l1');
  net.stabilize();
  t.equal(net.raft('n4').log.lastIndex(), idx, 'the learner receives the entry');
  t.equal(net.raft('n1').progress.get('n4')?.match, idx, 'and acknowledges it');
  t.equal(net.raft('n1').log.committed, before, "the learner's ack alone does not commit");
  net.heal();
  net.stabilize();
  net.tickAll(1);
  t.ok(net.raft('n1').log.committed >= idx, 'a voter ack commits it');
  t.same(net.appliedTexts('n4'), ['l1'], 'the learner applies committed entries');

  // The learner never campaigns, however long it hears nothing, even when told to.
  net.isolate('n4');
  const sentBefore = net.sent.length;
  net.tick('n4', 20 * ET);
  net.get('n4').node.campaign();
  net
    .get('n4')
    .node.step(message({ type: 'timeout-now', from: 'n1', to: 'n4', term: net.raft('n4').term }));
  net.processReadies();
  t.equal(net.raft('n4').role, 'follower', 'the learner stays a follower');
  t.notOk(
    net.sent.slice(sentBefore).some((m) => m.from === 'n4' && voteTypes.has(m.type)),
    'and sends no vote requests',
  );
  t.match(
    net.get('n1').node.transferLeader('n4'),
    { ok: false },
    'leadership cannot be transferred to a learner',
  );
  net.heal();

  // Elections among the voters never involve the learner.
  net.isolate('n1');
  const n = tickUntil(net, () => ['n2', 'n3'].includes(net.leader() ?? ''));
  t.ok(n > 0, 'the voters elect a new leader');
  t.notOk(
    net.sent.some((m) => voteTypes.has(m.type) && (m.to === 'n4' || m.from === 'n4')),
    'no vote request ever went to the learner and it never answered one',
  );
  const lead = net.leader()!;
  mustPropose(net, lead, 'l2');
  net.stabilize();
  t.same(net.appliedTexts('n4'), ['l1', 'l2'], 'the learner follows the new leader');
  t.end();
});

// ---------------------------------------------------------------------------------------------
// Membership

// Removing the leader with an explicit joint change: the leader keeps leading (it is still in
// C_old) and commits in C_old,new only with both majorities; once the leave entry applies it
// steps down, and the remaining voters elect a new leader and go on committing. Raft thesis §4.3
t.test(
  'removing the leader under joint consensus: it leads through joint, then steps down',
  (t) => {
    const voters = ['n1', 'n2', 'n3', 'n4'];
    const net = cluster({ voters });
    const term = net.raft('n1').term;
    const enter: ConfChange = {
      transition: 'explicit',
      changes: [{ type: 'remove-node', nodeId: 'n1' }],
    };
    t.match(net.get('n1').node.proposeConfChange(enter), { ok: true }, 'enter joint proposed');
    net.stabilize();
    for (const id of voters) {
      t.same(
        net.raft(id).confState.votersOutgoing,
        ['n1', 'n2', 'n3', 'n4'],
        `${id} applied C_old`,
      );
      t.same(net.raft(id).confState.voters, ['n2', 'n3', 'n4'], `${id} applied C_new`);
    }
    t.equal(net.raft('n1').role, 'leader', 'n1 keeps leading in the joint configuration');
    t.equal(net.raft('n1').term, term);

    // Decisions need both halves: n2 and n3 away leave C_new without a majority.
    net.isolate('n2');
    net.isolate('n3');
    const blocked = mustPropose(net, 'n1', 'joint-1');
    net.stabilize();
    t.ok(net.raft('n1').log.committed < blocked, 'no commit without a majority of C_new');
    net.heal();
    net.tickAll(1);
    t.ok(net.raft('n1').log.committed >= blocked, 'commits once both halves agree');
    t.equal(net.raft('n1').role, 'leader', 'still leading');

    const leave = net.get('n1').node.proposeConfChange({ transition: 'explicit', changes: [] });
    t.match(leave, { ok: true }, 'leave joint proposed by the leader being removed');
    net.stabilize();
    const n1 = net.raft('n1');
    t.equal(n1.role, 'follower', 'n1 steps down once the leave entry is applied');
    t.notOk(n1.isVoter('n1'), 'n1 is no longer a voter');
    for (const id of ['n2', 'n3', 'n4']) {
      t.same(net.raft(id).confState.votersOutgoing, [], `${id} left joint`);
      t.same(net.raft(id).confState.voters, ['n2', 'n3', 'n4'], `${id} config`);
    }

    const sentBefore = net.sent.length;
    const n = tickUntil(net, () => ['n2', 'n3', 'n4'].includes(net.leader() ?? ''));
    t.ok(n > 0, 'the remaining voters elect a new leader');
    const lead = net.leader()!;
    t.notOk(
      net.sent.slice(sentBefore).some((m) => m.from === 'n1' && voteTypes.has(m.type)),
      'the removed node never campaigns',
    );
    const idx = mustPropose(net, lead, 'after-removal');
    net.stabilize();
    for (const id of ['n2', 'n3', 'n4']) {
      t.ok(net.raft(id).log.committed >= idx, `${id} commits after the removal`);
      t.same(net.appliedTexts(id), ['joint-1', 'after-removal'], `${id} applied`);
    }
    t.end();
  },
);

// The same with 'auto': the leader proposes the leave step itself, then steps down (here it is
// demoted to a learner and keeps receiving entries).
t.test('removing the leader with an auto-leave joint change', (t) => {
  const net = cluster();
  const r = net.get('n1').node.proposeConfChange({
    transition: 'auto',
    changes: [
      { type: 'remove-node', nodeId: 'n1' },
      { type: 'add-learner', nodeId: 'n1' },
    ],
  });
  t.match(r, { ok: true });
  net.stabilize();
  t.equal(net.raft('n1').role, 'follower', 'n1 stepped down after the automatic leave');
  t.same(net.raft('n2').confState, {
    voters: ['n2', 'n3'],
    votersOutgoing: [],
    learners: ['n1'],
    learnersNext: [],
    autoLeave: false,
  });
  const n = tickUntil(net, () => ['n2', 'n3'].includes(net.leader() ?? ''));
  t.ok(n > 0, 'n2 or n3 is elected');
  const lead = net.leader()!;
  mustPropose(net, lead, 'x');
  net.stabilize();
  for (const id of ['n1', 'n2', 'n3']) {
    t.same(net.appliedTexts(id), ['x'], `${id} applied (n1 as a learner)`);
  }
  t.end();
});

// An 'auto' joint change whose leave entry never left the old leader: the leader elected next
// (by both halves) must finish the joint change itself.
t.test('a leader elected in the middle of an auto-leave joint change finishes it', (t) => {
  const net = cluster({ voters: ['n1', 'n2', 'n3', 'n4'] });
  // The old leader's leave entry never leaves it.
  net.blockIf(
    (m) =>
      m.from === 'n1' &&
      m.entries.some(
        (e) =>
          e.type === 'conf-change' && new TextDecoder().decode(e.data).includes('"changes":[]'),
      ),
  );
  const r = net.get('n1').node.proposeConfChange({
    transition: 'auto',
    changes: [{ type: 'remove-node', nodeId: 'n4' }],
  });
  t.match(r, { ok: true });
  net.stabilize();
  for (const id of ['n1', 'n2', 'n3', 'n4']) {
    t.same(net.raft(id).confState.votersOutgoing, ['n1', 'n2', 'n3', 'n4'], `${id} is joint`);
  }
  net.heal();
  net.isolate('n1');
  const n = tickUntil(net, () => ['n2', 'n3'].includes(net.leader() ?? ''));
  t.ok(n > 0, 'a new leader is elected by both halves (n4 still votes in C_old)');
  net.stabilize();
  for (const id of ['n2', 'n3']) {
    t.same(net.raft(id).confState.votersOutgoing, [], `${id} left the joint configuration`);
    t.same(net.raft(id).confState.voters, ['n1', 'n2', 'n3'], `${id} config`);
  }
  t.end();
});

// A node added as a voter replays the log from index 1 (the bootstrap conf changes included) and
// ends with the same configuration, log and state; the quorum then counts it.
t.test('adding a voter with a simple conf change; the new node catches up', (t) => {
  const net = new Network({ voters: ['n1', 'n2', 'n3'], extra: ['n4'] });
  net.startWithLeader('n1');
  mustPropose(net, 'n1', 'before');
  net.stabilize();
  t.same(net.raft('n4').confState.voters, [], 'n4 starts outside any configuration');
  const sentBefore = net.sent.length;
  net.tick('n4', 5 * ET);
  net.processReadies();
  t.notOk(
    net.sent.slice(sentBefore).some((m) => m.from === 'n4'),
    'a node in no configuration does not campaign',
  );

  const r = net.get('n1').node.proposeConfChange({
    transition: 'simple',
    changes: [{ type: 'add-voter', nodeId: 'n4' }],
  });
  t.match(r, { ok: true });
  net.stabilize();
  mustPropose(net, 'n1', 'after');
  net.stabilize();
  for (const id of ['n1', 'n2', 'n3', 'n4']) {
    t.same(net.raft(id).confState.voters, ['n1', 'n2', 'n3', 'n4'], `${id} has four voters`);
  }
  t.same(net.logTerms('n4'), net.logTerms('n1'), 'n4 has the same log as the leader');
  t.same(net.appliedTexts('n4'), ['before', 'after'], 'and applied the same entries');

  // The quorum is now 3 of 4: n1 and n4 alone cannot commit.
  net.isolate('n2');
  net.isolate('n3');
  const idx = mustPropose(net, 'n1', 'needs-three');
  net.stabilize();
  t.ok(net.raft('n1').log.committed < idx, 'two of four voters do not commit');
  net.heal();
  net.tickAll(1);
  t.ok(net.raft('n1').log.committed >= idx, 'three of four do');
  t.end();
});

// A voter added after the leader compacted its log is brought up by a snapshot.
t.test('adding a voter after compaction: the new node starts from a snapshot', (t) => {
  const net = new Network({ voters: ['n1', 'n2', 'n3'], extra: ['n4'] });
  net.startWithLeader('n1');
  for (let i = 0; i < 5; i++) mustPropose(net, 'n1', `s${i}`);
  net.stabilize();
  const h = net.get('n1');
  net.snapshotAt('n1', h.node.raft.log.applied);
  t.ok(h.storage.firstIndex() > 1, 'the leader compacted its log');
  t.match(
    net.get('n1').node.proposeConfChange({
      transition: 'simple',
      changes: [{ type: 'add-voter', nodeId: 'n4' }],
    }),
    { ok: true },
  );
  net.stabilize();
  net.tickAll(2);
  t.ok(
    net.sent.some((m) => m.type === 'snap' && m.to === 'n4'),
    'the new node is sent a snapshot',
  );
  t.same(net.raft('n4').confState.voters, ['n1', 'n2', 'n3', 'n4'], 'and ends in the new config');
  t.same(net.stateTexts('n4'), ['s0', 's1', 's2', 's3', 's4'], 'with the same state');
  t.end();
});

// Only one membership change may be in flight: a second is refused until the first is applied;
// an invalid change is refused up front.
t.test('a conf change is refused while another is pending', (t) => {
  const net = cluster();
  const first = net.get('n1').node.proposeConfChange({
    transition: 'simple',
    changes: [{ type: 'add-learner', nodeId: 'n4' }],
  });
  t.match(first, { ok: true });
  const second = net.get('n1').node.proposeConfChange({
    transition: 'simple',
    changes: [{ type: 'add-learner', nodeId: 'n5' }],
  });
  t.match(second, { ok: false, reason: 'conf-change-pending', leaderHint: 'n1' });
  t.match(net.propose('n1', 'normal'), { ok: true }, 'ordinary proposals still go through');
  net.stabilize();
  const third = net.get('n1').node.proposeConfChange({
    transition: 'simple',
    changes: [{ type: 'add-learner', nodeId: 'n5' }],
  });
  t.match(third, { ok: true }, 'accepted once the first is applied');
  net.stabilize();
  t.same(net.raft('n2').confState.learners, ['n4', 'n5']);
  const invalid = net.get('n1').node.proposeConfChange({
    transition: 'explicit',
    changes: [
      { type: 'remove-node', nodeId: 'n1' },
      { type: 'remove-node', nodeId: 'n2' },
      { type: 'remove-node', nodeId: 'n3' },
    ],
  });
  t.match(invalid, { ok: false, reason: 'invalid-conf-change' }, 'removing every voter');
  t.end();
});

// A committed removal shrinks the quorum at once: entries acknowledged by a majority of the new
// configuration commit without waiting for another acknowledgement.
t.test('removing a voter shrinks the quorum and commits entries waiting for it', (t) => {
  const net = cluster({ voters: ['n1', 'n2', 'n3', 'n4'] });
  net.isolate('n4');
  // n3 acknowledges the conf change but never sees 'x'.
  net.blockIf(
    (m) =>
      m.to === 'n3' &&
      m.type === 'app' &&
      m.entries.some((e) => new TextDecoder().decode(e.data) === 'x'),
  );
  const cc = net.get('n1').node.proposeConfChange({
    transition: 'simple',
    changes: [{ type: 'remove-node', nodeId: 'n4' }],
  });
  t.match(cc, { ok: true });
  const x = mustPropose(net, 'n1', 'x');
  // Hold back n1's processing of acks so both entries are in flight before the change applies.
  net.stabilize();
  t.same(net.raft('n1').confState.voters, ['n1', 'n2', 'n3'], 'n4 was removed');
  t.ok(
    net.raft('n1').log.committed >= x,
    "'x' (acked by n1 and n2 only) commits under the smaller quorum",
  );
  t.end();
});

// ---------------------------------------------------------------------------------------------
// Snapshots and replication

// A follower that missed entries the leader has since compacted away is sent the snapshot,
// installs it and then converges to the same log and applied state as the leader.
t.test('a follower far behind is caught up by snapshot', (t) => {
  const net = cluster();
  net.isolate('n3');
  const texts: string[] = [];
  for (let i = 0; i < 20; i++) {
    texts.push(`v${i}`);
    mustPropose(net, 'n1', `v${i}`);
    net.stabilize();
  }
  net.tickAll(3);
  const lead = net.get('n1');
  const snapIndex = lead.node.raft.log.applied;
  const snap = net.snapshotAt('n1', snapIndex);
  t.equal(snap.meta.index, snapIndex);
  t.ok(lead.storage.firstIndex() > net.raft('n3').log.lastIndex() + 1, 'n3 needs compacted data');
  for (let i = 20; i < 23; i++) {
    texts.push(`v${i}`);
    mustPropose(net, 'n1', `v${i}`);
  }
  net.stabilize();

  net.heal();
  net.tickAll(3);
  const snaps = net.sent.filter((m) => m.type === 'snap' && m.to === 'n3');
  t.equal(snaps.length, 1, 'exactly one snapshot is sent to n3');
  t.equal(snaps[0]?.snapshot?.meta.index, snapIndex);
  t.equal(net.get('n3').installed?.meta.index, snapIndex, 'n3 installed it');
  t.equal(net.get('n3').storage.firstIndex(), snapIndex + 1, "n3's storage starts after it");
  t.same(net.stateTexts('n3'), texts, 'n3 converges to the same applied state');
  t.same(net.stateTexts('n1'), texts);
  const n3 = net.raft('n3');
  const n1 = net.raft('n1');
  t.equal(n3.log.lastIndex(), n1.log.lastIndex(), 'same last index');
  t.equal(n3.log.committed, n1.log.committed, 'same commit');
  t.equal(n3.log.applied, n1.log.applied, 'same applied index');
  for (let i = snapIndex; i <= n1.log.lastIndex(); i++) {
    t.equal(n3.log.term(i), n1.log.term(i), `term of ${i} agrees`);
  }
  t.equal(n1.progress.get('n3')?.state, 'replicate', 'the leader replicates to n3 again');
  mustPropose(net, 'n1', 'later');
  net.stabilize();
  t.same(net.stateTexts('n3'), [...texts, 'later'], 'and n3 keeps up afterwards');
  t.end();
});

// Append responses may be duplicated, delayed and reordered: replaying old acknowledgements and
// stale rejections, or delivering live ones newest first, never lowers a follower's match index.
t.test('duplicated and reordered append responses never move match back', (t) => {
  const net = cluster();
  const sentBefore = net.sent.length;
  for (let i = 0; i < 6; i++) {
    mustPropose(net, 'n1', `d${i}`);
    net.stabilize();
  }
  const old = net.sent.slice(sentBefore).filter((m) => m.type === 'app-resp' && m.to === 'n1');
  t.ok(old.length >= 6, 'responses were recorded');
  const leader = net.raft('n1');
  const committed = leader.log.committed;
  const last = leader.log.lastIndex();
  // Replay every old response, newest first, twice, then as stale rejections.
  const replay = [...old].reverse();
  const stale: Message[] = old.map((m) => ({ ...m, reject: true, rejectHint: 0, logTerm: 0 }));
  let lowered = 0;
  for (const m of [...replay, ...old, ...replay, ...stale]) {
    const before = leader.progress.get(m.from)!.match;
    net.get('n1').node.step(m);
    if (leader.progress.get(m.from)!.match < before) lowered++;
    net.processReadies();
    net.queue = [];
  }
  t.equal(lowered, 0, 'no replayed response lowered a match index');
  t.equal(leader.progress.get('n2')?.match, last, 'n2 match stays at the end');
  t.equal(leader.progress.get('n3')?.match, last, 'n3 match stays at the end');
  t.equal(leader.progress.get('n2')?.state, 'replicate', 'stale rejections do not force a probe');
  t.equal(leader.log.committed, committed, 'commit unchanged');
  t.equal(leader.role, 'leader');

  // Reordering live: several appends in flight, their responses delivered newest first.
  for (let i = 0; i < 4; i++) mustPropose(net, 'n1', `r${i}`);
  net.processReadies();
  net.deliverRound(); // appends reach the followers
  net.processReadies();
  t.ok(net.queue.filter((m) => m.type === 'app-resp').length >= 4, 'responses in flight');
  net.queue.reverse();
  let prev = leader.progress.get('n2')!.match;
  let ok = true;
  while (net.queue.length > 0) {
    deliverOne(net);
    const cur = leader.progress.get('n2')!.match;
    if (cur < prev) ok = false;
    prev = cur;
    net.processReadies();
  }
  t.ok(ok, 'reordered responses never lower match');
  net.stabilize();
  t.equal(leader.progress.get('n2')?.match, leader.log.lastIndex());
  for (const id of ['n1', 'n2', 'n3']) {
    t.same(
      net.appliedTexts(id),
      ['d0', 'd1', 'd2', 'd3', 'd4', 'd5', 'r0', 'r1', 'r2', 'r3'],
      `${id} applied everything once, in order`,
    );
  }
  t.end();
});

// A follower whose appends were all lost while the inflight window filled up is not stuck: a
// heartbeat response lets one append through, and the leader falls back to probing.
t.test('a follower whose appends were all lost in a full window recovers', (t) => {
  const net = cluster({ options: { maxInflightMsgs: 2 } });
  net.blockIf((m) => m.type === 'app' && m.to === 'n3');
  for (let i = 0; i < 5; i++) {
    mustPropose(net, 'n1', `w${i}`);
    net.stabilize();
  }
  const pr = net.raft('n1').progress.get('n3')!;
  t.ok(pr.inflights.isFull(), "n3's window is full of lost appends");
  net.heal();
  net.tickAll(3);
  t.same(
    net.appliedTexts('n3'),
    ['w0', 'w1', 'w2', 'w3', 'w4'],
    'heartbeat responses get appends flowing again',
  );
  t.end();
});

// The committed entries handed out per Ready are bounded in bytes (at least one entry per page),
// and paging does not change what is applied or its order.
t.test('committed entries are handed out in pages bounded by maxCommittedBytesPerReady', (t) => {
  const net = cluster({ options: { maxCommittedBytesPerReady: 100 } });
  const pages: number[] = [];
  net.isolate('n2');
  net.isolate('n3');
  for (let i = 0; i < 10; i++) mustPropose(net, 'n1', `p${i}-${'x'.repeat(30)}`);
  net.processReadies();
  net.heal();
  net.tickAll(1);
  // Count the pages by replaying n2's committed log through a restarted copy of it.
  const copy = net.restart('n2');
  copy.applied = [];
  while (copy.node.hasReady()) {
    const rd = copy.node.ready();
    copy.storage.append(rd.entries);
    if (rd.hardState) copy.storage.setHardState(rd.hardState);
    if (rd.committedEntries.length > 0) pages.push(rd.committedEntries.length);
    for (const e of rd.committedEntries) copy.applied.push(e);
    copy.node.advance();
  }
  t.ok(pages.length > 1, `several pages (${pages.join(', ')})`);
  t.ok(
    pages.every((n) => n <= 2),
    'each page stays within the byte budget (at least one entry)',
  );
  t.same(
    net.appliedTexts('n2').filter((x) => x.startsWith('p')),
    Array.from({ length: 10 }, (_, i) => `p${i}-${'x'.repeat(30)}`),
    'everything applied in order',
  );
  t.end();
});

// ---------------------------------------------------------------------------------------------
// Reads and the leader lease

// ReadIndex on a leader in safe mode: confirmed by a heartbeat round, answered with an index no
// lower than the commit index at the time of the request.
t.test(
  'ReadIndex on a healthy leader returns an index at least the commit at request time',
  (t) => {
    const net = cluster();
    mustPropose(net, 'n1', 'x');
    net.stabilize();
    const commitAtRequest = net.raft('n1').log.committed;
    net.get('n1').node.readIndex(7);
    net.stabilize();
    const rs = net.get('n1').readStates.filter((r) => r.requestId === 7);
    t.equal(rs.length, 1, 'one answer');
    t.match(rs[0], { ok: true });
    if (rs[0]?.ok) t.ok(rs[0].index >= commitAtRequest, 'index >= commit at request time');
    t.ok(
      net.sent.some((m) => m.type === 'heartbeat' && m.from === 'n1'),
      'confirmed by a heartbeat round (safe mode)',
    );
    t.end();
  },
);

// A new leader does not know the commit index of the group until its own no-op commits, so a
// ReadIndex waits for that and answers with an index covering the new term. §8
t.test("a new leader's ReadIndex waits for its first commit in the term (§8)", (t) => {
  const net = cluster();
  mustPropose(net, 'n1', 'x');
  net.stabilize();
  net.get('n1').node.transferLeader('n2');
  t.ok(
    net.runUntil(() => net.raft('n2').role === 'leader'),
    'n2 becomes leader',
  );
  const n2 = net.raft('n2');
  const noop = n2.log.lastIndex();
  t.equal(n2.log.term(noop), n2.term, 'its no-op is the last entry');
  t.ok(n2.log.committed < noop, 'not yet committed');
  net.get('n2').node.readIndex(11);
  net.processReadies();
  t.same(net.get('n2').readStates, [], 'no answer before the no-op commits');
  net.stabilize();
  const rs = net.get('n2').readStates;
  t.equal(rs.length, 1);
  t.match(rs[0], { requestId: 11, ok: true });
  if (rs[0]?.ok) t.ok(rs[0].index >= noop, 'the read index covers the new term');
  t.end();
});

// A follower forwards ReadIndex to its leader and gets the leader's answer; without a leader it
// is refused at once.
t.test("a follower's ReadIndex is forwarded to the leader and answered", (t) => {
  const net = cluster();
  mustPropose(net, 'n1', 'x');
  net.stabilize();
  const commitAtRequest = net.raft('n1').log.committed;
  net.get('n2').node.readIndex(42);
  net.stabilize();
  t.ok(
    net.sent.some((m) => m.type === 'read-index' && m.from === 'n2' && m.to === 'n1'),
    'forwarded to the leader',
  );
  t.ok(
    net.sent.some((m) => m.type === 'read-index-resp' && m.from === 'n1' && m.to === 'n2'),
    'answered by the leader',
  );
  const rs = net.get('n2').readStates;
  t.equal(rs.length, 1);
  t.match(rs[0], { requestId: 42, ok: true });
  if (rs[0]?.ok) t.ok(rs[0].index >= commitAtRequest, 'index >= commit at request time');

  const lone = new Network({ voters: ['n1', 'n2', 'n3'] });
  lone.get('n2').node.readIndex(1);
  lone.processReadies();
  t.match(lone.get('n2').readStates, [{ requestId: 1, ok: false, reason: 'not-leader' }]);
  t.end();
});

// An isolated leader that still believes it leads must never answer a read while a new leader
// has committed newer writes: its reads stay pending and fail when it steps down.
t.test('ReadIndex on a deposed leader fails instead of returning stale data', (t) => {
  const net = cluster();
  mustPropose(net, 'n1', 'x1');
  net.stabilize();
  net.isolate('n1');
  net.get('n1').node.readIndex(1);
  net.processReadies();
  // The others elect a new leader (n1 does not tick: it still believes it leads).
  let n = -1;
  for (let i = 1; i <= 10 * ET && n < 0; i++) {
    tickOnly(net, ['n2', 'n3']);
    if (['n2', 'n3'].includes(net.leader() ?? '')) n = i;
  }
  t.ok(n > 0, 'a new leader is elected');
  const lead = net.leader()!;
  const idx = mustPropose(net, lead, 'x2');
  net.stabilize();
  t.ok(net.raft(lead).log.committed >= idx, 'the new leader commits a new write');
  t.equal(net.raft('n1').role, 'leader', 'n1 still believes it leads');
  net.get('n1').node.readIndex(2);
  net.processReadies();

  const okReads = (): number => net.get('n1').readStates.filter((r) => r.ok).length;
  for (let i = 0; i < 3 * ET; i++) {
    if (i === ET) net.heal();
    net.tickAll(1);
    t.equal(okReads(), 0, `tick ${i}: no read answered ok by the old leader`);
  }
  t.not(net.raft('n1').role, 'leader', 'n1 stepped down');
  t.match(
    net
      .get('n1')
      .readStates.filter((r) => r.requestId === 1 || r.requestId === 2)
      .sort((a, b) => a.requestId - b.requestId),
    [
      { requestId: 1, ok: false },
      { requestId: 2, ok: false },
    ],
    'both reads end with ok: false',
  );
  t.end();
});

// A follower forwards ReadIndex to its leader; if the request or its answer is lost, the read
// must end (the caller can retry) rather than wait forever. A late answer is then ignored.
t.test('a forwarded ReadIndex whose answer is lost fails after two election timeouts', (t) => {
  const net = cluster();
  net.stabilize();
  net.drop('read-index-resp');
  net.get('n2').node.readIndex(1);
  net.processReadies();
  const outcome = (id: number) => net.get('n2').readStates.filter((r) => r.requestId === id);
  for (let i = 1; i < 2 * ET; i++) {
    net.tickAll(1);
    t.same(outcome(1), [], `tick ${i}: still waiting`);
  }
  net.tickAll(1);
  t.same(outcome(1), [{ requestId: 1, ok: false, reason: 'timeout' }], 'then: timeout');
  t.equal(net.leader(), 'n1', 'no election came of it');
  // The leader's answer, arriving now, is not a second outcome.
  net.get('n2').node.step(
    message({
      type: 'read-index-resp',
      from: 'n1',
      to: 'n2',
      term: net.raft('n1').term,
      index: 1,
      context: 1,
    }),
  );
  net.processReadies();
  t.equal(outcome(1).length, 1, 'a late answer is dropped');
  // Delivered answers still work, and a leader change fails the forwarded reads at once.
  net.heal();
  net.get('n2').node.readIndex(2);
  net.processReadies();
  net.stabilize();
  t.match(outcome(2), [{ requestId: 2, ok: true }], 'an answered read succeeds');
  net.drop('read-index');
  net.get('n3').node.readIndex(3);
  net.processReadies();
  net
    .get('n3')
    .node.step(message({ type: 'heartbeat', from: 'n2', to: 'n3', term: net.raft('n3').term + 1 }));
  net.processReadies();
  t.same(
    net.get('n3').readStates.filter((r) => r.requestId === 3),
    [{ requestId: 3, ok: false, reason: 'leadership-lost' }],
    'a new term fails the forwarded read at once',
  );
  t.end();
});

// Pending reads are bounded; the excess is refused at once, the admitted reads are answered.
t.test('ReadIndex requests beyond maxPendingReads are refused', (t) => {
  const net = cluster({ options: { maxPendingReads: 2 } });
  net.isolate('n2');
  net.isolate('n3');
  for (const id of [1, 2, 3]) net.get('n1').node.readIndex(id);
  net.processReadies();
  t.same(net.get('n1').readStates, [{ requestId: 3, ok: false, reason: 'too-many-reads' }]);
  net.heal();
  net.tickAll(1);
  t.match(
    net
      .get('n1')
      .readStates.slice(1)
      .sort((a, b) => a.requestId - b.requestId),
    [
      { requestId: 1, ok: true },
      { requestId: 2, ok: true },
    ],
    'the admitted reads are answered once a quorum confirms',
  );
  t.end();
});

// With lease-based reads, an isolated leader stops serving reads once its lease has run out,
// before any other node can be elected.
t.test('lease reads on a deposed leader fail once its lease has run out', (t) => {
  const net = cluster({ options: { readOnly: 'lease' } });
  net.tickAll(1);
  net.get('n1').node.readIndex(1);
  net.processReadies();
  t.match(net.get('n1').readStates, [{ requestId: 1, ok: true }], 'served from the lease');
  net.isolate('n1');
  const leaseTicks = ET - net.raft('n1').config.leaseSafetyTicks;
  tickOnly(net, ['n1'], leaseTicks);
  t.equal(net.raft('n1').role, 'leader', 'n1 still believes it leads');
  t.notOk(leaseValid(net, 'n1'), 'but its lease has run out');
  net.get('n1').node.readIndex(2);
  net.processReadies();
  for (let i = 0; i < 3 * ET; i++) {
    net.tickAll(1);
    t.notOk(
      net.get('n1').readStates.some((r) => r.requestId === 2 && r.ok),
      `tick ${i}: the read is not served`,
    );
  }
  t.match(
    net.get('n1').readStates.find((r) => r.requestId === 2),
    { ok: false },
    'it fails when n1 steps down',
  );
  t.end();
});

// The leader lease holds on a healthy leader, runs out after the lease duration without
// acknowledged heartbeats (while the node still believes it leads), and is void during transfer.
t.test('the leader lease: valid when healthy, lost when isolated or transferring', (t) => {
  const net = cluster();
  net.tickAll(ET); // a full election timeout of acknowledged heartbeats
  t.ok(leaseValid(net, 'n1'), 'a healthy leader holds a lease');
  t.equal(net.get('n1').node.status().leaseValid, true, 'reported in status()');
  for (const id of ['n2', 'n3']) t.notOk(leaseValid(net, id), `${id} (follower) holds none`);

  net.isolate('n1');
  const leaseTicks = ET - net.raft('n1').config.leaseSafetyTicks;
  const valid: boolean[] = [];
  for (let i = 1; i <= leaseTicks; i++) {
    net.tick('n1');
    net.processReadies();
    valid.push(leaseValid(net, 'n1'));
  }
  t.ok(valid[0], 'still valid just after isolation');
  t.equal(valid[leaseTicks - 1], false, 'invalid after the lease duration');
  t.equal(net.raft('n1').role, 'leader', 'while n1 still believes it leads');
  t.ok(leaseTicks < ET, 'the lease ends before any follower may vote for another node');

  const net2 = cluster();
  net2.tickAll(ET);
  t.ok(leaseValid(net2, 'n1'));
  net2.get('n1').node.transferLeader('n2');
  t.notOk(leaseValid(net2, 'n1'), 'a transfer voids the lease at once');
  net2.stabilize();
  t.equal(net2.leader(), 'n2');
  t.end();
});

t.test('a transfer abandoned while its TimeoutNow is in flight leaves no unsafe lease', (t) => {
  // Lease reads trust that no other node can be elected while the lease holds. A TimeoutNow
  // makes its receiver campaign with votes that ignore leases, so one still in flight when the
  // leader abandons the transfer (and renews its lease) must not let the lease be renewed.
  const net = cluster({ options: { readOnly: 'lease' } });
  net.tickAll(ET);
  t.ok(leaseValid(net, 'n1'), 'start: n1 holds a lease');
  net.isolate('n3');
  mustPropose(net, 'n1', 'a');
  net.stabilize();
  t.equal(net.get('n1').node.transferLeader('n3'), undefined, 'transfer to a lagging n3 starts');
  // n3 stays unreachable for most of the transfer window.
  tickOnly(net, ['n1', 'n2'], ET - 2);
  net.heal();
  net.tick('n1');
  net.tick('n2');
  // n3 catches up; the leader sends TimeoutNow, which the network holds for one tick.
  t.ok(
    net.runUntil(() => net.queue.some((m) => m.type === 'timeout-now')),
    'TimeoutNow leaves near the end of the window',
  );
  const held = net.queue.filter((m) => m.type === 'timeout-now');
  net.queue = net.queue.filter((m) => m.type !== 'timeout-now');
  net.stabilize();
  t.equal(net.raft('n1').leadTransferee, 'n3', 'the transfer is still pending');
  // From now on nothing n3 sends reaches n1 (n2 still talks to both).
  net.cutOneWay('n3', 'n1');
  tickOnly(net, ['n1', 'n2']);
  t.equal(net.raft('n1').leadTransferee, '', 'the leader abandoned the transfer');
  t.equal(net.raft('n1').role, 'leader');
  const leaseAfterAbandon = leaseValid(net, 'n1');
  // The held TimeoutNow arrives one tick late: n3 campaigns and n2 votes for it. n1 does not
  // tick from here on, so it hears nothing of the new term.
  net.queue.push(...held);
  net.stabilize();
  const n3 = net.raft('n3');
  t.equal(n3.role, 'leader', 'n3 was elected by the late TimeoutNow');
  const idx = mustPropose(net, 'n3', 'b');
  net.stabilize();
  t.ok(n3.log.committed >= idx, "n3 commits 'b' with n2");
  t.same(net.appliedTexts('n2'), ['a', 'b']);
  t.notOk(
    leaseValid(net, 'n1') && net.raft('n1').term < n3.term,
    'n1 must not hold a valid lease while n3 leads a later term',
  );
  t.notOk(leaseAfterAbandon, 'no lease right after abandoning a transfer whose TimeoutNow left');
  net.get('n1').node.readIndex(5);
  net.processReadies();
  const rs = net.get('n1').readStates.find((r) => r.requestId === 5);
  t.notOk(
    rs?.ok === true && rs.index < idx,
    `n1 must not serve a lease read that misses 'b' (got ${JSON.stringify(rs)})`,
  );
  t.end();
});

// The lease argument rests on check-quorum: voters that heard from the leader recently ignore
// vote requests. Without check-quorum a node that was cut off can be elected by a voter that has
// just acknowledged the leader, so no lease may be reported at all.
t.test('without check-quorum there is no leader lease', (t) => {
  const net = cluster({ options: { checkQuorum: false } });
  net.isolate('n3');
  net.tickAll(3 * ET); // n3 times out and keeps trying pre-elections on its own
  t.equal(net.leader(), 'n1');
  net.heal();
  net.cut('n1', 'n3');
  const n = tickUntil(net, () => net.raft('n3').role === 'leader');
  t.ok(n > 0, 'n3 is elected with the vote of n2, which hears from n1 every tick');
  const n1 = net.raft('n1');
  t.ok(n1.role === 'leader' && n1.term < net.raft('n3').term, 'n1 still believes it leads');
  t.notOk(leaseValid(net, 'n1'), 'so n1 must not report a valid lease');
  t.end();
});

// ---------------------------------------------------------------------------------------------
// Proposals

// Proposals on a follower are refused with the known leader as a hint.
t.test('proposals on a follower are refused with a leader hint', (t) => {
  const net = cluster();
  t.match(net.propose('n2', 'x'), { ok: false, reason: 'not-leader', leaderHint: 'n1' });
  t.match(
    net.get('n3').node.proposeConfChange({
      transition: 'simple',
      changes: [{ type: 'add-learner', nodeId: 'n9' }],
    }),
    { ok: false, reason: 'not-leader', leaderHint: 'n1' },
  );
  t.match(net.get('n2').node.transferLeader('n3'), { ok: false, reason: 'not-leader' });
  const fresh = new Network({ voters: ['n1', 'n2', 'n3'] });
  t.match(
    fresh.propose('n1', 'x'),
    { ok: false, reason: 'not-leader', leaderHint: '' },
    'no hint when no leader is known',
  );
  t.end();
});

// A single entry over maxEntryBytes is refused as too-large; a batch is all or nothing.
t.test('a proposal larger than maxEntryBytes is refused as too-large', (t) => {
  const net = cluster({ options: { maxEntryBytes: 100 } });
  const last = net.raft('n1').log.lastIndex();
  t.match(net.get('n1').node.propose(new Uint8Array(101)), { ok: false, reason: 'too-large' });
  t.match(
    net.get('n1').node.propose(new Uint8Array(10), new Uint8Array(101)),
    { ok: false, reason: 'too-large' },
    'a batch with one oversized entry is refused whole',
  );
  t.equal(net.raft('n1').log.lastIndex(), last, 'nothing was appended');
  t.match(net.get('n1').node.propose(new Uint8Array(100)), { ok: true }, 'exactly the limit fits');
  t.end();
});

// While no quorum acknowledges, the uncommitted tail is bounded by maxUncommittedBytes.
t.test('proposals beyond maxUncommittedBytes are refused as queue-full without a quorum', (t) => {
  const net = cluster({ options: { maxUncommittedBytes: 200 } });
  net.isolate('n2');
  net.isolate('n3');
  const results: string[] = [];
  for (let i = 0; i < 6; i++) {
    const r = net.get('n1').node.propose(enc('x'.repeat(50)));
    results.push(r.ok ? 'ok' : r.reason);
    net.processReadies();
  }
  t.same(results, ['ok', 'ok', 'ok', 'queue-full', 'queue-full', 'queue-full']);
  t.match(net.propose('n1', 'y'), { ok: false, reason: 'queue-full', leaderHint: 'n1' });
  net.heal();
  net.tickAll(2);
  t.match(net.propose('n1', 'y'), { ok: true }, 'accepted again once entries commit');
  net.stabilize();
  t.equal(net.appliedTexts('n2').length, 4);
  t.end();
});

// A single voter is its own majority: it elects itself, commits and serves reads alone.
t.test('a single-node group commits alone', (t) => {
  const net = new Network({ voters: ['n1'] });
  net.startWithLeader('n1');
  t.equal(net.raft('n1').role, 'leader');
  const idx = mustPropose(net, 'n1', 'solo');
  net.stabilize();
  t.equal(net.raft('n1').log.committed, idx, 'committed without any peer');
  t.same(net.appliedTexts('n1'), ['solo']);
  net.get('n1').node.readIndex(3);
  net.stabilize();
  t.match(net.get('n1').readStates, [{ requestId: 3, ok: true, index: idx }]);
  t.ok(
    net.sent.every((m) => m.to === 'n1' || m.from !== 'n1'),
    'nothing is ever sent to other nodes',
  );
  t.end();
});

// Two followers whose election timers run out at the same moment both start a pre-election.
// Were each to grant the other's pre-vote, both would become candidates of the next term, vote
// for themselves, and split the vote: a whole election timeout lost, and under load (slow
// messages) over and over. A pre-candidate grants only a pre-candidate that ranks above it
// (a more up-to-date log, or the same and a greater id), so one of them wins at once.
t.test('two followers campaigning at once do not split the vote', (t) => {
  const net = cluster();
  const term = net.raft('n1').term;
  net.isolate('n1');
  net.raft('n2').hup('pre-election');
  net.raft('n3').hup('pre-election');
  t.equal(net.raft('n2').role, 'pre-candidate');
  t.equal(net.raft('n3').role, 'pre-candidate');
  net.stabilize();
  t.equal(net.leader(), 'n3', 'the one that ranks higher (same log, greater id) leads');
  t.equal(net.raft('n3').term, term + 1, 'in the very next term: no split vote');
  t.equal(net.raft('n2').lead, 'n3', 'the other follows it');
  t.end();
});

// The rule above must not stall an election. Five voters, the leader gone, and links cut so
// that the pre-candidates who rank higher cannot win (their messages reach too few) while the
// lower ones need their grants: each refuses only in its first round, so a leader comes within
// a few election timeouts rather than never.
t.test('a pre-candidate that cannot win does not hold the others back', (t) => {
  const net = cluster({ voters: ['n1', 'n2', 'n3', 'n4', 'n5'] });
  const term = net.raft('n1').term;
  net.isolate('n1');
  net.cut('n3', 'n4');
  net.cut('n3', 'n5');
  net.cut('n2', 'n5');
  net.raft('n2').hup('pre-election');
  net.raft('n3').hup('pre-election');
  net.stabilize();
  const live = ['n2', 'n3', 'n4', 'n5'];
  const led = (): string | undefined => live.find((id) => net.raft(id).role === 'leader');
  t.notOk(led(), 'no leader in the first round: n3 outranks n2 and reaches only n2');
  const ticks = tickUntil(net, () => led() !== undefined);
  t.ok(ticks > 0 && ticks <= 4 * ET, `${led()} leads after ${ticks} ticks`);
  t.ok(net.raft(led() ?? 'n2').term > term, 'in a later term');
  t.end();
});
