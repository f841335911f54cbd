/**
 * JobService (proto/tickraft.proto): validation on the node that received the call (so bad input
 * is refused without a hop), then routing to the leader of the job's group, which validates again
 * and proposes. ListJobs fans out to every group's leader and merges their pages.
 *
 * Job ids are unique per tenant: every call decides its tenant with resolveTenant
 * (tenant-scope.ts) and names the job by its key (src/scheduler/job-key.ts) from then on. A call
 * forwarded to the group's leader carries the tenant so decided, written into the request.
 */
import type * as grpc from '@grpc/grpc-js';
import { TickraftError, ValidationError, type FieldViolation } from '../base/errors.js';
import { NotLeaderError } from '../raft/errors.js';
import { formatInstant } from '../schedule/civil.js';
import { nextFires } from '../schedule/next-fire.js';
import { tryParseSchedule } from '../schedule/parse.js';
import type { Job } from '../scheduler/model.js';
import type { ApiContext } from './api-context.js';
import { jobOut, jobSpecIn, runOut, type Msg } from './convert.js';
import { TENANT_ID_PATTERN, type JobSpecCompiler } from './job-spec.js';
import { resolveJobKey, resolveTenant, scopeTenant, TENANT_ID_REASON } from './tenant-scope.js';
import {
  byId,
  decodePageToken,
  encodePageToken,
  mergePages,
  pageAfter,
  pageSizeOf,
  type GroupPage,
} from './pagination.js';
import {
  checkDeadline,
  codeOf,
  retryable,
  RouteStaleError,
  withDeadline,
  type CallContext,
} from './router.js';
import { answerForChildren, listAcrossGroups } from './lists-across-splits.js';
import {
  CREATE_BATCH_MAX,
  type CreateJobCommand,
  type CreateJobRequest,
} from './scheduler-admin.js';
import { hashShardKey } from '../placement/hash.js';
import { encodeSchedulerCommand, packCreates } from '../scheduler/commands.js';
import { decodePackedCreates, tenantsOf } from './packed-creates.js';
import { lookupRange } from '../placement/ring.js';
import { num, optNum, str, unary, Violations, type Handler } from './service-kit.js';
import { checkDependencies } from './dependency-graph.js';
import { jobIdOfKey } from '../scheduler/job-key.js';

export const PREVIEW_COUNT_MAX = 1000;

export function requireTenantId(tenant: string, field = 'tenant'): void {
  if (!TENANT_ID_PATTERN.test(tenant))
    throw new ValidationError('REQUEST_INVALID', [{ field, reason: TENANT_ID_REASON }]);
}

/**
 * A create request (CreateJob, or `jobs[i]` of CreateJobs under `prefix`) with its tenant decided
 * by resolveTenant from `spec.tenant` and written into its spec: the input createCommand checks,
 * the message to forward, and the tenant (undefined, with its violation, when it is refused).
 */
interface ScopedCreate {
  readonly input: CreateJobRequest;
  readonly message: Msg;
  readonly tenant: string | undefined;
  readonly violations: readonly FieldViolation[];
}

function scopeCreate(ctx: CallContext, m: Msg, prefix: string): ScopedCreate {
  const specMsg = (m['spec'] as Msg | null | undefined) ?? null;
  const spec = jobSpecIn(specMsg);
  const requested = typeof spec.tenant === 'string' ? spec.tenant : '';
  let tenant: string | undefined;
  const violations: FieldViolation[] = [];
  try {
    tenant = resolveTenant(ctx, requested, `${prefix}spec.tenant`);
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    violations.push(...err.violations);
  }
  const t = tenant ?? requested;
  return {
    input: { jobId: m['jobId'], requestId: m['requestId'], spec: { ...spec, tenant: t } },
    message: { ...m, spec: { ...(specMsg ?? {}), tenant: t } },
    tenant,
    violations,
  };
}

/**
 * createCommand on a scoped create: every violation of the request at once, the tenant's own
 * (from resolveTenant) in place of what the spec's check says about `spec.tenant`.
 */
