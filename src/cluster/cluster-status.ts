/**
 * ClusterStatus: asks every member for its replicas' status (LocalStatus) and joins the answers
 * with the meta group's map; a node that does not answer within the bound is shown unreachable
 * rather than failing the call. The rebalancer plans from the leaders it reports.
 */
import type { Msg } from '../base/fields.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import { clientAddressOf } from '../placement/meta-state.js';
import type { ClusterContext, OpContext } from './cluster-context.js';
import { groupLeaderOf } from './group-leader.js';
import { askEveryMember } from './member-fanout.js';

/** ClusterStatus waits at most this long for any one node. */
export const STATUS_FANOUT_MS = 2000;

export interface LocalStatus {
  nodeId: string;
  replicas: Msg[];
  groupIds: number[];
}

/** NodeService.LocalStatus: this node's replicas as they see themselves. */
export function localStatus(api: ClusterContext): LocalStatus {
  const replicas: Msg[] = [];
  const groupIds: number[] = [];
  for (const g of api.node.host.groups.values()) {
    const st = g.node.status();
    groupIds.push(g.groupId);
    replicas.push({
      nodeId: api.node.id,
      role: st.role,
      term: st.term,
      lead: st.lead,
      commitIndex: st.commit,
      appliedIndex: st.applied,
      lastIndex: st.lastIndex,
      quiesced: g.node.isQuiesced(),
      jobs: api.node.data.get(g.groupId)?.scheduler.jobs.size ?? 0,
      fireRatePerSec: api.node.scheduler.fireRatePerSec(g.groupId),
    });
  }
  return { nodeId: api.node.id, replicas, groupIds };
}

export async function clusterStatus(api: ClusterContext, ctx: OpContext): Promise<Msg> {
  const meta = api.node.meta;
  const members = [...meta.members.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
  const answers = await askEveryMember(api, ctx, 'LocalStatus', {}, STATUS_FANOUT_MS, () =>
    localStatus(api),
  );
  const byNode = new Map<string, LocalStatus>();
  for (const a of answers) byNode.set(a.nodeId, a);
  const groupIds = [META_GROUP_ID, ...[...meta.groups.keys()].sort((a, b) => a - b)];
  const groups = groupIds.map((groupId) => {
    const rec = meta.groups.get(groupId);
    const replicaIds = rec ? [...rec.replicas] : members.map((m) => m.id);
    const replicas = replicaIds.map((nodeId) => {
      const st = byNode.get(nodeId);
      const i = st?.groupIds.indexOf(groupId) ?? -1;
      return i >= 0 ? st!.replicas[i]! : { nodeId, role: '' };
    });
    const { leader, term, leaderReplica } = groupLeaderOf(
      replicas.map((r) => ({
        nodeId: String(r['nodeId']),
        role: typeof r['role'] === 'string' ? r['role'] : '',
        term: typeof r['term'] === 'number' ? r['term'] : 0,
        lead: typeof r['lead'] === 'string' ? r['lead'] : '',
      })),
    );
    const led = leaderReplica && replicas.find((r) => r['nodeId'] === leaderReplica.nodeId);
    return {
      groupId,
      rangeStart: rec?.start ?? 0,
      rangeEnd: rec?.end ?? 0,
      epoch: rec?.epoch ?? 0,
      leader,
      term,
      replicas,
      jobs: led?.['jobs'] ?? 0,
      fireRatePerSec: led?.['fireRatePerSec'] ?? 0,
      preferredLeader: rec?.preferredLeader ?? '',
    };
  });
  return {
    nodes: members.map((m) => ({
      id: m.id,
      peerAddress: m.peerAddress,
      // Clients dial what the node advertises; listenAddress is where nodes forward calls.
      apiAddress: clientAddressOf(m),
      listenAddress: m.apiAddress,
      state: m.state,
      reachable: byNode.has(m.id),
    })),
    groups,
    answeredBy: api.node.id,
    moves: [...meta.moves.values()].map((m) => ({
      groupId: m.groupId,
      fromNode: m.from,
      toNode: m.to,
      phase: m.phase,
    })),
    splits: [...meta.splits.values()].map((sp) => ({
      groupId: sp.groupId,
      childGroupId: sp.childId,
      start: sp.start,
      mid: sp.mid,
      end: sp.end,
    })),
  };
}
