/**
 * AdminService BulkPause / BulkResume / BulkCancel: one tenant's jobs in every data group,
 * changed by one tenant-jobs entry per group (src/scheduler/commands.ts), each proposed on that
 * group's leader (forwarded there by the router, as any job call). The groups are asked at once;
 * the call answers when all have committed, and reports per group how many of the tenant's jobs
 * it holds, how many this call changed, and when it committed.
 *
 * Groups commit independently: when one does not answer in time, those that did keep the change
 * and the error names the others. A retry is harmless (a second pause changes nothing).
 */
import * as grpc from '@grpc/grpc-js';
import { DeadlineError, TickraftError, ValidationError } from '../base/errors.js';
import type { DeadRunFilter, TenantJobsAction } from '../scheduler/commands.js';
import type { ApiContext } from './api-context.js';
import type { Msg } from './convert.js';
import type { CallContext } from './router.js';
import { resolveTenant } from './tenant-scope.js';
import { isServiceError, NO_LEADER_RETRY_MS } from './status-map.js';
import { TenantAdminError } from './tenant-admin.js';

/** How long a bulk call waits for every group when the caller set no (or a longer) deadline. */
export const BULK_WAIT_MS = 10_000;

export const TENANT_JOBS_ACTIONS: readonly TenantJobsAction[] = [
  'pause',
  'resume',
  'delete',
  'purge-dead',
];

/** Some groups did not commit (no leader, unreachable): the others did. UNAVAILABLE. */
export class BulkIncompleteError extends TickraftError {
  override readonly name = 'BulkIncompleteError';
}

interface GroupOutcome {
  readonly groupId: number;
  readonly jobs: number;
  readonly changed: number;
  readonly committedAfterMs: number;
}

export async function bulkTenantJobs(
  api: ApiContext,
  ctx: CallContext,
  req: Msg,
  action: TenantJobsAction,
  deadRuns?: DeadRunFilter,
): Promise<Msg> {
  const startMs = Date.now();
  const tenant = resolveTenant(
    ctx,
    typeof req['tenant'] === 'string' ? req['tenant'] : '',
    'tenant',
  );
  await api.freshTenant(tenant);
  if (!api.node.meta.tenants.has(tenant))
    throw new TenantAdminError('TENANT_NOT_FOUND', `tenant ${tenant} does not exist`);
  const bound: CallContext = {
    ...ctx,
    deadlineMs: Math.min(ctx.deadlineMs, startMs + BULK_WAIT_MS),
  };
  const groupIds = api.admin.ranges().map((r) => r.groupId);
  const settled = await Promise.allSettled(
    groupIds.map(async (groupId): Promise<GroupOutcome> => {
      const r = await api.onGroup(
        bound,
        groupId,
        'NodeService',
        'GroupTenantJobs',
        {
          groupId,
          tenant,
          action,
          jobKey: deadRuns?.jobId ?? '',
          ...(deadRuns?.diedBeforeMs !== undefined ? { diedBeforeMs: deadRuns.diedBeforeMs } : {}),
        },
        () => api.admin.tenantJobs(groupId, tenant, action, deadRuns),
      );
      return { groupId, jobs: r.jobs, changed: r.changed, committedAfterMs: Date.now() - startMs };
    }),
  );
  const done: GroupOutcome[] = [];
  const failed: { groupId: number; err: unknown }[] = [];
  settled.forEach((s, i) => {
    if (s.status === 'fulfilled') done.push(s.value);
    else failed.push({ groupId: groupIds[i]!, err: s.reason });
  });
  if (failed.length > 0) throw incomplete(action, tenant, done, failed, bound);
  return {
    tenant,
    groups: done,
    jobsTotal: done.reduce((n, g) => n + g.jobs, 0),
    changedTotal: done.reduce((n, g) => n + g.changed, 0),
    elapsedMs: Math.max(0, ...done.map((g) => g.committedAfterMs)),
  };
}

/**
 * The error for groups that did not commit. A failure that is not about reaching a group (a bug,
 * a refusal) is passed on as it is; otherwise DEADLINE_EXCEEDED when the time ran out, else
 * UNAVAILABLE, naming the groups either way.
 */
function incomplete(
  action: TenantJobsAction,
  tenant: string,
  done: readonly GroupOutcome[],
  failed: readonly { groupId: number; err: unknown }[],
  bound: CallContext,
): Error {
  const other = failed.find((f) => !isTransient(f.err));
  if (other) return other.err instanceof Error ? other.err : new Error(String(other.err));
  const ids = failed.map((f) => f.groupId).join(', ');
  const what =
    `bulk ${action} of tenant ${tenant}: group(s) ${ids} did not commit; ` +
    `${done.length} group(s) did and keep the change; retrying is safe`;
  if (Date.now() >= bound.deadlineMs) return new DeadlineError(`(${what})`);
  return new BulkIncompleteError('BULK_INCOMPLETE', what, {
    details: { groupIds: failed.map((f) => f.groupId), retryDelayMs: NO_LEADER_RETRY_MS },
  });
}

/** No leader, unreachable, leader changed, deadline: worth a retry of the whole call. */
function isTransient(err: unknown): boolean {
  if (err instanceof TickraftError)
    return [
      'RAFT_NOT_LEADER',
      'RAFT_PROPOSAL_DROPPED',
      'RAFT_PROPOSAL_UNKNOWN',
      'RAFT_READ_FAILED',
      'GROUP_NO_LEADER',
      'ROUTE_STALE',
      'DEADLINE_EXCEEDED',
    ].includes(err.code);
  return (
    isServiceError(err) &&
    (err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.DEADLINE_EXCEEDED)
  );
}

/** The DEAD-run filter of a GroupTenantJobs request (purge-dead). */
export function deadRunFilterOf(req: Msg): DeadRunFilter {
  const jobKey = req['jobKey'];
  const before = req['diedBeforeMs'];
  return {
    jobId: typeof jobKey === 'string' && jobKey !== '' ? jobKey : undefined,
    diedBeforeMs: typeof before === 'number' ? before : undefined,
  };
}

/** The action of a GroupTenantJobs request, checked. */
export function tenantJobsActionOf(req: Msg): TenantJobsAction {
  const action = req['action'];
  const found = TENANT_JOBS_ACTIONS.find((a) => a === action);
  if (found === undefined)
    throw new ValidationError('REQUEST_INVALID', [
      { field: 'action', reason: `must be one of ${TENANT_JOBS_ACTIONS.join(', ')}` },
    ]);
  return found;
}
