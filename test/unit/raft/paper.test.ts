// Paper conformance: the rules of the Raft paper (Ongaro & Ousterhout, "In Search of an
// Understandable Consensus Algorithm", §5), checked one by one in the spirit of etcd's
// raft_paper_test.go. Most tests drive a single Raft directly, stepping hand-made messages into
// it and reading what it sends back, so each rule is seen in isolation; replication, commit and
// log repair use the synchronous harness network. Each test names the paper section it checks.
// Note: a fresh replica ignores vote requests for one election timeout after it starts (the
// lease rule in raft.ts), so tests that send it higher-term votes first tick it past that.
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { compileRaftOptions, type RaftOptions } from '../../../src/raft/config.js';
import { MemoryLogStorage } from '../../../src/raft/log-storage.js';
import {
  message,
  NO_NODE,
  type ConfState,
  type Entry,
  type Message,
  type MessageType,
  type NodeId,
} from '../../../src/raft/messages.js';
import { Raft } from '../../../src/raft/raft.js';
import { Network } from './harness.js';

const ET = 10;

function conf(voters: NodeId[], learners: NodeId[] = []): ConfState {
  return { voters, votersOutgoing: [], learners, learnersNext: [], autoLeave: false };
}

const ent = (index: number, term: number, text = ''): Entry => ({
  index,
  term,
  type: 'normal',
  data: new TextEncoder().encode(text),
});

interface RaftSetup {
  voters?: NodeId[];
  /** Terms of log entries 1..n. */
  terms?: number[];
  term?: number;
  vote?: NodeId;
  commit?: number;
  options?: RaftOptions;
  seed?: number;
}

/** A single Raft over a hand-built MemoryLogStorage (not started past its quiet period). */
function newRaft(id: NodeId, setup: RaftSetup = {}): Raft {
  const storage = new MemoryLogStorage(conf(setup.voters ?? ['n1', 'n2', 'n3']));
  storage.append((setup.terms ?? []).map((term, i) => ent(i + 1, term)));
  storage.setHardState({
    term: setup.term ?? 1,
    vote: setup.vote ?? NO_NODE,
    commit: setup.commit ?? 0,
  });
  return new Raft({
    id,
    storage,
    config: compileRaftOptions({ electionTimeoutTicks: ET, heartbeatTicks: 1, ...setup.options }),
    rand: new SeededRand(setup.seed ?? 1),
  });
}

/**
 * Ticks a fresh follower through its startup quiet period, then puts it back exactly as it was
 * (a follower in its original term and vote, nothing sent) if it campaigned meanwhile.
 */
function pastStartup(r: Raft): Raft {
  const { term, vote } = r;
  for (let i = 0; i < r.config.electionTimeoutTicks; i++) r.tick();
  if (r.role !== 'follower' || r.term !== term) {
    r.becomeFollower(term, NO_NODE);
    r.vote = vote;
  }
  r.msgs = [];
  return r;
}

function msg(
  type: MessageType,
  from: NodeId,
  to: NodeId,
  term: number,
  fields: Partial<Message> = {},
): Message {
  return message({ type, from, to, term, ...fields });
}

function take(r: Raft): Message[] {
  const out = r.msgs;
  r.msgs = [];
  return out;
}

/** Makes `r` the leader of its voters by an election it wins with every vote. */
function elect(r: Raft): Raft {
  r.hup('election');
  for (const id of r.confState.voters) {
    if (id !== r.id && r.role === 'candidate') r.step(msg('vote-resp', id, r.id, r.term));
  }
  take(r);
  return r;
}

