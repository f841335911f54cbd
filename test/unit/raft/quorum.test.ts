// Quorum arithmetic is the root of every commit and election decision, so it is checked twice:
// first with hand-picked tables (odd and even sizes, empty halves, joint configurations), then
// with a seeded differential test that compares majorityCommitted / jointCommitted /
// majorityVote / jointVote against deliberately naive counting over random configurations.
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import type { NodeId } from '../../../src/raft/messages.js';
import {
  jointCommitted,
  jointVote,
  majorityCommitted,
  majorityVote,
  type VoteResult,
} from '../../../src/raft/quorum.js';

const ids = (...xs: string[]): Set<NodeId> => new Set(xs);
const acked =
  (m: Record<string, number>) =>
  (id: NodeId): number =>
    m[id] ?? 0;
const votes = (m: Record<string, boolean>): Map<NodeId, boolean> => new Map(Object.entries(m));

t.test('majorityCommitted', (t) => {
  t.equal(majorityCommitted(ids(), acked({})), Number.POSITIVE_INFINITY, 'empty config: +Inf');
  t.equal(majorityCommitted(ids('a'), acked({ a: 7 })), 7, 'single voter commits alone');
  t.equal(majorityCommitted(ids('a', 'b'), acked({ a: 5, b: 3 })), 3, 'two voters need both');
  t.equal(majorityCommitted(ids('a', 'b', 'c'), acked({ a: 5, b: 3, c: 1 })), 3, '2 of 3');
  t.equal(majorityCommitted(ids('a', 'b', 'c'), acked({ a: 5 })), 0, 'missing acks count 0');
  t.equal(
    majorityCommitted(ids('a', 'b', 'c', 'd'), acked({ a: 9, b: 8, c: 2, d: 1 })),
    2,
    'four voters need three',
  );
  t.equal(
    majorityCommitted(ids('a', 'b', 'c', 'd', 'e'), acked({ a: 1, b: 9, c: 4, d: 4, e: 2 })),
    4,
    'five voters need three; order of ids does not matter',
  );
  t.equal(majorityCommitted(ids('a', 'b', 'c'), acked({ a: 4, b: 4, c: 4 })), 4, 'all equal acks');
  t.end();
});

t.test('jointCommitted is the minimum of both halves', (t) => {
  const ack = acked({ a: 10, b: 8, c: 6, d: 2, e: 1 });
  t.equal(jointCommitted(ids('a', 'b', 'c'), ids(), ack), 8, 'empty outgoing is ignored');
  t.equal(jointCommitted(ids(), ids('a', 'b', 'c'), ack), 8, 'empty incoming is ignored');
  t.equal(jointCommitted(ids(), ids(), ack), Number.POSITIVE_INFINITY, 'both empty: +Inf');
  t.equal(jointCommitted(ids('a', 'b', 'c'), ids('c', 'd', 'e'), ack), 2, 'outgoing lags');
  t.equal(jointCommitted(ids('d', 'e', 'a'), ids('a', 'b', 'c'), ack), 2, 'incoming lags');
  t.equal(jointCommitted(ids('a', 'b', 'c'), ids('a', 'b', 'c'), ack), 8, 'identical halves agree');
  t.end();
});

t.test('majorityVote', (t) => {
  const three = ids('a', 'b', 'c');
  t.equal(majorityVote(ids(), votes({})), 'won', 'empty config wins');
  t.equal(majorityVote(three, votes({})), 'pending', 'no votes yet');
  t.equal(majorityVote(three, votes({ a: true })), 'pending', 'one grant of three');
  t.equal(majorityVote(three, votes({ a: true, b: true })), 'won', 'two grants of three');
  t.equal(majorityVote(three, votes({ a: true, b: false })), 'pending', 'one each, one missing');
  t.equal(majorityVote(three, votes({ a: false, b: false })), 'lost', 'two rejects of three');
  t.equal(majorityVote(three, votes({ a: true, b: false, c: false })), 'lost', 'all answered');
  t.equal(majorityVote(ids('a'), votes({ a: true })), 'won', 'single voter');
  t.equal(majorityVote(ids('a'), votes({ a: false })), 'lost', 'single voter rejects');
  const four = ids('a', 'b', 'c', 'd');
  t.equal(majorityVote(four, votes({ a: true, b: true })), 'pending', 'two of four');
  t.equal(majorityVote(four, votes({ a: true, b: true, c: true })), 'won', 'three of four');
  t.equal(majorityVote(four, votes({ a: false, b: false })), 'lost', 'two rejects of four');
  t.equal(
    majorityVote(three, votes({ a: true, b: true, x: false, y: false, z: false })),
    'won',
    'votes from non-voters are ignored',
  );
  t.end();
});

