/**
 * The tenant limits the API enforces (src/placement/tenant-limits.ts), on the node that takes
 * the call (a forwarded call was counted where it came in):
 *
 * - API writes per second: one token bucket per tenant on each node; every write RPC that names
 *   the tenant costs one token, whoever calls (a CreateJobs of any size is one write). Without a
 *   token the call is refused before anything is checked or proposed: RESOURCE_EXHAUSTED, with
 *   a RetryInfo saying when a token will be there.
 * - Max jobs: a create is refused (RESOURCE_EXHAUSTED, naming limits.max_jobs) when the
 *   tenant's jobs plus the new ones would pass the limit. The count is the sum over the data
 *   groups of the tenant's jobs in each (JobTable keeps it per tenant): from this node's own
 *   replica of a group, else from a node hosting it (NodeTenantUsage). It is reused for a
 *   second, plus what this node created meanwhile: creates racing through other nodes within
 *   that second may pass the limit by what they add.
 *
 * GetTenant's usage is gathered here too, from every node (NodeTenantUsage).
 */
import { RecentCounts } from '../base/recent-counts.js';
import { TickraftError } from '../base/errors.js';
import { TokenBuckets, type BucketLimit } from '../base/token-buckets.js';
import { askEveryMember } from '../cluster/member-fanout.js';
import { DEFAULT_TENANT_LIMITS, type TenantLimits } from '../placement/tenant-limits.js';
import type { ApiContext } from './api-context.js';
import type { Msg } from './convert.js';
import type { CallContext } from './router.js';

/** How long a tenant's job count is reused by the max-jobs check. */
export const JOB_COUNT_TTL_MS = 1_000;
/** How long GetTenant and the job count wait for the other nodes. */
const USAGE_FANOUT_MS = 2_000;

/** A tenant is over one of its limits. RESOURCE_EXHAUSTED. */
export class TenantLimitError extends TickraftError {
  override readonly name = 'TenantLimitError';
}

/** One node's answer to NodeTenantUsage. */
export interface NodeTenantUsage {
  readonly groups: readonly { groupId: number; jobs: number; leader: boolean }[];
  readonly deliveriesInflight: number;
  readonly deliveriesQueued: number;
  readonly firesLastSecond: number;
  readonly firesThrottledLastSecond: number;
  readonly writesLastSecond: number;
  readonly writesRefusedLastSecond: number;
}

interface JobCount {
  readonly jobs: number;
  readonly atMs: number;
  /** Jobs this node created since the count. */
  added: number;
}

export class TenantQuota {
  private readonly writeBuckets = new TokenBuckets();
  private readonly writes = new RecentCounts();
  private readonly refused = new RecentCounts();
  private readonly jobCounts = new Map<string, JobCount>();
  private nextPruneMs = 0;

  constructor(private readonly api: ApiContext) {}

  private limitsOf(tenant: string): TenantLimits {
    return this.api.node.meta.tenants.get(tenant)?.limits ?? DEFAULT_TENANT_LIMITS;
  }

  /**
   * Takes one write token from each tenant a write call names, or none when any lacks one.
   * @throws TenantLimitError TENANT_WRITE_RATE_EXCEEDED with details.retryDelayMs
   */
  admitWrite(ctx: CallContext, tenants: Iterable<string>): void {
    if (ctx.forwarded) return;
    const nowMs = Date.now();
    this.prune(nowMs);
    const names = [...new Set(tenants)];
    for (const tenant of names) {
      const limit = this.writeLimitOf(tenant);
      if (this.writeBuckets.available(tenant, nowMs, limit) >= 1) continue;
      this.refused.add(tenant, nowMs);
      const waitMs = Math.max(1, this.writeBuckets.take(tenant, nowMs, limit));
      throw new TenantLimitError(
        'TENANT_WRITE_RATE_EXCEEDED',
        `tenant ${tenant} is over its API write rate (limits.writes_per_second ` +
          `${limit.rate}, limits.write_burst ${limit.burst}); nothing was ` +
          `written; retry in ${waitMs} ms`,
        { details: { retryDelayMs: waitMs, limit: 'limits.writes_per_second' } },
      );
    }
    for (const tenant of names) {
      this.writeBuckets.take(tenant, nowMs, this.writeLimitOf(tenant));
      this.writes.add(tenant, nowMs);
    }
  }

  private writeLimitOf(tenant: string): BucketLimit {
    const l = this.limitsOf(tenant);
    return { rate: l.writesPerSecond, burst: l.writeBurst };
  }

  /**
   * Refuses a create of `adding` jobs that would take the tenant past its max jobs.
   * @throws TenantLimitError TENANT_MAX_JOBS_EXCEEDED
   */
  async checkJobs(ctx: CallContext, tenant: string, adding: number): Promise<void> {
    if (ctx.forwarded || adding === 0) return;
    const max = this.limitsOf(tenant).maxJobs;
    const nowMs = Date.now();
    let count = this.jobCounts.get(tenant);
    if (count === undefined || nowMs - count.atMs >= JOB_COUNT_TTL_MS) {
      count = { jobs: await this.countJobs(ctx, tenant), atMs: nowMs, added: 0 };
      this.jobCounts.set(tenant, count);
    }
    const has = count.jobs + count.added;
    if (has + adding > max)
      throw new TenantLimitError(
        'TENANT_MAX_JOBS_EXCEEDED',
        `tenant ${tenant} has ${has} job${has === 1 ? '' : 's'} and may have ${max} ` +
          `(limits.max_jobs): ` +
          `${adding} more would pass it; delete jobs or raise the limit`,
        { details: { limit: 'limits.max_jobs' } },
      );
  }