// Any message carrying a higher term makes a follower, pre-candidate, candidate or leader adopt
// that term and become a follower; appends and heartbeats also name the new leader. §5.1
t.test('every role adopts a higher term and becomes follower (§5.1)', (t) => {
  const roles = ['follower', 'pre-candidate', 'candidate', 'leader'] as const;
  const makeRole = (role: (typeof roles)[number], options: RaftOptions = {}): Raft => {
    const r = pastStartup(newRaft('n1', { terms: [1], term: 1, options }));
    if (role === 'pre-candidate') r.hup('pre-election');
    if (role === 'candidate') r.hup('election');
    if (role === 'leader') elect(r);
    take(r);
    t.equal(r.role, role, `set up as ${role}`);
    return r;
  };
  for (const role of roles) {
    const a = makeRole(role);
    a.step(msg('app', 'n2', 'n1', 5, { index: 1, logTerm: 1 }));
    t.equal(a.role, 'follower', `${role} + higher-term app: follower`);
    t.equal(a.term, 5, `${role} + higher-term app: term adopted`);
    t.equal(a.lead, 'n2', `${role} + higher-term app: the sender leads`);
    t.equal(a.vote, NO_NODE, `${role} + higher-term app: no vote in the new term`);

    const h = makeRole(role);
    h.step(msg('heartbeat', 'n3', 'n1', 6));
    t.equal(h.role, 'follower', `${role} + higher-term heartbeat: follower`);
    t.equal(h.term, 6);
    t.equal(h.lead, 'n3');

    const v = makeRole(role, { checkQuorum: false });
    v.step(msg('vote', 'n3', 'n1', 7, { index: 9, logTerm: 9 }));
    t.equal(v.role, 'follower', `${role} + higher-term vote (no check-quorum): follower`);
    t.equal(v.term, 7);
    t.equal(v.lead, NO_NODE, 'a vote request does not name a leader');
  }
  const l = makeRole('leader');
  l.step(msg('app-resp', 'n2', 'n1', 9));
  t.equal(l.role, 'follower', 'leader + higher-term response: follower');
  t.equal(l.term, 9);
  t.equal(l.lead, NO_NODE);
  t.end();
});

// A message from an older term changes nothing. With check-quorum or pre-vote the receiver
// answers an old leader with its term so the old leader steps down; otherwise it is dropped. §5.1
t.test('stale-term messages are ignored (§5.1)', (t) => {
  const r = pastStartup(newRaft('n1', { terms: [1, 2, 3], term: 3, commit: 1 }));
  r.step(msg('heartbeat', 'n2', 'n1', 3)); // n2 leads term 3
  take(r);
  const before = { term: r.term, vote: r.vote, lead: r.lead, last: r.log.lastIndex() };

  r.step(msg('app', 'n3', 'n1', 2, { index: 3, logTerm: 3, entries: [ent(4, 2)], commit: 3 }));
  let out = take(r);
  t.same(
    { term: r.term, vote: r.vote, lead: r.lead, last: r.log.lastIndex() },
    before,
    'stale append: nothing changes',
  );
  t.equal(r.log.committed, 1, 'stale append: commit unchanged');
  t.equal(out.length, 1, 'stale append: one answer');
  t.match(out[0], { type: 'app-resp', to: 'n3', term: 3 }, 'it only tells the sender our term');

  r.step(msg('vote', 'n3', 'n1', 2, { index: 9, logTerm: 2 }));
  out = take(r);
  t.same(out, [], 'stale vote request: no answer');
  t.equal(r.vote, before.vote, 'stale vote request: no vote');

  r.step(msg('pre-vote', 'n3', 'n1', 3 - 1, { index: 9, logTerm: 2 }));
  out = take(r);
  t.match(out, [{ type: 'pre-vote-resp', to: 'n3', term: 3, reject: true }], 'stale pre-vote');

  const quiet = pastStartup(
    newRaft('n1', { terms: [1], term: 3, options: { checkQuorum: false, preVote: false } }),
  );
  quiet.step(msg('app', 'n2', 'n1', 2, { index: 1, logTerm: 1, entries: [ent(2, 2)] }));
  t.same(take(quiet), [], 'without check-quorum and pre-vote a stale append is dropped silently');
  t.equal(quiet.log.lastIndex(), 1);

  const lead = elect(pastStartup(newRaft('n1', { terms: [1], term: 3 })));
  const leadTerm = lead.term;
  lead.step(msg('app-resp', 'n2', 'n1', leadTerm - 1, { index: 1 }));
  lead.step(msg('vote-resp', 'n3', 'n1', leadTerm - 1));
  t.equal(lead.role, 'leader', 'stale responses do not disturb a leader');
  t.equal(lead.progress.get('n2')?.match, 0, 'a stale ack is not counted');
  t.end();
});

