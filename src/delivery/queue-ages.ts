/**
 * When each tenant's oldest queued delivery was queued, for the metrics
 * (`tickraft_tenant_queue_oldest_seconds`). The fair queue has no clock and starts items out of
 * push order (priorities, origins, caps), so its head says nothing about age; this keeps, per
 * tenant, its queued items in push order with their times. Push order is time order, so the
 * first entry is the oldest, whichever item left. O(1) per push and per removal; the per-tenant
 * maps of tenants with nothing queued are dropped when oldest() walks them (at scrape time)
 * rather than at every removal, so that a tenant queueing one item at a time does not allocate a
 * map per item. Pure: times come in as arguments.
 */
export class QueueAges<T> {
  private readonly byTenant = new Map<string, Map<T, number>>();

  /** `item` of `tenant` was queued at `atMs` (times must not go back). */
  queued(tenant: string, item: T, atMs: number): void {
    let items = this.byTenant.get(tenant);
    if (items === undefined) {
      items = new Map();
      this.byTenant.set(tenant, items);
    }
    items.set(item, atMs);
  }

  /** `item` left the queue (started, or removed); unknown items are ignored. */
  left(tenant: string, item: T): void {
    this.byTenant.get(tenant)?.delete(item);
  }

  clear(): void {
    this.byTenant.clear();
  }

  /** Each tenant with something queued, and when its oldest queued item was queued. */
  *oldest(): IterableIterator<readonly [tenant: string, atMs: number]> {
    for (const [tenant, items] of this.byTenant) {
      let first: number | undefined;
      for (const atMs of items.values()) {
        first = atMs;
        break;
      }
      if (first === undefined) this.byTenant.delete(tenant);
      else yield [tenant, first];
    }
  }
}
