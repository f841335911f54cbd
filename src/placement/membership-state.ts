/**
 * The meta group's membership commands: members joining, draining and leaving, and replica
 * moves recorded step by step. Pure functions over the meta state's maps, called from
 * MetaStateMachine.apply, so every replica computes the same result; a command that does not
 * fit the state is refused with a result code and changes nothing.
 *
 * A replica move of group G from A to B is recorded in two phases, so that whoever drives it
 * after a crash (any meta leader) knows which way is safe:
 * - 'learner' (begin-move): B may be added to G as a learner and caught up. Until 'promote' is
 *   recorded the move may still be abandoned (abort-move), after B is taken out of G again;
 * - 'promote' (promote-move): G is, or is about to be, changed by joint consensus to hold B as a
 *   voter and not A. From here the move only goes forward: finish-move, once G's configuration
 *   is the final one, swaps A for B in the group's replicas and bumps its epoch.
 * At most one move per group is in flight, and B must be an active member not yet holding G.
 */
import type { NodeId } from '../raft/messages.js';

/** The fields of a member the membership commands read and write. */
export interface MembershipMember {
  readonly id: NodeId;
  readonly peerAddress: string;
  readonly apiAddress: string;
  readonly state: 'active' | 'draining' | 'removed';
}

export interface MembershipGroup {
  readonly id: number;
  readonly replicas: readonly NodeId[];
  readonly epoch: number;
  readonly preferredLeader?: NodeId | undefined;
}

export type MovePhase = 'learner' | 'promote';

export interface MoveRecord {
  readonly groupId: number;
  /** The replica that leaves; '' when the group is short and the move only adds `to`. */
  readonly from: NodeId;
  readonly to: NodeId;
  readonly phase: MovePhase;
}

export type MembershipCommand =
  /**
   * Adds a member. Idempotent for a retried join (the same id with the same peer address);
   * otherwise an id in use fails META_MEMBER_EXISTS and an address in use META_ADDRESS_IN_USE.
   */
  | {
      readonly op: 'add-member';
      readonly id: NodeId;
      readonly peerAddress: string;
      readonly apiAddress: string;
    }
  /** 'removed' is refused while the member holds a replica or a move names it. */
  | {
      readonly op: 'set-member-state';
      readonly id: NodeId;
      readonly state: 'active' | 'draining' | 'removed';
    }
  | {
      readonly op: 'begin-move';
      readonly groupId: number;
      readonly from: NodeId;
      readonly to: NodeId;
    }
  | { readonly op: 'promote-move'; readonly groupId: number }
  | { readonly op: 'finish-move'; readonly groupId: number }
  | { readonly op: 'abort-move'; readonly groupId: number };

export type MembershipResult = { ok: true } | { ok: false; code: string; reason: string };

export interface MembershipState {
  readonly members: Map<NodeId, MembershipMember>;
  readonly groups: Map<number, MembershipGroup>;
  readonly moves: Map<number, MoveRecord>;
}

const MEMBERSHIP_OPS: ReadonlySet<string> = new Set([
  'add-member',
  'set-member-state',
  'begin-move',
  'promote-move',
  'finish-move',
  'abort-move',
]);

export function isMembershipCommand(c: { readonly op: string }): c is MembershipCommand {
  return MEMBERSHIP_OPS.has(c.op);
}

function refuse(code: string, reason: string): MembershipResult {
  return { ok: false, code, reason };
}