// Every replica starts (and restarts) as a follower, keeping its persisted term and vote. §5.2
t.test('servers start as followers (§5.2)', (t) => {
  const fresh = newRaft('n1');
  t.equal(fresh.role, 'follower');
  t.equal(fresh.lead, NO_NODE, 'no leader known');
  t.equal(fresh.term, 1);
  const restarted = newRaft('n2', { terms: [1, 4, 4], term: 4, vote: 'n2', commit: 2 });
  t.equal(restarted.role, 'follower', 'even a node that voted for itself before');
  t.equal(restarted.term, 4);
  t.equal(restarted.vote, 'n2', 'the vote survives a restart');
  t.equal(restarted.log.committed, 2);
  t.end();
});

// A leader sends empty heartbeats to every follower each heartbeat interval; the commit it
// carries is capped at what the follower is known to hold. §5.2
t.test('a leader sends heartbeats every heartbeat interval (§5.2)', (t) => {
  for (const hb of [1, 3]) {
    const r = elect(
      pastStartup(newRaft('n1', { terms: [1, 1], term: 1, options: { heartbeatTicks: hb } })),
    );
    for (let i = 1; i < hb; i++) {
      r.tick();
      t.same(take(r), [], `heartbeatTicks ${hb}: nothing after ${i} tick(s)`);
    }
    r.tick();
    const out = take(r);
    t.same(
      out.map((m) => [m.type, m.to]).sort(),
      [
        ['heartbeat', 'n2'],
        ['heartbeat', 'n3'],
      ],
      `heartbeatTicks ${hb}: one heartbeat per follower`,
    );
    for (const m of out) {
      t.match(
        m,
        { term: r.term, index: 0, logTerm: 0, entries: [], commit: 0 },
        'heartbeat carries no entries and no commit the follower may not have',
      );
    }
  }
  t.end();
});

// A follower that hears nothing for its election timeout campaigns: as a pre-candidate (term
// unchanged) with pre-vote, else as a candidate for term + 1 voting for itself; a candidate that
// times out campaigns again in the next term. §5.2
t.test('a follower that hears nothing starts an election (§5.2)', (t) => {
  // With pre-vote (the default): a pre-candidate asks for votes for term + 1 without taking it.
  const p = newRaft('n1', { terms: [1, 1, 2], term: 2 });
  let ticks = 0;
  while (p.role === 'follower' && ticks < 3 * ET) {
    p.tick();
    ticks++;
  }
  t.equal(p.role, 'pre-candidate', 'pre-vote: becomes pre-candidate');
  t.equal(p.term, 2, 'pre-vote: term unchanged');
  t.equal(p.vote, NO_NODE, 'pre-vote: no vote cast');
  t.same(
    take(p)
      .map((m) => [m.type, m.to, m.term, m.index, m.logTerm])
      .sort(),
    [
      ['pre-vote', 'n2', 3, 3, 2],
      ['pre-vote', 'n3', 3, 3, 2],
    ],
    'pre-vote requests carry term + 1 and the last log position',
  );
  p.step(msg('pre-vote-resp', 'n2', 'n1', 3));
  t.equal(p.role, 'candidate', 'a pre-vote majority starts the real election');
  t.equal(p.term, 3);
  t.equal(p.vote, 'n1', 'votes for itself');
  t.same(
    take(p)
      .map((m) => [m.type, m.to, m.term])
      .sort(),
    [
      ['vote', 'n2', 3],
      ['vote', 'n3', 3],
    ],
  );

  // Without pre-vote: straight to candidate.
  const c = newRaft('n1', { terms: [1], term: 1, options: { preVote: false } });
  for (let i = 0; i < 2 * ET && c.role === 'follower'; i++) c.tick();
  t.equal(c.role, 'candidate', 'no pre-vote: candidate');
  t.equal(c.term, 2, 'no pre-vote: term + 1');
  t.equal(c.vote, 'n1', 'no pre-vote: votes for itself');
  t.same(
    take(c)
      .map((m) => [m.type, m.to, m.term])
      .sort(),
    [
      ['vote', 'n2', 2],
      ['vote', 'n3', 2],
    ],
  );

  // A candidate whose election times out starts a new one in the next term.
  for (let i = 0; i < 2 * ET && c.term === 2; i++) c.tick();
  t.equal(c.role, 'candidate', 'still a candidate');
  t.equal(c.term, 3, 'a timed-out candidate starts a new election with term + 1');
  t.equal(take(c).filter((m) => m.type === 'vote' && m.term === 3).length, 2, 'and asks again');
  t.end();
});

