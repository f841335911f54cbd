/**
 * RunService: a job's runs newest first, one run with its attempts, the tenant's DLQ across
 * every group (merged like ListJobs), replaying a DEAD run, and an attempt's output
 * (run-output.ts). Every call decides its tenant with resolveTenant (tenant-scope.ts); a fire id
 * (`<tenant>/<job id>:<slot ms>`) of another tenant is a run that does not exist.
 */
import type * as grpc from '@grpc/grpc-js';
import { ValidationError, type FieldViolation } from '../base/errors.js';
import type { Run } from '../scheduler/model.js';
import { RUN_VIEW_STATUSES, viewStatus, type RunViewStatus } from '../scheduler/run-view.js';
import type { ApiContext } from './api-context.js';
import { runOut, runStatusIn, type Msg } from './convert.js';
import { JOB_ID_PATTERN } from './job-spec.js';
import { parseFireId } from '../scheduler/job-key.js';
import { resolveJobKey, resolveTenant } from './tenant-scope.js';
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
import { bulkTenantJobs } from './bulk-tenant-jobs.js';
import { watchRunsHandler } from './watch-runs.js';
import { completionHandlers, type OnFire } from './run-completion.js';
import { getRunOutputHandler } from './run-output.js';
import { jobNotFound, runNotFound } from './scheduler-admin.js';
import { num, str, unary, type Handler } from './service-kit.js';

type DeadItem = { readonly key: DeadKey; readonly run: Msg };

export const FIRE_ID_REASON = 'must be <tenant>/<job_id>:<slot ms>, as runs list it';

/**
 * The fire id a GetRun or ReplayRun names, under the tenant the call acts as: its shape and the
 * tenant checked together (INVALID_ARGUMENT naming both); a fire id of another tenant is
 * RUN_NOT_FOUND, as a missing run is.
 */
function scopedFireId(ctx: CallContext, req: Msg): { fireId: string; key: string; tenant: string } {
  const fireId = str(req, 'fireId');
  const parsed = parseFireId(fireId);
  const violations: FieldViolation[] = [];
  if (!parsed || !JOB_ID_PATTERN.test(parsed.jobId))
    violations.push({ field: 'fireId', reason: FIRE_ID_REASON });
  let tenant = '';
  try {
    tenant = resolveTenant(ctx, str(req, 'tenant'), 'tenant');
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    violations.push(...err.violations);
  }
  if (violations.length > 0 || !parsed) throw new ValidationError('REQUEST_INVALID', violations);
  if (parsed.tenant !== tenant) throw runNotFound(fireId);
  return { fireId, key: parsed.key, tenant };
}

