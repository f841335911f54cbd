/**
 * Everything the public handlers share on one node: the node itself, the admin objects that
 * run a call on the leader, the router that gets it there, and the loaded service definitions
 * (the router forwards by method). It is also the ClusterContext the cluster operations
 * (src/cluster) are handed: their way to a group's leader and to the other members.
 */
import { SystemClock } from '../base/clock.js';
import type { ClusterContext } from '../cluster/cluster-context.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import type { ApiNode } from './api-node.js';
import { loadApiServices, type ApiServices } from './proto.js';
import { Router, type CallContext, type MethodRef } from './router.js';
import type { Msg } from './convert.js';
import type { RunStatus } from '../scheduler/model.js';
import type { UpstreamAnswer } from '../scheduler/upstream.js';
import { SchedulerAdmin } from './scheduler-admin.js';
import type { ApiLogger } from './service-kit.js';
import { TenantAdmin } from './tenant-admin.js';
import { TenantQuota } from './tenant-quota.js';

export class ApiContext implements ClusterContext {
  readonly admin: SchedulerAdmin;
  readonly tenants: TenantAdmin;
  readonly router: Router;
  readonly services: ApiServices;
  /** Tenants' API write rate and max jobs, and their usage (tenant-quota.ts). */
  readonly quota: TenantQuota;

  constructor(
    readonly node: ApiNode,
    readonly log: ApiLogger,
    /** The bootstrap admin token nodes present to each other; undefined without authentication. */
    nodeToken: string | undefined,
  ) {
    this.admin = new SchedulerAdmin(node, SystemClock);
    this.tenants = new TenantAdmin(node, SystemClock);
    this.router = new Router(node, nodeToken);
    this.services = loadApiServices();
    this.quota = new TenantQuota(this);
  }

  method(service: keyof ApiServices, name: string): MethodRef {
    return { service: this.services[service], name };
  }

  /** Runs `local` on the leader of `groupId`, forwarding `service.name(req)` there if need be. */
  onGroup<T>(
    ctx: CallContext,
    groupId: number | (() => number),
    service: keyof ApiServices,
    name: string,
    req: unknown,
    local: () => Promise<T>,
  ): Promise<T> {
    return this.router.onGroup(ctx, groupId, local, this.method(service, name), req);
  }

  /**
   * Calls NodeService.`name` on the member whose API listens at `address`, within ctx's deadline
   * (src/cluster/member-fanout.ts asks every member with it).
   */
  callMember<T>(address: string, name: string, request: unknown, ctx: CallContext): Promise<T> {
    return this.router.forward<T>(
      address,
      this.method('NodeService', name),
      request,
      ctx,
      undefined,
    );
  }

  /**
   * What upstream job `jobKey` came to for a downstream slot, asked of its group's leader (this
   * node's own call, as the admin): the scheduler runtime's UpstreamReader.
   */
  async readUpstream(jobKey: string, slotMs: number): Promise<UpstreamAnswer> {
    const ctx: CallContext = { deadlineMs: Date.now() + 5000, forwarded: false, route: undefined };
    const res = await this.onGroup<Msg>(
      ctx,
      () => this.admin.groupOf(jobKey),
      'NodeService',
      'UpstreamRun',
      { jobKey, slotMs },
      async () => {
        const a = await this.admin.upstreamRun(jobKey, slotMs);
        return { outcome: a.outcome, fireId: a.fireId ?? '', status: a.status ?? '' };
      },
    );
    const text = (v: unknown): string => (typeof v === 'string' ? v : '');
    const said = text(res['outcome']);
    // Anything but a known answer (another release's word, say) counts as not known yet.
    const outcome: UpstreamAnswer['outcome'] = (
      ['succeeded', 'failed', 'missing'] as const
    ).includes(said as 'succeeded')
      ? (said as UpstreamAnswer['outcome'])
      : 'pending';
    const fireId = text(res['fireId']);
    const status = text(res['status']);
    return {
      outcome,
      ...(fireId !== '' && { fireId }),
      ...(status !== '' && { status: status as RunStatus }),
    };
  }

  /** Whether this node's replica of the job's group holds the job (a create would be a repeat). */
  holdsJob(key: string): boolean {
    return this.node.data.get(this.admin.groupOf(key))?.scheduler.jobs.has(key) === true;
  }

  /**
   * A tenant this replica does not know may have been created a moment ago through another
   * node: catch up with the meta group (ReadIndex) before calling it unknown. A read that fails
   * (its request lost, the meta leader changing) is tried once more; after that the caller
   * judges with what this replica has applied.
   */
  async freshTenant(tenant: unknown): Promise<void> {
    if (typeof tenant !== 'string' || this.node.meta.tenants.has(tenant)) return;
    if (!this.node.host.groups.has(META_GROUP_ID)) return;
    for (let attempt = 0; attempt < 2; attempt++) {
      const caughtUp = await this.node.host.read(META_GROUP_ID).then(
        () => true,
        () => false,
      );
      if (caughtUp || this.node.meta.tenants.has(tenant)) return;
    }
  }
}