t.test('jointVote needs both halves', (t) => {
  const inc = ids('a', 'b', 'c');
  const out = ids('c', 'd', 'e');
  t.equal(jointVote(inc, ids(), votes({ a: true, b: true })), 'won', 'non-joint behaves simply');
  t.equal(jointVote(inc, out, votes({ a: true, b: true })), 'pending', 'only incoming won');
  t.equal(jointVote(inc, out, votes({ a: true, c: true, d: true })), 'won', 'both halves won');
  t.equal(jointVote(inc, out, votes({ d: false, e: false, a: true, b: true })), 'lost', 'out lost');
  t.equal(jointVote(inc, out, votes({ a: false, b: false, d: true, e: true })), 'lost', 'in lost');
  t.equal(jointVote(inc, out, votes({ a: false, c: true, d: true })), 'pending', 'in pending');
  t.equal(jointVote(ids(), ids(), votes({})), 'won', 'both empty');
  t.end();
});

/** Naive commit: the largest k such that at least a majority acked >= k (empty: +Inf). */
function naiveCommitted(voters: readonly NodeId[], ack: (id: NodeId) => number): number {
  if (voters.length === 0) return Number.POSITIVE_INFINITY;
  const candidates = [0, ...voters.map(ack)];
  let best = 0;
  for (const k of candidates) {
    const n = voters.filter((id) => ack(id) >= k).length;
    if (n * 2 > voters.length && k > best) best = k;
  }
  return best;
}

function naiveVote(voters: readonly NodeId[], v: ReadonlyMap<NodeId, boolean>): VoteResult {
  if (voters.length === 0) return 'won';
  const yes = voters.filter((id) => v.get(id) === true).length;
  const no = voters.filter((id) => v.get(id) === false).length;
  if (yes * 2 > voters.length) return 'won';
  if (no * 2 >= voters.length) return 'lost';
  return 'pending';
}

function naiveJointVote(
  a: readonly NodeId[],
  b: readonly NodeId[],
  v: ReadonlyMap<NodeId, boolean>,
): VoteResult {
  const ra = naiveVote(a, v);
  const rb = naiveVote(b, v);
  if (ra === 'lost' || rb === 'lost') return 'lost';
  if (ra === 'won' && rb === 'won') return 'won';
  return 'pending';
}

t.test('seeded differential test against naive counting', (t) => {
  const rand = new SeededRand(20240601);
  const pool = ['n1', 'n2', 'n3', 'n4', 'n5', 'n6', 'n7', 'n8', 'n9'];
  const pick = (): NodeId[] => {
    const size = rand.int(8);
    return pool.filter(() => rand.int(pool.length) < size);
  };
  let mismatches = 0;
  const trials = 5000;
  for (let trial = 0; trial < trials; trial++) {
    const inc = pick();
    const out = rand.chance(0.5) ? pick() : [];
    const acks = new Map<NodeId, number>();
    const vs = new Map<NodeId, boolean>();
    for (const id of pool) {
      if (rand.chance(0.85)) acks.set(id, rand.int(20));
      const r = rand.int(3);
      if (r === 1) vs.set(id, true);
      else if (r === 2) vs.set(id, false);
    }
    const ack = (id: NodeId): number => acks.get(id) ?? 0;
    const expectC = Math.min(naiveCommitted(inc, ack), naiveCommitted(out, ack));
    const gotC = jointCommitted(new Set(inc), new Set(out), ack);
    const expectM = naiveCommitted(inc, ack);
    const gotM = majorityCommitted(new Set(inc), ack);
    const expectV = naiveJointVote(inc, out, vs);
    const gotV = jointVote(new Set(inc), new Set(out), vs);
    const expectMV = naiveVote(inc, vs);
    const gotMV = majorityVote(new Set(inc), vs);
    if (gotC !== expectC || gotM !== expectM || gotV !== expectV || gotMV !== expectMV) {
      mismatches++;
      if (mismatches <= 5) {
        t.fail('quorum result differs from naive counting', {
          inc,
          out,
          acks: Object.fromEntries(acks),
          votes: Object.fromEntries(vs),
          committed: { got: gotC, expected: expectC },
          majority: { got: gotM, expected: expectM },
          jointVote: { got: gotV, expected: expectV },
          majorityVote: { got: gotMV, expected: expectMV },
        });
      }
    }
  }
  t.equal(mismatches, 0, `${trials} random configurations agree with naive counting`);
  t.end();
});