// One round of vote responses decides the election: a majority of grants wins, a majority of
// refusals loses (back to follower), anything else keeps the candidate waiting. §5.2
t.test('an election is won, lost or undecided after one round of votes (§5.2)', (t) => {
  const cases: { voters: number; votes: Record<string, boolean>; role: string }[] = [
    { voters: 1, votes: {}, role: 'leader' },
    { voters: 3, votes: { n2: true, n3: true }, role: 'leader' },
    { voters: 3, votes: { n2: true }, role: 'leader' },
    { voters: 5, votes: { n2: true, n3: true, n4: true, n5: true }, role: 'leader' },
    { voters: 5, votes: { n2: true, n3: true }, role: 'leader' },
    { voters: 5, votes: { n2: true, n3: false, n4: false, n5: true }, role: 'leader' },
    { voters: 3, votes: {}, role: 'candidate' },
    { voters: 3, votes: { n2: false }, role: 'candidate' },
    { voters: 5, votes: { n2: true }, role: 'candidate' },
    { voters: 5, votes: { n2: true, n3: false, n4: false }, role: 'candidate' },
    { voters: 3, votes: { n2: false, n3: false }, role: 'follower' },
    { voters: 5, votes: { n2: false, n3: false, n4: false }, role: 'follower' },
    { voters: 5, votes: { n2: true, n3: false, n4: false, n5: false }, role: 'follower' },
  ];
  for (const c of cases) {
    const voters = ['n1', 'n2', 'n3', 'n4', 'n5'].slice(0, c.voters);
    const r = newRaft('n1', { voters, terms: [1], term: 1, options: { preVote: false } });
    r.hup('election');
    for (const [from, granted] of Object.entries(c.votes)) {
      r.step(msg('vote-resp', from, 'n1', 2, { reject: !granted }));
    }
    t.equal(r.role, c.role, `${c.voters} voters, votes ${JSON.stringify(c.votes)}`);
    t.equal(r.term, 2, 'the election term stays');
  }
  t.end();
});

// A voter grants at most one vote per term, to the first candidate that asks (or again to the
// same one), and none while it follows a leader of that term. §5.2
t.test(
  'each server votes for at most one candidate per term, first come first served (§5.2)',
  (t) => {
    const cases: { vote: NodeId; from: NodeId; granted: boolean }[] = [
      { vote: NO_NODE, from: 'n2', granted: true },
      { vote: NO_NODE, from: 'n3', granted: true },
      { vote: 'n2', from: 'n2', granted: true },
      { vote: 'n3', from: 'n3', granted: true },
      { vote: 'n2', from: 'n3', granted: false },
      { vote: 'n3', from: 'n2', granted: false },
    ];
    for (const c of cases) {
      const r = newRaft('n1', { terms: [1], term: 2, vote: c.vote });
      r.step(msg('vote', c.from, 'n1', 2, { index: 1, logTerm: 1 }));
      const out = take(r);
      t.match(
        out,
        [{ type: 'vote-resp', to: c.from, term: 2, reject: !c.granted }],
        `voted ${c.vote || 'nobody'}, request from ${c.from}`,
      );
      if (c.granted) t.equal(r.vote, c.from, 'the vote is recorded for the hard state');
    }
    // First come, first served within a term.
    const r = pastStartup(newRaft('n1', { terms: [1], term: 1 }));
    r.step(msg('vote', 'n2', 'n1', 2, { index: 1, logTerm: 1 }));
    r.step(msg('vote', 'n3', 'n1', 2, { index: 5, logTerm: 2 }));
    t.match(
      take(r),
      [
        { type: 'vote-resp', to: 'n2', reject: false },
        { type: 'vote-resp', to: 'n3', reject: true },
      ],
      'the first candidate gets the vote, even over a better log',
    );
    t.equal(r.vote, 'n2');
    t.same(r.hardState(), { term: 2, vote: 'n2', commit: 0 });
    // A node that knows a leader for the term does not vote for anyone else in it.
    const f = newRaft('n1', { terms: [1], term: 2 });
    f.step(msg('heartbeat', 'n2', 'n1', 2));
    take(f);
    f.step(msg('vote', 'n3', 'n1', 2, { index: 1, logTerm: 1 }));
    t.match(take(f), [{ type: 'vote-resp', reject: true }], 'a follower with a leader refuses');
    t.end();
  },
);