function createCommandOf(
  api: ApiContext,
  scoped: ScopedCreate,
  nowMs: number,
  prefix: string,
  compiler?: JobSpecCompiler,
): CreateJobCommand {
  try {
    const command = api.admin.createCommand(scoped.input, nowMs, prefix, compiler);
    if (scoped.violations.length === 0) return command;
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    if (scoped.violations.length === 0) throw err;
    const tenantField = `${prefix}spec.tenant`;
    throw new ValidationError(err.code, [
      ...scoped.violations,
      ...err.violations.filter((v) => v.field !== tenantField),
    ]);
  }
  throw new ValidationError('JOB_SPEC_INVALID', scoped.violations);
}

export function jobServiceHandlers(api: ApiContext): grpc.UntypedServiceImplementation {
  const { admin } = api;
  const out = (job: Job): Msg => jobOut(job, admin.groupOf(job.id));
  /**
   * A call naming one job by `tenant` and `job_id`: `local` gets the job's key. A write costs
   * the tenant one token of its API write rate.
   */
  const onJob = <T>(
    ctx: CallContext,
    name: string,
    req: Msg,
    local: (key: string) => Promise<T>,
    write = true,
  ): Promise<T> => {
    const { tenant, key } = resolveJobKey(ctx, str(req, 'tenant'), str(req, 'jobId'));
    if (write) api.quota.admitWrite(ctx, [tenant]);
    return api.onGroup(
      ctx,
      () => admin.groupOf(key),
      'JobService',
      name,
      { ...req, tenant },
      () => local(key),
    );
  };

  const handlers: Record<string, Handler> = {
    CreateJob: (req, ctx) => createJob(api, req, ctx),

    CreateJobs: (req, ctx) => createJobs(api, req, ctx),

    GetJob: (req, ctx) =>
      onJob(
        ctx,
        'GetJob',
        req,
        async (key) => forReader(ctx, out((await admin.getJob(key)).job)),
        false,
      ),

    UpdateJob: (req, ctx) => updateJob(api, req, ctx),

    DeleteJob: (req, ctx) =>
      onJob(ctx, 'DeleteJob', req, async (key) => {
        await admin.jobCommand('delete-job', key);
        return {};
      }),

    PauseJob: (req, ctx) =>
      onJob(ctx, 'PauseJob', req, async (key) => {
        await admin.jobCommand('pause-job', key);
        return out(admin.jobNow(key));
      }),

    ResumeJob: (req, ctx) =>
      onJob(ctx, 'ResumeJob', req, async (key) => {
        await admin.jobCommand('resume-job', key);
        return out(admin.jobNow(key));
      }),

    TriggerJob: (req, ctx) =>
      onJob(ctx, 'TriggerJob', req, async (key) => ({
        run: runOut(await admin.triggerJob(key, req)),
      })),

    BackfillJob: (req, ctx) =>
      onJob(ctx, 'BackfillJob', req, async (key) => ({
        slotsMs: await admin.backfillJob(key, num(req, 'fromMs'), num(req, 'toMs'), req),
      })),

    PreviewSchedule: (req) => Promise.resolve(previewSchedule(req, Date.now())),

    ListJobs: async (req, ctx) => {
      const tenant = resolveTenant(ctx, str(req, 'tenant'), 'tenant');
      const pageSize = pageSizeOf(num(req, 'pageSize'));
      const after = decodePageToken('jobs', tenant, str(req, 'pageToken'));
      if (after !== undefined && typeof after !== 'string')
        throw new ValidationError('REQUEST_INVALID', [
          { field: 'pageToken', reason: 'is not a page token of ListJobs' },
        ]);
      const merged = await listAcrossGroups(api, (ranges) =>
        Promise.all(
          ranges.map(({ groupId }) =>
            groupListJobs(api, ctx, groupId, tenant, after ?? '', pageSize),
          ),
        ).then((pages) => mergePages(pages, pageSize, byId)),
      );
      const last = merged.items[merged.items.length - 1];
      return {
        jobs: merged.items.map((j) => forReader(ctx, j)),
        nextPageToken: merged.more && last ? encodePageToken('jobs', tenant, last.id) : '',
      };
    },
  };
  return Object.fromEntries(
    Object.entries(handlers).map(([name, fn]) => [name, unary(`JobService.${name}`, fn, api.log)]),
  );
}

