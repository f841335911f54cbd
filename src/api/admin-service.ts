/**
 * AdminService and the node-to-node NodeService: each handler reads its request and runs the
 * cluster operation (src/cluster: ClusterStatus, membership and moves, rebalance, drain and
 * remove, leader transfer, splits) on the node it must run on (the meta leader, a group's
 * leader), forwarding there if need be. The bulk calls by tenant live in bulk-tenant-jobs.ts.
 */
import type * as grpc from '@grpc/grpc-js';
import { ValidationError } from '../base/errors.js';
import { clusterStatus, localStatus } from '../cluster/cluster-status.js';
import { setPreferredLeaderLocal, transferLeader } from '../cluster/leader-transfer.js';
import {
  addNodeLocal,
  changeGroupMembershipLocal,
  checkMoveRequest,
  groupMembershipLocal,
  proposeMeta,
} from '../cluster/membership-admin.js';
import { drainNode, rebalance, removeNode, undrainNode } from '../cluster/rebalance-admin.js';
import { beginSplitLocal, checkSplitRequest, splitGroupLocal } from '../cluster/split-admin.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import { encodeMetaCommand, type MetaResult } from '../placement/meta-state.js';
import type { ApiContext } from './api-context.js';
import { bulkTenantJobs, deadRunFilterOf, tenantJobsActionOf } from './bulk-tenant-jobs.js';
import type { Msg } from './convert.js';
import { groupCreateJobsLocal, localListJobs, nodeCreateJobsLocal } from './job-service.js';
import { isDeadKey } from './pagination.js';
import { localRunOutput } from './run-output.js';
import { localListDead } from './run-service.js';
import { num, str, unary, type Handler } from './service-kit.js';
import { TenantAdminError } from './tenant-admin.js';
import type { UpstreamAnswer } from '../scheduler/upstream.js';

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
    UpstreamRun: (req, ctx) => {
      const jobKey = str(req, 'jobKey');
      return api.onGroup(
        ctx,
        () => api.admin.groupOf(jobKey),
        'NodeService',
        'UpstreamRun',
        req,
        async () => upstreamRunOut(await api.admin.upstreamRun(jobKey, num(req, 'slotMs'))),
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
    RunOutput: (req) => Promise.resolve(localRunOutput(api.node.runOutputs, req)),
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

function upstreamRunOut(a: UpstreamAnswer): Msg {
  return { outcome: a.outcome, fireId: a.fireId ?? '', status: a.status ?? '' };
}