// A candidate (or pre-candidate) that hears from a leader of its own term becomes its follower;
// an append from an older term does not make it give up. §5.2
t.test('a candidate returns to follower on an append from a leader of its term (§5.2)', (t) => {
  const c = newRaft('n1', { terms: [1], term: 1, options: { preVote: false } });
  c.hup('election');
  take(c);
  t.equal(c.role, 'candidate');
  c.step(msg('app', 'n2', 'n1', 2, { index: 1, logTerm: 1, entries: [ent(2, 2)] }));
  t.equal(c.role, 'follower', 'an append of the same term: follower');
  t.equal(c.term, 2, 'term unchanged');
  t.equal(c.lead, 'n2', 'the sender is the leader');
  t.equal(c.log.lastIndex(), 2, 'and the entries are accepted');
  t.match(take(c), [{ type: 'app-resp', to: 'n2', index: 2, reject: false }]);

  const h = newRaft('n1', { terms: [1], term: 1, options: { preVote: false } });
  h.hup('election');
  h.step(msg('heartbeat', 'n3', 'n1', 2));
  t.equal(h.role, 'follower', 'a heartbeat of the same term: follower');
  t.equal(h.lead, 'n3');

  const p = newRaft('n1', { terms: [1], term: 1 });
  p.hup('pre-election');
  t.equal(p.role, 'pre-candidate');
  p.step(msg('heartbeat', 'n3', 'n1', 1));
  t.equal(p.role, 'follower', 'a pre-candidate hearing from the current leader: follower');
  t.equal(p.lead, 'n3');
  t.equal(p.term, 1);

  const stale = newRaft('n1', { terms: [1], term: 1, options: { preVote: false } });
  stale.hup('election');
  stale.step(msg('app', 'n2', 'n1', 1, { index: 1, logTerm: 1 }));
  t.equal(stale.role, 'candidate', 'an append from an older term does not');
  t.end();
});

// The leader appends a proposal to its own log, then sends it to every follower in parallel
// with the index and term of the entry before it and its commit index. §5.3
t.test('a leader replicates new entries with the previous index and term (§5.3)', (t) => {
  const r = elect(pastStartup(newRaft('n1', { terms: [1], term: 1 })));
  t.equal(r.role, 'leader');
  const term = r.term;
  // The no-op went out to probing followers; they acknowledge it and turn to replicate.
  r.onPersisted(2);
  r.step(msg('app-resp', 'n2', 'n1', term, { index: 2 }));
  r.step(msg('app-resp', 'n3', 'n1', term, { index: 2 }));
  t.equal(r.log.committed, 2, 'the no-op is committed');
  take(r);
  const res = r.propose([new TextEncoder().encode('x')]);
  t.match(res, { ok: true, index: 3, term });
  t.equal(r.log.lastIndex(), 3, 'the leader appends to its own log first');
  const apps = take(r).filter((m) => m.type === 'app');
  t.equal(apps.length, 2, 'one append per follower, sent in parallel');
  for (const m of apps) {
    t.match(m, { term, index: 2, logTerm: term, commit: 2 }, `append to ${m.to}`);
    t.same(
      m.entries.map((e) => [e.index, e.term]),
      [[3, term]],
    );
  }
  t.end();
});

