/**
 * AdminService and the node-to-node NodeService. ClusterStatus asks every member for its
 * replicas' status (LocalStatus) and joins the answers with the meta group's map; a node that
 * does not answer within the bound is shown unreachable rather than failing the call. The bulk
 * calls by tenant live in bulk-tenant-jobs.ts.
 */
import type * as grpc from '@grpc/grpc-js';
import { ValidationError } from '../base/errors.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import { clientAddressOf, encodeMetaCommand, type MetaResult } from '../placement/meta-state.js';
import {
  addNodeLocal,
  changeGroupMembershipLocal,
  checkMoveRequest,
  groupMembershipLocal,
  proposeMeta,
} from './membership-admin.js';
import type { ApiContext } from './api-context.js';
import { bulkTenantJobs, deadRunFilterOf, tenantJobsActionOf } from './bulk-tenant-jobs.js';
import type { Msg } from './convert.js';
import { groupLeaderOf } from './group-leader.js';
import { askEveryMember } from './member-fanout.js';
import { groupCreateJobsLocal, localListJobs, nodeCreateJobsLocal } from './job-service.js';
import { drainNode, rebalance, removeNode, undrainNode } from './rebalance-admin.js';
import { isDeadKey } from './pagination.js';
import { beginSplitLocal, checkSplitRequest, splitGroupLocal } from './split-admin.js';
import { localListDead } from './run-service.js';
import { sleep, type CallContext } from './router.js';
import { num, str, unary, type Handler } from './service-kit.js';
import { DeadlineError } from './status-map.js';
import { TenantAdminError } from './tenant-admin.js';

/** ClusterStatus waits at most this long for any one node. */
export const STATUS_FANOUT_MS = 2000;
/** TransferLeader waits at most this long for the new leader when the caller set no deadline. */
export const TRANSFER_WAIT_MS = 10_000;
/** Replicas per data group the rebalancer keeps (the bootstrap plan's default). */
export const REPLICA_COUNT = 3;

interface LocalStatus {
  nodeId: string;
  replicas: Msg[];
  groupIds: number[];
}