/** What a reader token is shown of a target header's value (it may be a credential). */
export const HIDDEN_HEADER_VALUE = '(hidden from readers)';

/**
 * A job as the caller may see it: a tenant's reader gets the names of the target's headers but
 * not their values, which may carry the credentials the webhook presents to its receiver.
 */
function forReader(ctx: CallContext, job: Msg): Msg {
  const p = ctx.principal;
  if (p?.kind !== 'tenant' || p.role !== 'reader') return job;
  const spec = job['spec'] as Msg | undefined;
  const target = spec?.['target'] as Msg | undefined;
  const headers = target?.['headers'] as Record<string, string> | undefined;
  if (!spec || !target || !headers || Object.keys(headers).length === 0) return job;
  const hidden = Object.fromEntries(Object.keys(headers).map((k) => [k, HIDDEN_HEADER_VALUE]));
  return { ...job, spec: { ...spec, target: { ...target, headers: hidden } } };
}

/** CreateJob: checked here (input, write rate, max jobs), then proposed on the group's leader. */
async function createJob(api: ApiContext, req: Msg, ctx: CallContext): Promise<Msg> {
  const { admin } = api;
  const scoped = scopeCreate(ctx, req, '');
  if (scoped.tenant !== undefined) {
    api.quota.admitWrite(ctx, [scoped.tenant]);
    await api.freshTenant(scoped.tenant);
  }
  // Refused here, before any hop, when invalid; the leader checks again before proposing.
  const { jobId: key, spec } = createCommandOf(api, scoped, Date.now(), '');
  const tenant = scoped.tenant ?? '';
  if (spec.dependsOn !== undefined && !ctx.forwarded)
    await checkDependencies(
      api,
      ctx,
      tenant,
      jobIdOfKey(key),
      spec.dependsOn.jobs.map(jobIdOfKey),
      'spec.',
    );
  const adding = api.holdsJob(key) ? 0 : 1;
  await api.quota.checkJobs(ctx, tenant, adding);
  const res = await api.onGroup(
    ctx,
    () => admin.groupOf(key),
    'JobService',
    'CreateJob',
    scoped.message,
    async () => {
      const r = await admin.createJobDetailed(scoped.input);
      return { job: jobOut(r.job, admin.groupOf(r.job.id)), duplicate: r.duplicate };
    },
  );
  if (res.duplicate !== true) api.quota.created(tenant, 1);
  return res;
}

/**
 * UpdateJob: the job is named by `tenant` and `job_id`; its new definition may leave
 * `spec.tenant` empty (it is the job's tenant then), and any other tenant is refused there
 * (SchedulerAdmin.updateJob): a job belongs to its tenant for life.
 */
async function updateJob(api: ApiContext, req: Msg, ctx: CallContext): Promise<Msg> {
  const { admin } = api;
  const { tenant, key } = resolveJobKey(ctx, str(req, 'tenant'), str(req, 'jobId'));
  api.quota.admitWrite(ctx, [tenant]);
  const specMsg = (req['spec'] as Msg | null | undefined) ?? null;
  const given = jobSpecIn(specMsg);
  // A tenant token naming another tenant here is refused as anywhere else, before anything is
  // looked up: whether that tenant exists must not show through.
  const specTenant =
    typeof given.tenant === 'string' && given.tenant !== ''
      ? scopeTenant(ctx, given.tenant, 'spec.tenant')
      : tenant;
  const spec = { ...given, tenant: specTenant };
  await api.freshTenant(specTenant);
  if (!ctx.forwarded && Array.isArray(given.dependsOn) && given.dependsOn.length > 0)
    await checkDependencies(
      api,
      ctx,
      specTenant,
      jobIdOfKey(key),
      given.dependsOn.filter((id): id is string => typeof id === 'string'),
      'spec.',
    );
  const message = { ...req, tenant, spec: { ...(specMsg ?? {}), tenant: specTenant } };
  return api.onGroup(
    ctx,
    () => admin.groupOf(key),
    'JobService',
    'UpdateJob',
    message,
    async () => {
      const job = await admin.updateJob(key, spec, optNum(req, 'expectedVersion'));
      return jobOut(job, admin.groupOf(job.id));
    },
  );
}