// A follower accepts an append only if its log holds the previous entry with the same term;
// otherwise it refuses with a hint of where the logs may still match. §5.3
t.test('a follower checks the previous entry of an append and hints on mismatch (§5.3)', (t) => {
  const cases: {
    name: string;
    index: number;
    logTerm: number;
    reject: boolean;
    respIndex: number;
    hint?: number;
  }[] = [
    { name: 'match at the last entry', index: 5, logTerm: 3, reject: false, respIndex: 5 },
    { name: 'match in the middle', index: 3, logTerm: 2, reject: false, respIndex: 3 },
    { name: 'empty log prefix', index: 0, logTerm: 0, reject: false, respIndex: 0 },
    { name: 'term mismatch', index: 5, logTerm: 4, reject: true, respIndex: 5, hint: 5 },
    { name: 'older term mismatch', index: 4, logTerm: 1, reject: true, respIndex: 4, hint: 2 },
    { name: 'beyond the log', index: 8, logTerm: 3, reject: true, respIndex: 8, hint: 5 },
  ];
  for (const c of cases) {
    // Log terms by index 1..5: 1 1 2 3 3
    const r = newRaft('n1', { terms: [1, 1, 2, 3, 3], term: 3 });
    r.step(msg('app', 'n2', 'n1', 3, { index: c.index, logTerm: c.logTerm }));
    const out = take(r);
    t.equal(out.length, 1, `${c.name}: one answer`);
    t.match(
      out[0],
      { type: 'app-resp', to: 'n2', term: 3, reject: c.reject, index: c.respIndex },
      c.name,
    );
    if (c.hint !== undefined) t.equal(out[0]?.rejectHint, c.hint, `${c.name}: hint`);
    t.equal(r.log.lastIndex(), 5, `${c.name}: the log is unchanged`);
  }
  t.end();
});

// On a match, a follower deletes its first conflicting entry and everything after it, then
// appends what it lacks; entries that agree are kept. §5.3
t.test('a follower deletes a conflicting suffix and appends the new entries (§5.3)', (t) => {
  const cases: { index: number; logTerm: number; entries: Entry[]; terms: number[] }[] = [
    { index: 2, logTerm: 2, entries: [ent(3, 3)], terms: [1, 2, 3] },
    { index: 1, logTerm: 1, entries: [ent(2, 3), ent(3, 4)], terms: [1, 3, 4] },
    { index: 0, logTerm: 0, entries: [ent(1, 1)], terms: [1, 2] },
    { index: 0, logTerm: 0, entries: [ent(1, 3)], terms: [3] },
    { index: 2, logTerm: 2, entries: [], terms: [1, 2] },
  ];
  for (const c of cases) {
    const r = newRaft('n1', { terms: [1, 2], term: 2 });
    r.step(msg('app', 'n2', 'n1', 2, { index: c.index, logTerm: c.logTerm, entries: c.entries }));
    const terms: number[] = [];
    for (let i = 1; i <= r.log.lastIndex(); i++) terms.push(r.log.term(i) ?? -1);
    t.same(terms, c.terms, `append after (${c.index}, ${c.logTerm})`);
  }
  t.end();
});

