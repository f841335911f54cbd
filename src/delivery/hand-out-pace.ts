/**
 * How fast a node's groups hand due runs to its delivery queue, and which ones it takes: the
 * groups hand out what the queue lacks to hold DELIVERY_QUEUE_TARGET attempts that could start
 * now, and a run only if the queue has room for its tenant and origin (FairQueue.hasRoomFor).
 * Attempts waiting behind a tenant's or origin's cap wait for answers, not for this node, so they
 * are not counted: a dead endpoint's backlog stays with its group and never stops the hand-out
 * of anybody else's runs. The runtime (src/server/scheduler-runtime.ts) and the hand-out
 * simulator (test/sim/hand-out-sim.ts) both pace on this. Pure.
 */
import type { HandOutAdmission } from '../scheduler/hand-out-queue.js';
import type { TenantFireRate } from './tenant-fire-rate.js';

/**
 * Hand-outs per node and step are capped so that the delivery queue holds about this many
 * attempts that could start: at a spike's slot the first webhooks leave within a few ms instead
 * of after the whole hand-out (about 35 µs of CPU per run on a busy node, 170 ms for 5,000), and
 * the rest follows at the next loop turns while the runner sends.
 */
export const DELIVERY_QUEUE_TARGET = 512;

/** What the pace needs to know of the node's delivery queue. */
export interface DeliveryQueueView {
  /** Attempts queued that could start now (below their caps), or waiting for a fresh lease. */
  readonly startableCount: number;
  hasRoomFor(tenant: string, origin: string): boolean;
}

/** Runs the node's groups may hand out at this step, all groups together. */
export function handOutBudget(queue: DeliveryQueueView): number {
  return Math.max(0, DELIVERY_QUEUE_TARGET - queue.startableCount);
}

/** The admission each group's hand-out asks, run by run. */
export function admissionOf(queue: DeliveryQueueView): HandOutAdmission {
  return (tenant, origin) => queue.hasRoomFor(tenant, origin);
}

/**
 * The hand-out's gate with tenants' fire rates: a run is admitted when the queue has room for
 * it and its tenant is within its rate (asked in that order, so a run the queue would refuse
 * does not count as throttled), and each run taken is counted against its tenant's rate.
 */
export interface HandOutGate {
  readonly admits: HandOutAdmission;
  readonly taken: ((tenant: string) => void) | undefined;
}

export function handOutGateOf(queue: DeliveryQueueView, fireRate?: TenantFireRate): HandOutGate {
  const queueAdmits = admissionOf(queue);
  if (fireRate === undefined) return { admits: queueAdmits, taken: undefined };
  return {
    admits: (tenant, origin) => queueAdmits(tenant, origin) && fireRate.allows(tenant),
    taken: (tenant) => fireRate.taken(tenant),
  };
}