/**
 * CreateJobs: every job is checked before any is proposed (one bad job writes nothing), then each
 * group's part runs on its leader. The commands checked here are the ones proposed when this node
 * leads the group; a part for another leader goes there as the create-jobs entries it will
 * propose (NodeService.GroupCreateJobs), which that leader checks again (it trusts no caller)
 * from their packed form, without a second protobuf form and full check of every job.
 */
async function createJobs(
  api: ApiContext,
  req: Msg,
  ctx: CallContext,
): Promise<{ created: number; duplicates: number }> {
  const { admin } = api;
  const jobs = Array.isArray(req['jobs']) ? (req['jobs'] as Msg[]) : [];
  if (jobs.length === 0 || jobs.length > CREATE_BATCH_MAX)
    throw new ValidationError('REQUEST_INVALID', [
      { field: 'jobs', reason: `must hold 1 to ${CREATE_BATCH_MAX} jobs` },
    ]);
  const scoped = jobs.map((m, i) => scopeCreate(ctx, m, `jobs[${i}].`));
  const withDeps = scoped.flatMap((s, i) =>
    hasDependencies(s.input.spec)
      ? [
          {
            field: `jobs[${i}].spec.dependsOn`,
            reason: 'CreateJobs takes no jobs with dependencies: create those with CreateJob',
          },
        ]
      : [],
  );
  if (withDeps.length > 0) throw new ValidationError('JOB_SPEC_INVALID', withDeps);
  api.quota.admitWrite(
    ctx,
    scoped.flatMap((s) => (s.tenant === undefined ? [] : [s.tenant])),
  );
  for (const t of new Set(scoped.map((s) => s.tenant)))
    if (t !== undefined) await api.freshTenant(t);
  const v = new Violations();
  const nowMs = Date.now();
  const compiler = admin.compiler(nowMs);
  const ranges = admin.ranges();
  const byGroup = new Map<number, CreateJobCommand[]>();
  const firstOf = new Map<string, number>();
  scoped.forEach((input, i) => {
    let command: CreateJobCommand;
    try {
      command = createCommandOf(api, input, nowMs, `jobs[${i}].`, compiler);
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      v.list.push(...err.violations);
      return;
    }
    const first = firstOf.get(command.jobId);
    if (first !== undefined) {
      v.add(
        `jobs[${i}].jobId`,
        `is the id of jobs[${first}] of the same tenant too (ids must differ in a batch)`,
      );
      return;
    }
    firstOf.set(command.jobId, i);
    const g = lookupRange(ranges, hashShardKey(command.jobId)).groupId;
    let part = byGroup.get(g);
    if (!part) byGroup.set(g, (part = []));
    part.push(command);
  });
  v.throwIfAny('JOB_SPEC_INVALID');
  // Every tenant's limit is checked before any part is proposed: a batch is whole or nothing.
  const adding = new Map<string, number>();
  for (const [key, i] of firstOf) {
    const tenant = scoped[i]?.tenant;
    if (tenant !== undefined && !api.holdsJob(key))
      adding.set(tenant, (adding.get(tenant) ?? 0) + 1);
  }
  for (const [tenant, n] of adding) await api.quota.checkJobs(ctx, tenant, n);
  // Parts for groups another node leads go there together, one call per node (NodeCreateJobs):
  // a call costs far more than the few dozen jobs of one group's part.
  const single: Promise<CreateCounts>[] = [];
  const byLeader = new Map<string, [number, CreateJobCommand[]][]>();
  for (const [groupId, part] of byGroup) {
    const address = ctx.forwarded ? '' : remoteLeaderAddress(api, groupId);
    let parts = byLeader.get(address);
    if (address !== '' && !parts) byLeader.set(address, (parts = []));
    if (parts) parts.push([groupId, part]);
    else single.push(createPart(api, ctx, groupId, part, true));
  }
  for (const [address, parts] of byLeader) {
    if (parts.length === 1) single.push(createPart(api, ctx, parts[0]![0], parts[0]![1], true));
    else single.push(createPartsAt(api, ctx, address, parts));
  }
  const counts = sumCounts(await Promise.all(single));
  // Counted until the next fresh count: the new ones (duplicates found by another node's
  // replica included, which only makes the next check stricter until then).
  for (const [tenant, n] of adding)
    api.quota.created(tenant, adding.size === 1 ? counts.created : n);
  return counts;
}

