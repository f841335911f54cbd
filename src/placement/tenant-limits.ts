/**
 * What one tenant may use of the cluster, stored with it in the meta group and enforced on every
 * node: how many jobs it registers, how fast it writes through the API, how fast its runs fire.
 * (Its deliveries in flight are TenantRecord.inflightMax.) The defaults are generous: a tenant
 * meets them only by doing far more than a quick start or a benchmark does.
 */
export interface TenantLimits {
  /** Jobs the tenant may have registered across the cluster. */
  readonly maxJobs: number;
  /** API writes per second (a CreateJobs of any size is one), per node taking the calls. */
  readonly writesPerSecond: number;
  /** Writes allowed at once after a quiet spell (the token bucket's size). */
  readonly writeBurst: number;
  /**
   * Attempts handed to delivery per second across the cluster; over it, runs wait their turn
   * (delayed, never dropped). Each node takes its share by the groups it leads.
   */
  readonly firesPerSecond: number;
}

export const DEFAULT_TENANT_LIMITS: TenantLimits = Object.freeze({
  maxJobs: 10_000_000,
  writesPerSecond: 1000,
  writeBurst: 2000,
  firesPerSecond: 50_000,
});

export const TENANT_LIMIT_BOUNDS: Readonly<Record<keyof TenantLimits, readonly [number, number]>> =
  Object.freeze({
    maxJobs: [1, 100_000_000],
    writesPerSecond: [1, 1_000_000],
    writeBurst: [1, 10_000_000],
    firesPerSecond: [1, 10_000_000],
  });

/**
 * A node's part of a cluster-wide per-tenant limit (deliveries in flight, fires per second): a
 * tenant's jobs spread over the data groups by hash, so a node that leads `ledHere` of
 * `groupsTotal` data groups hands out about that share of the tenant's fires. Rounded up, and
 * never below 1, so that a small limit still lets every leader fire; the cluster as a whole may
 * then run a little over a limit smaller than its group count.
 */
export function nodeShareOf(limit: number, ledHere: number, groupsTotal: number): number {
  if (groupsTotal <= 0 || ledHere >= groupsTotal) return limit;
  return Math.max(1, Math.ceil((limit * ledHere) / groupsTotal));
}