export function applyMembershipCommand(s: MembershipState, c: MembershipCommand): MembershipResult {
  switch (c.op) {
    case 'add-member':
      return addMember(s, c);
    case 'set-member-state': {
      const m = s.members.get(c.id);
      if (!m) return refuse('META_NO_MEMBER', `no member ${c.id}`);
      if (m.state === 'removed') return refuse('META_MEMBER_REMOVED', `member ${c.id} was removed`);
      if (c.state === 'removed') {
        const held = groupsHeldBy(s, c.id);
        if (held.length > 0)
          return refuse(
            'META_MEMBER_HAS_REPLICAS',
            `member ${c.id} still holds replicas of group(s) ${held.join(',')}; drain it first`,
          );
      }
      s.members.set(c.id, { ...m, state: c.state });
      return { ok: true };
    }
    case 'begin-move':
      return beginMove(s, c.groupId, c.from, c.to);
    case 'promote-move': {
      const mv = s.moves.get(c.groupId);
      if (!mv) return refuse('META_NO_MOVE', `group ${c.groupId} has no move in flight`);
      if (mv.phase === 'promote') return { ok: true };
      s.moves.set(c.groupId, { ...mv, phase: 'promote' });
      return { ok: true };
    }
    case 'finish-move': {
      const mv = s.moves.get(c.groupId);
      const g = s.groups.get(c.groupId);
      if (!mv || !g) return refuse('META_NO_MOVE', `group ${c.groupId} has no move in flight`);
      if (mv.phase !== 'promote')
        return refuse('META_MOVE_PHASE', `the move of group ${c.groupId} is not promoted yet`);
      const replicas = g.replicas.filter((r) => r !== mv.from);
      replicas.push(mv.to);
      // A preference for the replica that left means nothing any more.
      const preferredLeader = g.preferredLeader === mv.from ? undefined : g.preferredLeader;
      s.groups.set(c.groupId, { ...g, replicas, epoch: g.epoch + 1, preferredLeader });
      s.moves.delete(c.groupId);
      return { ok: true };
    }
    case 'abort-move': {
      const mv = s.moves.get(c.groupId);
      if (!mv) return refuse('META_NO_MOVE', `group ${c.groupId} has no move in flight`);
      if (mv.phase !== 'learner')
        return refuse(
          'META_MOVE_PHASE',
          `the move of group ${c.groupId} is past its learner phase`,
        );
      s.moves.delete(c.groupId);
      return { ok: true };
    }
  }
}

function addMember(
  s: MembershipState,
  c: Extract<MembershipCommand, { op: 'add-member' }>,
): MembershipResult {
  if (c.id === '' || c.peerAddress === '')
    return refuse('META_MEMBER_INVALID', 'a member needs an id and a peer address');
  const existing = s.members.get(c.id);
  if (existing) {
    // The same node asking again (its join's answer was lost): nothing to do.
    if (existing.state !== 'removed' && existing.peerAddress === c.peerAddress) return { ok: true };
    return refuse(
      'META_MEMBER_EXISTS',
      existing.state === 'removed'
        ? `node id ${c.id} belonged to a removed member; ids are never reused`
        : `node id ${c.id} is already a member (peer address ${existing.peerAddress})`,
    );
  }
  for (const m of s.members.values()) {
    if (m.state === 'removed') continue;
    const clash =
      m.peerAddress === c.peerAddress
        ? c.peerAddress
        : c.apiAddress !== '' && m.apiAddress === c.apiAddress
          ? c.apiAddress
          : c.apiAddress !== '' && m.peerAddress === c.apiAddress
            ? c.apiAddress
            : m.apiAddress === c.peerAddress
              ? c.peerAddress
              : undefined;
    if (clash !== undefined)
      return refuse('META_ADDRESS_IN_USE', `address ${clash} is already used by member ${m.id}`);
  }
  s.members.set(c.id, {
    id: c.id,
    peerAddress: c.peerAddress,
    apiAddress: c.apiAddress,
    state: 'active',
  });
  return { ok: true };
}

function beginMove(
  s: MembershipState,
  groupId: number,
  from: NodeId,
  to: NodeId,
): MembershipResult {
  const g = s.groups.get(groupId);
  if (!g) return refuse('META_NO_GROUP', `no group ${groupId}`);
  const pending = s.moves.get(groupId);
  if (pending) {
    // The same move asked again (a retry after an unknown outcome) is not a conflict.
    if (pending.from === from && pending.to === to) return { ok: true };
    return refuse(
      'META_MOVE_IN_FLIGHT',
      `group ${groupId} is already moving a replica from ${pending.from || '(none)'} to ${pending.to}`,
    );
  }
  const target = s.members.get(to);
  if (!target || target.state !== 'active')
    return refuse('META_MOVE_INVALID', `target ${to} is not an active member`);
  if (g.replicas.includes(to))
    return refuse('META_MOVE_INVALID', `group ${groupId} already has a replica on ${to}`);
  if (from !== '' && !g.replicas.includes(from))
    return refuse('META_MOVE_INVALID', `group ${groupId} has no replica on ${from}`);
  s.moves.set(groupId, { groupId, from, to, phase: 'learner' });
  return { ok: true };
}

/** Groups that have a replica on `id`, or a move to or from it. */
export function groupsHeldBy(s: MembershipState, id: NodeId): number[] {
  const held = new Set<number>();
  for (const g of s.groups.values()) if (g.replicas.includes(id)) held.add(g.id);
  for (const mv of s.moves.values()) if (mv.to === id || mv.from === id) held.add(mv.groupId);
  return [...held].sort((a, b) => a - b);
}
