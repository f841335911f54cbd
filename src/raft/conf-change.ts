/**
 * Membership changes as pure functions over ConfState: copy, change, check, return. The same
 * function runs at propose time (to refuse a bad change early) and at apply time (where the
 * committed result is authoritative on every replica).
 *
 * Rules (joint consensus, Raft thesis §4.3, etcd's ConfChangeV2 shape):
 * - a 'simple' change alters at most one voter and is never used while joint;
 * - 'auto' / 'explicit' changes enter a joint configuration C_old,new; an empty change list
 *   leaves it (C_new). 'auto' asks the leader to propose the leave step itself;
 * - a node is never both voter and learner in the incoming configuration; a voter demoted to
 *   learner while joint waits in learnersNext until the joint configuration is left;
 * - the incoming configuration always has at least one voter.
 */
import type { ConfChange, ConfState, NodeId } from './messages.js';

export type ConfChangeResult = { ok: true; confState: ConfState } | { ok: false; reason: string };

export function isJoint(cs: ConfState): boolean {
  return cs.votersOutgoing.length > 0;
}

export function isLeaveJoint(cc: ConfChange): boolean {
  return cc.changes.length === 0;
}

export function applyConfChange(cs: ConfState, cc: ConfChange): ConfChangeResult {
  if (isLeaveJoint(cc)) return leaveJoint(cs);
  if (isJoint(cs)) return { ok: false, reason: 'configuration is joint; leave it first' };
  const voters = new Set(cs.voters);
  const learners = new Set(cs.learners);
  const outgoing = cc.transition === 'simple' ? new Set<NodeId>() : new Set(cs.voters);
  const learnersNext = new Set<NodeId>();
  for (const ch of cc.changes) {
    if (ch.nodeId === '') return { ok: false, reason: 'change names an empty node id' };
    switch (ch.type) {
      case 'add-voter':
        learners.delete(ch.nodeId);
        learnersNext.delete(ch.nodeId);
        voters.add(ch.nodeId);
        break;
      case 'add-learner':
        voters.delete(ch.nodeId);
        learners.delete(ch.nodeId);
        learnersNext.delete(ch.nodeId);
        // A voter of the outgoing half cannot also be a learner until the joint state ends.
        if (outgoing.has(ch.nodeId)) learnersNext.add(ch.nodeId);
        else learners.add(ch.nodeId);
        break;
      case 'remove-node':
        voters.delete(ch.nodeId);
        learners.delete(ch.nodeId);
        learnersNext.delete(ch.nodeId);
        break;
    }
  }
  if (voters.size === 0) return { ok: false, reason: 'removing every voter is not allowed' };
  if (cc.transition === 'simple') {
    let changed = 0;
    for (const id of voters) if (!cs.voters.includes(id)) changed++;
    for (const id of cs.voters) if (!voters.has(id)) changed++;
    if (changed > 1) {
      return {
        ok: false,
        reason: 'a simple change may alter at most one voter; use joint consensus',
      };
    }
  }
  return {
    ok: true,
    confState: {
      voters: sorted(voters),
      votersOutgoing: sorted(outgoing),
      learners: sorted(learners),
      learnersNext: sorted(learnersNext),
      autoLeave: cc.transition === 'auto',
    },
  };
}

function leaveJoint(cs: ConfState): ConfChangeResult {
  if (!isJoint(cs)) return { ok: false, reason: 'configuration is not joint' };
  const learners = new Set([...cs.learners, ...cs.learnersNext]);
  return {
    ok: true,
    confState: {
      voters: cs.voters.slice(),
      votersOutgoing: [],
      learners: sorted(learners),
      learnersNext: [],
      autoLeave: false,
    },
  };
}

function sorted(ids: Iterable<NodeId>): NodeId[] {
  return [...ids].sort();
}

/** Every node the configuration names, voter or learner, either half. */
export function allMembers(cs: ConfState): Set<NodeId> {
  return new Set([...cs.voters, ...cs.votersOutgoing, ...cs.learners, ...cs.learnersNext]);
}

export function isVoter(cs: ConfState, id: NodeId): boolean {
  return cs.voters.includes(id) || cs.votersOutgoing.includes(id);
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Conf-change entries carry JSON: small, rare, and readable in traces. */
export function encodeConfChange(cc: ConfChange): Uint8Array {
  return encoder.encode(JSON.stringify(cc));
}

export function decodeConfChange(data: Uint8Array): ConfChange {
  return JSON.parse(decoder.decode(data)) as ConfChange;
}