export function runServiceHandlers(api: ApiContext): grpc.UntypedServiceImplementation {
  const { admin } = api;
  const onFire: OnFire = <T>(
    ctx: CallContext,
    name: string,
    req: Msg,
    local: (fireId: string) => Promise<T>,
    write = false,
  ): Promise<T> => {
    const { fireId, key, tenant } = scopedFireId(ctx, req);
    if (write) api.quota.admitWrite(ctx, [tenant]);
    return api.onGroup(
      ctx,
      () => admin.groupOf(key),
      'RunService',
      name,
      { ...req, tenant },
      () => local(fireId),
    );
  };

  const handlers: Record<string, Handler> = {
    ListRuns: (req, ctx) => {
      const { tenant, key } = resolveJobKey(ctx, str(req, 'tenant'), str(req, 'jobId'));
      const status = runStatusIn(req['status']);
      if (
        req['status'] !== 'RUN_STATUS_UNSPECIFIED' &&
        !RUN_VIEW_STATUSES.includes(status as RunViewStatus)
      )
        throw new ValidationError('REQUEST_INVALID', [
          {
            field: 'status',
            reason: `${JSON.stringify(req['status'])} is not one of ${RUN_VIEW_STATUSES.map((s) => `RUN_STATUS_${s}`).join(', ')} (or RUN_STATUS_UNSPECIFIED for every status)`,
          },
        ]);
      const pageSize = pageSizeOf(num(req, 'pageSize'));
      const scope = `${key}/${status ?? ''}`;
      const after = decodePageToken('runs', scope, str(req, 'pageToken'));
      if (after !== undefined && typeof after !== 'number')
        throw new ValidationError('REQUEST_INVALID', [
          { field: 'pageToken', reason: 'is not a page token of ListRuns' },
        ]);
      const groupOf = (): number => admin.groupOf(key);
      const message = { ...req, tenant };
      return api.onGroup(ctx, groupOf, 'RunService', 'ListRuns', message, async () => {
        const sm = await admin.readJobGroup(key);
        const job = sm.jobs.get(key);
        const runs = sm.runsOf(key);
        if (!job && runs.length === 0) throw jobNotFound(key);
        const shown = runs.map((r) => {
          const inFlight = admin.isInFlight(r.fireId);
          return { r, inFlight, status: viewStatus(r, inFlight) };
        });
        const sorted = shown
          .filter((s) => status === undefined || s.status === status)
          .sort((a, b) => b.r.slotMs - a.r.slotMs);
        const page = pageAfter(sorted, (s) => after === undefined || s.r.slotMs < after, pageSize);
        const last = page.items[page.items.length - 1]?.r;
        return {
          runs: page.items.map((s) => runOut(s.r, s.inFlight)),
          nextPageToken: page.more && last ? encodePageToken('runs', scope, last.slotMs) : '',
        };
      });
    },

    GetRun: (req, ctx) =>
      onFire(ctx, 'GetRun', req, async (fireId) =>
        runOut(await admin.getRun(fireId), admin.isInFlight(fireId)),
      ),

    ReplayRun: (req, ctx) =>
      onFire(ctx, 'ReplayRun', req, async (fireId) => runOut(await admin.replayRun(fireId)), true),

    GetRunOutput: getRunOutputHandler(api, onFire),

    PurgeDeadRuns: async (req, ctx) => {
      const jobId = str(req, 'jobId');
      const before = req['diedBeforeMs'];
      const violations: FieldViolation[] = [];
      if (typeof before === 'number' && !(Number.isSafeInteger(before) && before >= 0))
        violations.push({ field: 'diedBeforeMs', reason: 'must be ms since the epoch, ≥ 0' });
      const { tenant, key } =
        jobId === ''
          ? { tenant: resolveTenant(ctx, str(req, 'tenant'), 'tenant'), key: undefined }
          : resolveJobKey(ctx, str(req, 'tenant'), jobId);
      if (violations.length > 0) throw new ValidationError('REQUEST_INVALID', violations);
      api.quota.admitWrite(ctx, [tenant]);
      const res = await bulkTenantJobs(api, ctx, { tenant }, 'purge-dead', {
        jobId: key,
        diedBeforeMs: typeof before === 'number' ? before : undefined,
      });
      return {
        purged: res['changedTotal'],
        groups: (res['groups'] as unknown[]).length,
        elapsedMs: res['elapsedMs'],
      };
    },

    ListDeadRuns: async (req, ctx) => {
      const tenant = resolveTenant(ctx, str(req, 'tenant'), 'tenant');
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
  return {
    ...Object.fromEntries(
      Object.entries(handlers).map(([name, fn]) => [
        name,
        unary(`RunService.${name}`, fn, api.log),
      ]),
    ),
    ...Object.fromEntries(
      Object.entries(completionHandlers(onFire, () => admin)).map(([name, fn]) => [
        name,
        unary(`RunService.${name}`, fn, api.log),
      ]),
    ),
    WatchRuns: watchRunsHandler(api),
  };
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
    runs: page.items.map((r) => runOut(r)),
    nextPageToken: page.more ? 'more' : '',
  };
}