// An entry commits once a majority stores it (the leader counting itself) and followers learn
// the commit index from later messages; a cut-off follower catches up after healing. §5.3
t.test(
  'a leader commits an entry once a majority stores it and tells the followers (§5.3)',
  (t) => {
    for (const size of [3, 5]) {
      const voters = ['n1', 'n2', 'n3', 'n4', 'n5'].slice(0, size);
      const net = new Network({ voters });
      net.startWithLeader('n1');
      const lead = net.raft('n1');
      const base = lead.log.committed;
      // Only n2 (and, for five, n3) receive appends for now.
      const reachable = size === 3 ? ['n2'] : ['n2', 'n3'];
      net.blockIf((m) => m.from === 'n1' && !reachable.includes(m.to));
      const r = net.propose('n1', 'x');
      if (!r.ok) throw new Error('proposal refused');
      // Deliver one message at a time, counting follower acknowledgements until the commit.
      let acks = 0;
      let committedAfter = -1;
      for (let i = 0; i < 200 && committedAfter < 0; i++) {
        net.processReadies();
        const next = net.queue[0];
        if (!next) break;
        let first = true;
        net.deliverRound(() => {
          const pick = first;
          first = false;
          return pick;
        });
        if (next.type === 'app-resp' && next.to === 'n1' && reachable.includes(next.from)) acks++;
        if (lead.log.committed >= r.index) committedAfter = acks;
      }
      t.equal(
        committedAfter,
        reachable.length,
        `${size} voters: committed exactly when ${reachable.length} follower(s) acknowledged`,
      );
      t.equal(lead.log.committed, r.index, `${size} voters: committed with a bare majority`);
      net.stabilize();
      for (const id of reachable) {
        t.equal(net.raft(id).log.committed, r.index, `${id} learns the commit index`);
        t.same(net.appliedTexts(id), ['x'], `${id} applies`);
      }
      const cut = voters.filter((id) => id !== 'n1' && !reachable.includes(id));
      for (const id of cut) t.equal(net.raft(id).log.committed, base, `${id} has not heard`);
      net.heal();
      net.tickAll(1);
      for (const id of cut) t.same(net.appliedTexts(id), ['x'], `${id} catches up after healing`);
    }
    t.end();
  },
);

// Entries of earlier terms commit only through an entry of the leader's own term (the compact
// form of Figure 8; the full schedule is in scenarios.test.ts). §5.4.2
t.test('a leader does not commit by counting replicas of an older term (§5.4.2)', (t) => {
  // n1 has entries of terms 1 and 2; it wins term 3 and appends its no-op at index 3.
  const r = pastStartup(newRaft('n1', { terms: [1, 2], term: 2 }));
  elect(r);
  t.equal(r.term, 3);
  r.onPersisted(3);
  r.step(msg('app-resp', 'n2', 'n1', 3, { index: 2 }));
  t.equal(r.progress.get('n2')?.match, 2, 'n2 holds index 2 (term 2)');
  t.equal(r.log.committed, 0, 'a majority holds index 2, but it is of an older term');
  r.step(msg('app-resp', 'n2', 'n1', 3, { index: 3 }));
  t.equal(r.log.committed, 3, 'the current-term no-op commits, and with it index 2');
  t.end();
});

// A candidate's vote request carries its last log index and term; a voter (and a pre-voter)
// refuses a candidate whose log is less up to date than its own. §5.4.1
t.test(
  'a vote request carries the last log position; voters refuse less up-to-date logs (§5.4.1)',
  (t) => {
    const c = newRaft('n1', { terms: [1, 1, 2], term: 2, options: { preVote: false } });
    c.hup('election');
    for (const m of take(c)) {
      t.match(m, { type: 'vote', term: 3, index: 3, logTerm: 2 }, `vote request to ${m.to}`);
    }
    // The voter's log ends at (index 2, term 2).
    const cases: { index: number; logTerm: number; granted: boolean }[] = [
      { index: 2, logTerm: 2, granted: true },
      { index: 3, logTerm: 2, granted: true },
      { index: 1, logTerm: 2, granted: false },
      { index: 1, logTerm: 3, granted: true },
      { index: 9, logTerm: 1, granted: false },
      { index: 0, logTerm: 0, granted: false },
    ];
    for (const v of cases) {
      const r = newRaft('n2', { terms: [1, 2], term: 3 });
      r.step(msg('vote', 'n1', 'n2', 3, { index: v.index, logTerm: v.logTerm }));
      t.match(
        take(r),
        [{ type: 'vote-resp', to: 'n1', reject: !v.granted }],
        `candidate at (${v.index}, term ${v.logTerm})`,
      );
      t.equal(r.vote, v.granted ? 'n1' : NO_NODE, 'vote recorded only when granted');
      const p = newRaft('n2', { terms: [1, 2], term: 3 });
      p.step(msg('pre-vote', 'n1', 'n2', 3, { index: v.index, logTerm: v.logTerm }));
      t.match(take(p), [{ type: 'pre-vote-resp', reject: !v.granted }], 'same rule for pre-vote');
    }
    t.end();
  },
);