  /** Jobs this node created for the tenant, counted until the next fresh count. */
  created(tenant: string, n: number): void {
    const count = this.jobCounts.get(tenant);
    if (count !== undefined) count.added += n;
  }

  /** This node's part of the tenant's usage (NodeTenantUsage). */
  localUsage(tenant: string): NodeTenantUsage {
    const node = this.api.node;
    const groups: { groupId: number; jobs: number; leader: boolean }[] = [];
    for (const [groupId, view] of node.data)
      groups.push({
        groupId,
        jobs: view.scheduler.jobs.countOfTenant(tenant),
        leader: node.host.groups.get(groupId)?.isLeader === true,
      });
    const d = node.tenantDeliveries(tenant);
    const nowMs = Date.now();
    return {
      groups,
      deliveriesInflight: d.inflight,
      deliveriesQueued: d.queued,
      firesLastSecond: d.fired,
      firesThrottledLastSecond: d.throttled,
      writesLastSecond: this.writes.lastSecond(tenant, nowMs),
      writesRefusedLastSecond: this.refused.lastSecond(tenant, nowMs),
    };
  }

  /** The tenant's usage over the whole cluster, for GetTenant. */
  async usage(ctx: CallContext, tenant: string): Promise<Msg> {
    const answers = await this.askEveryNode(ctx, tenant);
    const jobs = jobsByGroup(answers);
    const groupsTotal = this.api.node.meta.groups.size;
    const sum = (f: (u: NodeTenantUsage) => number): number =>
      answers.reduce((n, u) => n + f(u), 0);
    return {
      jobs: [...jobs.values()].reduce((n, j) => n + j, 0),
      groupsCounted: jobs.size,
      groupsTotal,
      deliveriesInflight: sum((u) => u.deliveriesInflight),
      deliveriesQueued: sum((u) => u.deliveriesQueued),
      firesLastSecond: sum((u) => u.firesLastSecond),
      firesThrottledLastSecond: sum((u) => u.firesThrottledLastSecond),
      writesLastSecond: sum((u) => u.writesLastSecond),
      writesRefusedLastSecond: sum((u) => u.writesRefusedLastSecond),
      nodesAnswered: answers.length,
      nodesTotal: this.api.node.meta.members.size,
    };
  }

  /**
   * The tenant's jobs across the data groups: this node's replicas' counts, and for the groups
   * it does not host, other nodes' (asked only then).
   */
  private async countJobs(ctx: CallContext, tenant: string): Promise<number> {
    const mine = this.localUsage(tenant);
    const counted = new Map(mine.groups.map((g) => [g.groupId, g.jobs]));
    const missing = [...this.api.node.meta.groups.keys()].some((id) => !counted.has(id));
    if (!missing) return [...counted.values()].reduce((n, j) => n + j, 0);
    const all = jobsByGroup(await this.askEveryNode(ctx, tenant, mine));
    return [...all.values()].reduce((n, j) => n + j, 0);
  }

  /** NodeTenantUsage of every member (this node's own without a call); silent ones left out. */
  private async askEveryNode(
    ctx: CallContext,
    tenant: string,
    mine: NodeTenantUsage = this.localUsage(tenant),
  ): Promise<NodeTenantUsage[]> {
    const answers = await askEveryMember<NodeTenantUsage>(
      this.api,
      ctx,
      'NodeTenantUsage',
      { tenant },
      USAGE_FANOUT_MS,
      () => mine,
    );
    // Other nodes' answers came over gRPC (64-bit counts may be strings); this one is exact.
    return answers.map((u) => (u === mine ? u : normalUsage(u)));
  }

  private prune(nowMs: number): void {
    if (nowMs < this.nextPruneMs) return;
    this.nextPruneMs = nowMs + 1_000;
    this.writeBuckets.prune(nowMs, (t) => this.writeLimitOf(t));
    for (const [tenant, c] of this.jobCounts)
      if (nowMs - c.atMs >= JOB_COUNT_TTL_MS) this.jobCounts.delete(tenant);
  }
}

/** Each group's count: its leader's where one answered, else the highest a replica gave. */
function jobsByGroup(answers: readonly NodeTenantUsage[]): Map<number, number> {
  const best = new Map<number, { jobs: number; leader: boolean }>();
  for (const a of answers)
    for (const g of a.groups) {
      const seen = best.get(g.groupId);
      if (seen === undefined || (g.leader && !seen.leader) || (!seen.leader && g.jobs > seen.jobs))
        best.set(g.groupId, { jobs: g.jobs, leader: g.leader });
    }
  return new Map([...best].map(([id, g]) => [id, g.jobs]));
}

/** A NodeTenantUsage as it came over gRPC: 64-bit counts may arrive as strings. */
function normalUsage(u: NodeTenantUsage): NodeTenantUsage {
  const n = (v: unknown): number => (typeof v === 'number' ? v : Number(v ?? 0));
  const groups: readonly NodeTenantUsage['groups'][number][] = Array.isArray(u.groups)
    ? u.groups
    : [];
  return {
    groups: groups.map((g) => ({
      groupId: n(g.groupId),
      jobs: n(g.jobs),
      leader: g.leader === true,
    })),
    deliveriesInflight: n(u.deliveriesInflight),
    deliveriesQueued: n(u.deliveriesQueued),
    firesLastSecond: n(u.firesLastSecond),
    firesThrottledLastSecond: n(u.firesThrottledLastSecond),
    writesLastSecond: n(u.writesLastSecond),
    writesRefusedLastSecond: n(u.writesRefusedLastSecond),
  };
}