interface CreateCounts {
  readonly created: number;
  readonly duplicates: number;
}

function sumCounts(results: readonly CreateCounts[]): CreateCounts {
  return {
    created: results.reduce((n, r) => n + r.created, 0),
    duplicates: results.reduce((n, r) => n + r.duplicates, 0),
  };
}

/** A part another node refused for a reason that routing again would not change. */
export class RemotePartError extends TickraftError {
  override readonly name = 'RemotePartError';
}

/** The API address of the group's leader when another node leads it; '' otherwise. */
function remoteLeaderAddress(api: ApiContext, groupId: number): string {
  const g = api.node.host.groups.get(groupId);
  if (!g || g.isLeader || g.leaderId === '') return '';
  return api.node.meta.members.get(g.leaderId)?.apiAddress ?? '';
}

/**
 * Several groups' parts on the node at `address`, which leads them all as far as this node
 * knows, in one NodeCreateJobs call. A part it could not run there (a leader changed, a route
 * went stale), or the whole call when it never got there, goes its own way (createPart); a
 * part that failed otherwise fails the call with that part's error.
 */
async function createPartsAt(
  api: ApiContext,
  ctx: CallContext,
  address: string,
  parts: readonly (readonly [number, CreateJobCommand[]])[],
): Promise<CreateCounts> {
  checkDeadline(ctx, 'before routing');
  const request = {
    parts: parts.map(([groupId, commands]) => ({
      groupId,
      epoch: api.router.epochOf(groupId),
      entries: packCreates(commands).map(encodeSchedulerCommand),
    })),
  };
  let outcomes: readonly Msg[];
  try {
    const res = await api.router.forward<Msg>(
      address,
      api.method('NodeService', 'NodeCreateJobs'),
      request,
      ctx,
      undefined,
    );
    outcomes = Array.isArray(res['parts']) ? (res['parts'] as Msg[]) : [];
  } catch (err) {
    if (!retryable(err)) throw err;
    outcomes = [];
  }
  return sumCounts(
    await Promise.all(
      parts.map(async ([groupId, commands], i) => {
        const o = outcomes[i];
        const code = o === undefined ? 'RAFT_NOT_LEADER' : str(o, 'errorCode');
        if (code === '') return { created: num(o!, 'created'), duplicates: num(o!, 'duplicates') };
        if (o === undefined || retryable(new TickraftError(code, '')))
          return createPart(api, ctx, groupId, commands, true);
        throw new RemotePartError(code, `group ${groupId}: ${str(o, 'errorMessage')}`);
      }),
    ),
  );
}

/** Most parts NodeCreateJobs takes in one call: one per data group is far below it. */
export const NODE_CREATE_PARTS_MAX = 4096;

/**
 * NodeService.NodeCreateJobs on the node the sender takes for the leader of every part's group:
 * each part runs here as GroupCreateJobs would, or fails on its own (never forwarded further).
 */
