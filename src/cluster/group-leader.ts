/**
 * Which node leads a group, from the replicas' own answers (ClusterStatus). Replicas answer at
 * slightly different moments, so they may disagree: one still says it leads term 5 while
 * another has moved on to term 6. Only the highest term anyone reports can have a current
 * leader; pairing term 6 with term 5's leader would send callers to a node that is deposed.
 */
export interface ReplicaView {
  readonly nodeId: string;
  /** Empty when the node did not answer. */
  readonly role: string;
  readonly term: number;
  /** The leader the replica follows in its term; empty when it knows none. */
  readonly lead: string;
}

export interface GroupLeader {
  /** The highest term any answering replica is in (0: none answered). */
  readonly term: number;
  /** The leader of that term, or empty. */
  readonly leader: string;
  /** The replica that is that leader, when it answered itself. */
  readonly leaderReplica: ReplicaView | undefined;
}

export function groupLeaderOf(replicas: readonly ReplicaView[]): GroupLeader {
  let term = 0;
  for (const r of replicas) if (r.role !== '' && r.term > term) term = r.term;
  let leader = '';
  let leaderReplica: ReplicaView | undefined;
  for (const r of replicas) {
    if (r.role === '' || r.term !== term) continue;
    if (r.role === 'leader') {
      // At most one leader per term (Raft's election safety), so the first one is the one.
      leader = r.nodeId;
      leaderReplica = r;
      break;
    }
    if (leader === '' && r.lead !== '') leader = r.lead;
  }
  return { term, leader, leaderReplica };
}
