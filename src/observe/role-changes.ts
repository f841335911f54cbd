/**
 * Says why a replica's role changed, from the role and term seen after one loop turn and the
 * next. A leader change alone does not tell an operator whether the old leader went quiet (its
 * followers campaigned), lost touch with its followers (check-quorum made it step down), or
 * handed the group over; the first two point at a held or cut-off node, the last is routine.
 *
 * - follower → pre-candidate: the follower heard nothing from its leader for an election
 *   timeout, or in a quiet group the leader's peer stream to it broke (pre-vote runs before
 *   every such campaign).
 * - follower → candidate: a campaign without pre-vote, which only a leader transfer starts
 *   (the transferee is told to campaign at once).
 * - leader → follower in the same term: check-quorum, it heard from no quorum for an election
 *   timeout; in a later term: a message of that term reached it (a transfer it made, or an
 *   election it was not part of).
 * - (pre-)candidate → follower: the campaign failed (pre-vote refused, or another won).
 */
import type { Role } from '../raft/ready.js';

export const ROLE_CHANGE_REASONS = [
  'leader-silent',
  'transfer',
  'check-quorum',
  'higher-term',
  'campaign-lost',
] as const;

export type RoleChangeReason = (typeof ROLE_CHANGE_REASONS)[number];

export interface RoleChange {
  readonly groupId: number;
  readonly reason: RoleChangeReason;
  readonly from: Role;
  readonly to: Role;
  readonly termBefore: number;
  readonly term: number;
  /** The leader the replica knew before the change ('' if none). */
  readonly leaderBefore: string;
  /** The leader it knows now ('' if none). */
  readonly leader: string;
}

interface Seen {
  role: Role;
  term: number;
  leader: string;
}

export class RoleChanges {
  private readonly seen = new Map<number, Seen>();

  /**
   * Records what group `groupId`'s replica is now; returns the change since the last call if it
   * is one of the kinds above. The first call for a group only records.
   */
  observe(groupId: number, role: Role, term: number, leader: string): RoleChange | undefined {
    const before = this.seen.get(groupId);
    if (before === undefined) {
      this.seen.set(groupId, { role, term, leader });
      return undefined;
    }
    if (before.role === role && before.term === term && before.leader === leader) return undefined;
    const from = before.role;
    const reason = classify(from, role, before.term, term);
    const change: RoleChange | undefined =
      reason === undefined
        ? undefined
        : {
            groupId,
            reason,
            from,
            to: role,
            termBefore: before.term,
            term,
            leaderBefore: before.leader,
            leader,
          };
    before.role = role;
    before.term = term;
    before.leader = leader;
    return change;
  }

  /** Forgets a group (its replica left this node). */
  forget(groupId: number): void {
    this.seen.delete(groupId);
  }
}

function classify(
  from: Role,
  to: Role,
  termBefore: number,
  term: number,
): RoleChangeReason | undefined {
  if (from === 'follower' && to === 'pre-candidate') return 'leader-silent';
  if (from === 'follower' && to === 'candidate') return 'transfer';
  if (from === 'leader' && to !== 'leader')
    return term === termBefore ? 'check-quorum' : 'higher-term';
  if ((from === 'pre-candidate' || from === 'candidate') && to === 'follower')
    return 'campaign-lost';
  return undefined;
}
