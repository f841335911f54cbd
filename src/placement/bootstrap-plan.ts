/**
 * The layout of a brand-new cluster, computed identically by every initial node from the same
 * flags: the meta group on every node, and G data groups of (up to) three replicas spread
 * round-robin so that each node holds the same number of replicas and is the preferred leader
 * of the same number of groups. Pure: the plan is a function of its inputs.
 */
import { assert } from '../base/assert.js';
import type { NodeId } from '../raft/messages.js';
import { splitRing, type RingRange } from './ring.js';

export const META_GROUP_ID = 0;

export interface PlannedGroup extends RingRange {
  /** Replicas; the first is the preferred leader. */
  readonly replicas: readonly NodeId[];
}

export interface BootstrapPlan {
  readonly metaVoters: readonly NodeId[];
  readonly groups: readonly PlannedGroup[];
}

export function planBootstrap(
  nodes: readonly NodeId[],
  groupCount: number,
  replicaCount = 3,
): BootstrapPlan {
  const sorted = [...new Set(nodes)].sort();
  assert(sorted.length === nodes.length, 'node ids must be distinct');
  assert(sorted.length >= 1, 'a cluster needs at least one node');
  const k = Math.min(replicaCount, sorted.length);
  const groups = splitRing(groupCount, META_GROUP_ID + 1).map((range, i) => ({
    ...range,
    replicas: Array.from({ length: k }, (_, j) => sorted[(i + j) % sorted.length]!),
  }));
  return { metaVoters: sorted, groups };
}
