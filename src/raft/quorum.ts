/**
 * Quorum arithmetic for majority and joint configurations, as pure functions.
 * A joint configuration is two majority configurations that must both agree; an empty majority
 * configuration agrees with anything (so a non-joint config is a joint one with an empty half).
 */
import type { NodeId } from './messages.js';

export type VoteResult = 'won' | 'lost' | 'pending';

/**
 * The highest index acknowledged by a majority of `voters`. Empty config: +Infinity, so that
 * min() over the halves of a joint config ignores the empty half.
 */
export function majorityCommitted(
  voters: ReadonlySet<NodeId>,
  ackedIndex: (id: NodeId) => number,
): number {
  const n = voters.size;
  if (n === 0) return Number.POSITIVE_INFINITY;
  // Asked at every acknowledgement and every lease check: insertion into one reused array,
  // descending, rather than a new array and a sort per call (configurations are a handful of
  // voters). Calls never nest, so one scratch array serves them all.
  const acked = ACKED_SCRATCH;
  let k = 0;
  for (const id of voters) {
    const v = ackedIndex(id);
    let i = k++;
    while (i > 0 && (acked[i - 1] as number) < v) {
      acked[i] = acked[i - 1] as number;
      i--;
    }
    acked[i] = v;
  }
  // With n voters, a majority is floor(n/2)+1: the value at that position (descending) has
  // been reached by at least a majority.
  return acked[Math.floor(n / 2)] as number;
}

/** majorityCommitted's working array; only its first `voters.size` slots mean anything. */
const ACKED_SCRATCH: number[] = [];

export function jointCommitted(
  incoming: ReadonlySet<NodeId>,
  outgoing: ReadonlySet<NodeId>,
  ackedIndex: (id: NodeId) => number,
): number {
  return Math.min(majorityCommitted(incoming, ackedIndex), majorityCommitted(outgoing, ackedIndex));
}

export function majorityVote(
  voters: ReadonlySet<NodeId>,
  votes: ReadonlyMap<NodeId, boolean>,
): VoteResult {
  if (voters.size === 0) return 'won';
  let granted = 0;
  let missing = 0;
  for (const id of voters) {
    const v = votes.get(id);
    if (v === undefined) missing++;
    else if (v) granted++;
  }
  const q = Math.floor(voters.size / 2) + 1;
  if (granted >= q) return 'won';
  if (granted + missing >= q) return 'pending';
  return 'lost';
}

export function jointVote(
  incoming: ReadonlySet<NodeId>,
  outgoing: ReadonlySet<NodeId>,
  votes: ReadonlyMap<NodeId, boolean>,
): VoteResult {
  const a = majorityVote(incoming, votes);
  const b = majorityVote(outgoing, votes);
  if (a === b) return a;
  if (a === 'lost' || b === 'lost') return 'lost';
  return 'pending';
}