// Figure 7: whatever a follower's log looks like (missing, extra or conflicting entries), the
// leader's appends make it identical to the leader's log and then commit it. §5.3
t.test('the leader repairs divergent follower logs (Figure 7, §5.3)', (t) => {
  const leaderTerms = [1, 1, 1, 4, 4, 5, 5, 6, 6, 6];
  const followers: Record<string, number[]> = {
    a: [1, 1, 1, 4, 4, 5, 5, 6, 6],
    b: [1, 1, 1, 4],
    c: [1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 6],
    d: [1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 7, 7],
    e: [1, 1, 1, 4, 4, 4, 4],
    f: [1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3],
  };
  for (const [name, terms] of Object.entries(followers)) {
    const net = new Network({ voters: ['n1', 'n2', 'n3'] });
    const build = (ts: number[], term: number, commit: number): MemoryLogStorage => {
      const s = new MemoryLogStorage(conf(['n1', 'n2', 'n3']));
      s.append(ts.map((tm, i) => ent(i + 1, tm, `${i + 1}@${tm}`)));
      s.setHardState({ term, vote: NO_NODE, commit });
      return s;
    };
    net.addNode('n1', build(leaderTerms, 8, leaderTerms.length));
    net.addNode('n2', build(terms, 7, 0));
    net.addNode('n3', build([], 7, 0));
    net.processReadies();
    net.startWithLeader('n1');
    net.stabilize();
    const want = net.logTerms('n1');
    t.same(
      want.slice(0, 10),
      leaderTerms.map((tm, i) => [i + 1, tm]),
      `(${name}) leader log kept`,
    );
    t.same(net.logTerms('n2'), want, `(${name}) the follower's log equals the leader's`);
    t.same(net.logTerms('n3'), want, `(${name}) so does the empty follower's`);
    t.equal(net.raft('n2').log.committed, net.raft('n1').log.committed, `(${name}) commit`);
    t.same(
      net.appliedTexts('n2'),
      net.appliedTexts('n1'),
      `(${name}) the follower applies the leader's entries, in order`,
    );
  }
  t.end();
});

// Election timeouts are drawn at random from [et, 2et), afresh for each election, so that split
// votes are rare. §5.2
t.test('election timeouts are randomized in [et, 2et) (§5.2)', (t) => {
  const seen = new Set<number>();
  let outside = 0;
  for (let seed = 1; seed <= 200; seed++) {
    const r = newRaft('n1', { terms: [1], seed });
    let ticks = 0;
    while (r.role === 'follower' && ticks < 5 * ET) {
      r.tick();
      ticks++;
    }
    if (ticks < ET || ticks >= 2 * ET) outside++;
    seen.add(ticks);
  }
  t.equal(outside, 0, 'every follower timeout lies in [et, 2et)');
  t.ok(seen.size >= ET / 2, `timeouts are spread out (${seen.size} distinct values)`);

  // A candidate re-randomizes each time it starts a new election.
  const gaps = new Set<number>();
  let bad = 0;
  for (let seed = 1; seed <= 100; seed++) {
    const r = newRaft('n1', { terms: [1], seed, options: { preVote: false } });
    for (let i = 0; i < 5 * ET && r.role === 'follower'; i++) r.tick();
    const term = r.term;
    let ticks = 0;
    while (r.term === term && ticks < 5 * ET) {
      r.tick();
      ticks++;
    }
    if (ticks < ET || ticks >= 2 * ET) bad++;
    gaps.add(ticks);
  }
  t.equal(bad, 0, 'every candidate timeout lies in [et, 2et)');
  t.ok(gaps.size >= ET / 2, `candidate timeouts are spread out (${gaps.size} distinct values)`);
  t.end();
});
