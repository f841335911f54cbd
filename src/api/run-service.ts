/**
 * RunService: a job's runs newest first, one run with its attempts, the tenant's DLQ across
 * every group (merged like ListJobs), and replaying a DEAD run.
 */
import type * as grpc from '@grpc/grpc-js';
import { ValidationError } from '../base/errors.js';
import { RUN_STATUSES, type Run, type RunStatus } from '../scheduler/model.js';
import type { ApiContext } from './api-context.js';
import { runOut, runStatusIn, type Msg } from './convert.js';
import { requireJobId, requireTenantId } from './job-service.js';
import {
  compareDead,
  decodePageToken,
  encodePageToken,
  isDeadKey,
  mergePages,
  pageAfter,
  pageSizeOf,
  type DeadKey,
  type GroupPage,
} from './pagination.js';
import type { CallContext } from './router.js';
import { jobIdOfFireId, SchedulerAdminError } from './scheduler-admin.js';
import { num, str, unary, type Handler } from './service-kit.js';

type DeadItem = { readonly key: DeadKey; readonly run: Msg };

export function runServiceHandlers(api: ApiContext): grpc.UntypedServiceImplementation {
  const { admin } = api;
  const onFire = <T>(ctx: CallContext, name: string, req: Msg, local: () => Promise<T>) => {
    const jobId = jobIdOfFireId(str(req, 'fireId'));
    return api.onGroup(ctx, () => admin.groupOf(jobId), 'RunService', name, req, local);
  };

  const handlers: Record<string, Handler> = {
    ListRuns: (req, ctx) => {
      const jobId = str(req, 'jobId');
      requireJobId(jobId);
      const status = runStatusIn(req['status']);
      if (req['status'] !== 'RUN_STATUS_UNSPECIFIED' && !RUN_STATUSES.includes(status as RunStatus))
        throw new ValidationError('REQUEST_INVALID', [
          {
            field: 'status',
            reason: `${JSON.stringify(req['status'])} is not one of ${RUN_STATUSES.map((s) => `RUN_STATUS_${s}`).join(', ')} (or RUN_STATUS_UNSPECIFIED for every status)`,
          },
        ]);
      const pageSize = pageSizeOf(num(req, 'pageSize'));
      const scope = `${jobId}/${status ?? ''}`;
      const after = decodePageToken('runs', scope, str(req, 'pageToken'));
      if (after !== undefined && typeof after !== 'number')
        throw new ValidationError('REQUEST_INVALID', [
          { field: 'pageToken', reason: 'is not a page token of ListRuns' },
        ]);
      const groupOf = (): number => admin.groupOf(jobId);
      return api.onGroup(ctx, groupOf, 'RunService', 'ListRuns', req, async () => {
        const sm = await admin.readJobGroup(jobId);
        const job = sm.jobs.get(jobId);
        const runs = sm.runsOf(jobId);
        if (!job && runs.length === 0)
          throw new SchedulerAdminError('JOB_NOT_FOUND', `job ${jobId} does not exist`);
        const sorted = runs
          .filter((r) => status === undefined || r.status === status)
          .sort((a, b) => b.slotMs - a.slotMs);
        const page = pageAfter(sorted, (r) => after === undefined || r.slotMs < after, pageSize);
        const last = page.items[page.items.length - 1];
        return {
          runs: page.items.map((r) => runOut(r, job?.tenant ?? '')),
          nextPageToken: page.more && last ? encodePageToken('runs', scope, last.slotMs) : '',
        };
      });
    },

    GetRun: (req, ctx) =>
      onFire(ctx, 'GetRun', req, async () => {
        const { run, tenant } = await admin.getRun(str(req, 'fireId'));
        return runOut(run, tenant);
      }),

    ReplayRun: (req, ctx) =>
      onFire(ctx, 'ReplayRun', req, async () => {
        const run = await admin.replayRun(str(req, 'fireId'));
        return runOut(run, admin.jobNow(run.jobId).tenant);
      }),

    ListDeadRuns: async (req, ctx) => {
      const tenant = str(req, 'tenant');
      requireTenantId(tenant);
      const pageSize = pageSizeOf(num(req, 'pageSize'));
      const after = decodePageToken('dead', tenant, str(req, 'pageToken'));
      if (after !== undefined && !isDeadKey(after))
        throw new ValidationError('REQUEST_INVALID', [
          { field: 'pageToken', reason: 'is not a page token of ListDeadRuns' },
        ]);
      const pages = await Promise.all(
        admin
          .ranges()
          .map(({ groupId }) => groupListDead(api, ctx, groupId, tenant, after, pageSize)),
      );
      const merged = mergePages(pages, pageSize, (a, b) => compareDead(a.key, b.key));
      const last = merged.items[merged.items.length - 1];
      return {
        runs: merged.items.map((i) => i.run),
        nextPageToken: merged.more && last ? encodePageToken('dead', tenant, last.key) : '',
      };
    },
  };
  return Object.fromEntries(
    Object.entries(handlers).map(([name, fn]) => [name, unary(`RunService.${name}`, fn, api.log)]),
  );
}

function deadKeyOf(r: Run): DeadKey {
  return [r.finishedAtMs ?? 0, r.fireId];
}

async function groupListDead(
  api: ApiContext,
  ctx: CallContext,
  groupId: number,
  tenant: string,
  after: DeadKey | undefined,
  limit: number,
): Promise<GroupPage<DeadItem>> {
  const req = { groupId, tenant, afterJson: JSON.stringify(after ?? null), limit };
  const res = await api.onGroup(ctx, groupId, 'NodeService', 'GroupListDeadRuns', req, () =>
    localListDead(api, groupId, tenant, after, limit),
  );
  const items = res.runs.map((run) => ({
    key: [run['finishedAtMs'] ?? 0, run['fireId']] as unknown as DeadKey,
    run,
  }));
  return { items, more: res.nextPageToken !== '' };
}

export async function localListDead(
  api: ApiContext,
  groupId: number,
  tenant: string,
  after: DeadKey | undefined,
  limit: number,
): Promise<{ runs: Msg[]; nextPageToken: string }> {
  const sm = await api.admin.readGroup(groupId);
  const dead: Run[] = [];
  for (const id of sm.dead) {
    const run = sm.runs.get(id);
    // A deleted job's dead runs have no tenant left to list them under.
    if (run && sm.jobs.get(run.jobId)?.tenant === tenant) dead.push(run);
  }
  dead.sort((a, b) => compareDead(deadKeyOf(a), deadKeyOf(b)));
  const page = pageAfter(
    dead,
    (r) => after === undefined || compareDead(deadKeyOf(r), after) > 0,
    limit,
  );
  return {
    runs: page.items.map((r) => runOut(r, tenant)),
    nextPageToken: page.more ? 'more' : '',
  };
}