export async function nodeCreateJobsLocal(
  api: ApiContext,
  req: Msg,
  ctx: CallContext,
): Promise<{ parts: Msg[] }> {
  const parts = Array.isArray(req['parts']) ? (req['parts'] as Msg[]) : [];
  if (parts.length === 0 || parts.length > NODE_CREATE_PARTS_MAX)
    throw new ValidationError('REQUEST_INVALID', [
      { field: 'parts', reason: `must hold 1 to ${NODE_CREATE_PARTS_MAX} parts` },
    ]);
  const outcomes = await Promise.all(
    parts.map(async (part) => {
      try {
        const groupId = num(part, 'groupId');
        const g = api.node.host.groups.get(groupId);
        if (!g?.isLeader) throw new NotLeaderError(groupId, g?.leaderId ?? '');
        const mine = api.router.epochOf(groupId);
        if (num(part, 'epoch') !== mine)
          throw new RouteStaleError(
            'ROUTE_STALE',
            `routed by epoch ${num(part, 'epoch')} of group ${groupId}, but it is at ${mine} here`,
          );
        const r = await withDeadline(ctx, groupCreateJobsLocal(api, groupId, part));
        return { created: r.created, duplicates: r.duplicates, errorCode: '', errorMessage: '' };
      } catch (err) {
        const code = codeOf(err);
        if (code === undefined)
          api.log.error({ err: err instanceof Error ? err.stack : String(err) }, 'NodeCreateJobs');
        const message = err instanceof Error ? err.message : String(err);
        return { created: 0, duplicates: 0, errorCode: code ?? 'INTERNAL', errorMessage: message };
      }
    }),
  );
  return { parts: outcomes };
}

/**
 * One group's part of a CreateJobs call, on its leader. A part refused as ROUTE_STALE (the
 * group's range was split since this node's map was read) is placed again by the refreshed map,
 * once: its jobs may now belong to two groups.
 */
async function createPart(
  api: ApiContext,
  ctx: CallContext,
  groupId: number,
  part: readonly CreateJobCommand[],
  mayReplace: boolean,
): Promise<{ created: number; duplicates: number }> {
  // Packed only when forwarded: the getter runs when the router serializes the request.
  let entries: Uint8Array[] | undefined;
  const req = {
    groupId,
    get entries(): Uint8Array[] {
      return (entries ??= packCreates(part).map(encodeSchedulerCommand));
    },
  };
  try {
    return await api.onGroup(ctx, groupId, 'NodeService', 'GroupCreateJobs', req, () =>
      api.admin.proposeCreates(part),
    );
  } catch (err) {
    if (!mayReplace || codeOf(err) !== 'ROUTE_STALE') throw err;
    const ranges = api.admin.ranges();
    const byGroup = new Map<number, CreateJobCommand[]>();
    for (const command of part) {
      const g = lookupRange(ranges, hashShardKey(command.jobId)).groupId;
      let sub = byGroup.get(g);
      if (!sub) byGroup.set(g, (sub = []));
      sub.push(command);
    }
    const results = await Promise.all(
      [...byGroup].map(([g, sub]) => createPart(api, ctx, g, sub, false)),
    );
    return {
      created: results.reduce((n, r) => n + r.created, 0),
      duplicates: results.reduce((n, r) => n + r.duplicates, 0),
    };
  }
}

/**
 * NodeService.GroupCreateJobs on the group's leader: the part of a CreateJobs call another node
 * checked, as the create-jobs entries it packed. Checked again here (packed-creates.ts) and
 * proposed all or nothing as far as the check goes: an entry the state machine refuses (a job
 * that exists) leaves the others of the part applied, as a local part would.
 */
export async function groupCreateJobsLocal(
  api: ApiContext,
  groupId: number,
  req: Msg,
): Promise<{ created: number; duplicates: number }> {
  const raw = Array.isArray(req['entries']) ? (req['entries'] as unknown[]) : [];
  if (raw.length === 0 || raw.length > CREATE_BATCH_MAX)
    throw new ValidationError('REQUEST_INVALID', [
      { field: 'entries', reason: `must hold 1 to ${CREATE_BATCH_MAX} entries` },
    ]);
  // Copies: the log keeps entries in memory, and a view would keep the whole message alive.
  const entries = raw.map((b, k) => {
    if (!(b instanceof Uint8Array))
      throw new ValidationError('REQUEST_INVALID', [
        { field: `entries[${k}]`, reason: 'must be bytes' },
      ]);
    return new Uint8Array(b);
  });
  const commands = entries.map((b, k) => decodePackedCreates(b, `entries[${k}]`));
  const ids = new Set<string>();
  let jobs = 0;
  for (const c of commands) {
    jobs += c.jobIds.length;
    // One entry's ids are checked by its apply; across entries only here.
    if (commands.length > 1) for (const id of c.jobIds) ids.add(id);
  }
  if (jobs > CREATE_BATCH_MAX || (commands.length > 1 && ids.size !== jobs))
    throw new ValidationError('REQUEST_INVALID', [
      { field: 'entries', reason: `must hold at most ${CREATE_BATCH_MAX} distinct jobs` },
    ]);
  for (const c of commands) for (const t of tenantsOf(c)) await api.freshTenant(t);
  return api.admin.proposePacked(groupId, commands, entries);
}