function localStatus(api: ApiContext): LocalStatus {
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

export async function clusterStatus(api: ApiContext, ctx: CallContext): Promise<Msg> {
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

export async function transferLeader(api: ApiContext, ctx: CallContext, req: Msg): Promise<Msg> {
  const groupId = num(req, 'groupId');
  const to = str(req, 'toNode');
  const g = api.node.host.groups.get(groupId);
  const voters = g ? [...g.node.status().confState.voters] : [];
  if (!voters.includes(to))
    throw new ValidationError('REQUEST_INVALID', [
      { field: 'toNode', reason: `must be a voter of group ${groupId} (${voters.join(', ')})` },
    ]);
  // A data group's new place is recorded first: leader balancing on the new leader would
  // otherwise hand the group back to its bootstrap plan's node, and a hand-over that does not
  // finish now is then completed by balancing here.
  if (groupId !== META_GROUP_ID) await recordPreferredLeader(api, ctx, groupId, to);
  if (to !== api.node.id) {
    if (groupId === META_GROUP_ID) api.node.host.report(groupId, { kind: 'transfer-leader', to });
    else api.node.scheduler.handOver(groupId, to);
  }
  const until = Math.min(ctx.deadlineMs, Date.now() + TRANSFER_WAIT_MS);
  while (Date.now() < until) {
    const st = g!.node.status();
    if (st.lead === to) return { leader: to, term: st.term };
    await sleep(50);
  }
  throw new DeadlineError(`waiting for ${to} to lead group ${groupId}`);
}

/** SetPreferredLeader through the meta group's leader, wherever that is. */
function recordPreferredLeader(
  api: ApiContext,
  ctx: CallContext,
  groupId: number,
  node: string,
): Promise<unknown> {
  // Its own call: the meta leader may be another node even when this call was forwarded here.
  const own: CallContext = { deadlineMs: ctx.deadlineMs, forwarded: false, route: undefined };
  const req = { groupId, nodeId: node };
  return api.onGroup(own, META_GROUP_ID, 'NodeService', 'SetPreferredLeader', req, () =>
    setPreferredLeaderLocal(api, req),
  );
}

async function setPreferredLeaderLocal(api: ApiContext, req: Msg): Promise<Msg> {
  await proposeMeta(api, {
    op: 'set-preferred-leader',
    groupId: num(req, 'groupId'),
    node: str(req, 'nodeId'),
  });
  return {};
}

export function adminServiceHandlers(api: ApiContext): grpc.UntypedServiceImplementation {
  const handlers: Record<string, Handler> = {
    ClusterStatus: (_req, ctx) => clusterStatus(api, ctx),
    AddNode: (req, ctx) =>
      api.onGroup(ctx, META_GROUP_ID, 'AdminService', 'AddNode', req, () => addNodeLocal(api, req)),
    MoveReplica: (req, ctx) => {
      checkMoveRequest(api, req);
      return api.onGroup(ctx, META_GROUP_ID, 'AdminService', 'MoveReplica', req, async () => {
        await proposeMeta(api, {
          op: 'begin-move',
          groupId: num(req, 'groupId'),
          from: str(req, 'fromNode'),
          to: str(req, 'toNode'),
        });
        return {};
      });
    },
    Rebalance: (req, ctx) =>
      api.onGroup(ctx, META_GROUP_ID, 'AdminService', 'Rebalance', req, () =>
        rebalance(api, ctx, req),
      ),
    DrainNode: (req, ctx) =>
      api.onGroup(ctx, META_GROUP_ID, 'AdminService', 'DrainNode', req, () =>
        drainNode(api, ctx, req),
      ),
    UndrainNode: (req, ctx) =>
      api.onGroup(ctx, META_GROUP_ID, 'AdminService', 'UndrainNode', req, () =>
        undrainNode(api, req),
      ),
    RemoveNode: (req, ctx) =>
      api.onGroup(ctx, META_GROUP_ID, 'AdminService', 'RemoveNode', req, () =>
        removeNode(api, ctx, req),
      ),
    TransferLeader: (req, ctx) => {
      const groupId = num(req, 'groupId');
      if (groupId !== META_GROUP_ID && !api.node.meta.groups.has(groupId))
        throw new ValidationError('REQUEST_INVALID', [
          { field: 'groupId', reason: `no group ${groupId}` },
        ]);
      return api.onGroup(ctx, groupId, 'AdminService', 'TransferLeader', req, () =>
        transferLeader(api, ctx, req),
      );
    },
    SplitGroup: (req, ctx) => {
      checkSplitRequest(api, req);
      return api.onGroup(ctx, META_GROUP_ID, 'AdminService', 'SplitGroup', req, () =>
        beginSplitLocal(api, req),
      );
    },
    BulkPause: (req, ctx) => bulkTenantJobs(api, ctx, req, 'pause'),
    BulkResume: (req, ctx) => bulkTenantJobs(api, ctx, req, 'resume'),
    BulkCancel: (req, ctx) => bulkTenantJobs(api, ctx, req, 'delete'),
  };
  return Object.fromEntries(
    Object.entries(handlers).map(([name, fn]) => [
      name,
      unary(`AdminService.${name}`, fn, api.log),
    ]),
  );
}

function afterOf(req: Msg): unknown {
  try {
    return JSON.parse(str(req, 'afterJson') || 'null') as unknown;
  } catch {
    throw new ValidationError('REQUEST_INVALID', [{ field: 'afterJson', reason: 'is not JSON' }]);
  }
}

export function nodeServiceHandlers(api: ApiContext): grpc.UntypedServiceImplementation {
  const handlers: Record<string, Handler> = {
    GroupListJobs: (req, ctx) => {
      const groupId = num(req, 'groupId');
      const after = afterOf(req);
      return api.onGroup(ctx, groupId, 'NodeService', 'GroupListJobs', req, () =>
        localListJobs(
          api,
          ctx,
          groupId,
          str(req, 'tenant'),
          typeof after === 'string' ? after : '',
          num(req, 'limit'),
        ),
      );
    },
    GroupListDeadRuns: (req, ctx) => {
      const groupId = num(req, 'groupId');
      const after = afterOf(req);
      return api.onGroup(ctx, groupId, 'NodeService', 'GroupListDeadRuns', req, () =>
        localListDead(
          api,
          groupId,
          str(req, 'tenant'),
          isDeadKey(after) ? after : undefined,
          num(req, 'limit'),
        ),
      );
    },
    GroupTenantJobs: (req, ctx) => {
      const groupId = num(req, 'groupId');
      const tenant = str(req, 'tenant');
      const action = tenantJobsActionOf(req);
      return api.onGroup(ctx, groupId, 'NodeService', 'GroupTenantJobs', req, () =>
        api.admin.tenantJobs(groupId, tenant, action, deadRunFilterOf(req)),
      );
    },
    SplitGroup: (req, ctx) => {
      const groupId = num(req, 'groupId');
      return api.onGroup(ctx, groupId, 'NodeService', 'SplitGroup', req, () =>
        splitGroupLocal(api, groupId, req),
      );
    },
    GroupCreateJobs: (req, ctx) => {
      const groupId = num(req, 'groupId');
      return api.onGroup(ctx, groupId, 'NodeService', 'GroupCreateJobs', req, () =>
        groupCreateJobsLocal(api, groupId, req),
      );
    },
    NodeCreateJobs: (req, ctx) => nodeCreateJobsLocal(api, req, ctx),
    LocalStatus: () => Promise.resolve(localStatus(api)),
    NodeTenantUsage: (req) => Promise.resolve(api.quota.localUsage(str(req, 'tenant'))),
    GroupMembership: (req, ctx) => {
      const groupId = num(req, 'groupId');
      return api.onGroup(ctx, groupId, 'NodeService', 'GroupMembership', req, () =>
        groupMembershipLocal(api, groupId),
      );
    },
    ChangeGroupMembership: (req, ctx) => {
      const groupId = num(req, 'groupId');
      return api.onGroup(ctx, groupId, 'NodeService', 'ChangeGroupMembership', req, () =>
        changeGroupMembershipLocal(api, groupId, req),
      );
    },
    SetPreferredLeader: (req, ctx) =>
      api.onGroup(ctx, META_GROUP_ID, 'NodeService', 'SetPreferredLeader', req, () =>
        setPreferredLeaderLocal(api, req),
      ),
    RegisterApiAddress: (req, ctx) =>
      api.onGroup(ctx, META_GROUP_ID, 'NodeService', 'RegisterApiAddress', req, async () => {
        const r = (await api.node.host.propose(
          META_GROUP_ID,
          encodeMetaCommand({
            op: 'set-api-address',
            id: str(req, 'nodeId'),
            apiAddress: str(req, 'apiAddress'),
            advertisedAddress: str(req, 'advertisedAddress'),
          }),
        )) as MetaResult;
        if (!r.ok) throw new TenantAdminError(r.code, r.reason);
        return {};
      }),
  };
  return Object.fromEntries(
    Object.entries(handlers).map(([name, fn]) => [name, unary(`NodeService.${name}`, fn, api.log)]),
  );
}