/** One group's jobs of `tenant` after `after` (by id), from that group's leader. */
async function groupListJobs(
  api: ApiContext,
  ctx: CallContext,
  groupId: number,
  tenant: string,
  after: string,
  limit: number,
): Promise<GroupPage<Msg & { id: string }>> {
  const req = { groupId, tenant, afterJson: JSON.stringify(after), limit };
  const res = await api.onGroup(ctx, groupId, 'NodeService', 'GroupListJobs', req, () =>
    localListJobs(api, ctx, groupId, tenant, after, limit),
  );
  return { items: res.jobs, more: res.nextPageToken !== '' };
}

/**
 * One group's page of `tenant`'s jobs, on its leader. While a split of the group is in flight
 * (its split entry applied, finish-split not yet committed) the meta map does not list the
 * child, so no router asks it: the parent answers for it, merging the child's page into its own
 * (splitChildrenOutsideMap).
 */
export async function localListJobs(
  api: ApiContext,
  ctx: CallContext,
  groupId: number,
  tenant: string,
  after: string,
  limit: number,
): Promise<{ jobs: (Msg & { id: string })[]; nextPageToken: string }> {
  const answer = await answerForChildren(
    api,
    ctx,
    groupId,
    async () => {
      const sm = await api.admin.readGroup(groupId);
      // Ids first: materializing every job of a large group for one page would be garbage. The
      // keys all start `<tenant>/`, so they sort as the job ids do, and `after` is a job id.
      const mine = sm.jobs.idsOfTenant(tenant).sort();
      const cut = tenant.length + 1;
      const page = pageAfter(mine, (key) => key.slice(cut) > after, limit);
      return {
        items: page.items.map((id) => jobOut(sm.jobs.get(id)!, groupId) as Msg & { id: string }),
        more: page.more,
      };
    },
    (childCtx, child) => groupListJobs(api, childCtx, child, tenant, after, limit),
  );
  const merged =
    answer.children.length === 0
      ? answer.own
      : mergePages([answer.own, ...answer.children], limit, byId);
  return { jobs: [...merged.items], nextPageToken: merged.more ? 'more' : '' };
}

export function previewSchedule(req: Msg, nowMs: number): Msg {
  const v = new Violations();
  const schedule = str(req, 'schedule');
  const timezone = str(req, 'timezone') || 'UTC';
  const count = num(req, 'count') || 5;
  if (!Number.isSafeInteger(count) || count < 1 || count > PREVIEW_COUNT_MAX)
    v.add('count', `must be from 1 to ${PREVIEW_COUNT_MAX}`);
  const fromMs = optNum(req, 'fromMs') ?? nowMs;
  if (schedule.trim() === '') v.add('schedule', 'is required');
  v.throwIfAny();
  const parsed = tryParseSchedule(schedule, {
    timezone,
    anchorMs: optNum(req, 'anchorMs') ?? fromMs,
  });
  if (!parsed.ok) throw new ValidationError('REQUEST_INVALID', parsed.violations);
  const times = nextFires(parsed.schedule, fromMs - 1, count);
  return {
    fireTimesMs: times,
    fireTimes: times.map((ms) => formatInstant(ms)),
  };
}

/** Whether a create's spec lists upstream jobs. */
function hasDependencies(spec: unknown): boolean {
  const deps = (spec as { dependsOn?: unknown } | null)?.dependsOn;
  return Array.isArray(deps) && deps.length > 0;
}
