/**
 * The runs a group's leader has due and not yet handed to delivery, and the order it hands them
 * out in: the lowest priority number first (P0 before P1 …); within a priority, tenants take
 * turns one run at a time; within a tenant, its origins take turns; one origin's runs go in the
 * order they were added (due order, as the wheel pops them).
 *
 * A hand-out asks, run by run, whether the node's delivery queue has room for that tenant and
 * origin (FairQueue.hasRoomFor). An origin refused once is passed over for the rest of that
 * hand-out, its runs left where they are, so an endpoint that does not answer holds back only its
 * own runs: the others are reached without scanning the refused ones again. Pure: no clock, no
 * I/O, iteration only over insertion-ordered Maps and Sets.
 */

import { assertionFailed } from '../base/assert.js';

/** Where a run queues: its job's priority, tenant and delivery origin. */
export interface HandOutLane {
  readonly priority: number;
  readonly tenant: string;
  readonly origin: string;
}

/** Whether the delivery queue has room for one more run of this tenant to this origin. */
export type HandOutAdmission = (tenant: string, origin: string) => boolean;

export const ADMIT_ALL: HandOutAdmission = () => true;

interface TenantLane {
  readonly tenant: string;
  /** Non-empty only; by origin, in turn order (the one served last moves to the back). */
  readonly origins: Map<string, Set<string>>;
}

interface Placement {
  readonly level: Map<string, TenantLane>;
  readonly lane: TenantLane;
  readonly runs: Set<string>;
}

export class HandOutQueue {
  /** Per priority: tenant lanes with runs, in turn order. */
  private readonly levels: Map<string, TenantLane>[] = [];
  private readonly placed = new Map<string, Placement>();

  /** `laneOf` says where a run queues; undefined puts it last (its job is gone: it is dropped). */
  constructor(private readonly laneOf: (fireId: string) => HandOutLane | undefined) {}

  get size(): number {
    return this.placed.size;
  }

  has(fireId: string): boolean {
    return this.placed.has(fireId);
  }

  /** Queues a run at the back of its lane; a run already queued keeps its place. */
  add(fireId: string): void {
    if (this.placed.has(fireId)) return;
    const where = this.laneOf(fireId) ?? GONE;
    if (!(Number.isSafeInteger(where.priority) && where.priority >= 0 && where.priority < 64))
      assertionFailed(`priority must be an integer in [0, 64), got ${where.priority}`);
    let level = this.levels[where.priority];
    if (level === undefined) {
      for (let p = this.levels.length; p <= where.priority; p++) this.levels.push(new Map());
      level = this.levels[where.priority]!;
    }
    let lane = level.get(where.tenant);
    if (lane === undefined) {
      lane = { tenant: where.tenant, origins: new Map() };
      level.set(where.tenant, lane);
    }
    let runs = lane.origins.get(where.origin);
    if (runs === undefined) {
      runs = new Set();
      lane.origins.set(where.origin, runs);
    }
    runs.add(fireId);
    this.placed.set(fireId, { level, lane, runs });
  }

  delete(fireId: string): boolean {
    const at = this.placed.get(fireId);
    if (at === undefined) return false;
    this.placed.delete(fireId);
    at.runs.delete(fireId);
    if (at.runs.size === 0) {
      for (const [origin, runs] of at.lane.origins) {
        if (runs === at.runs) {
          at.lane.origins.delete(origin);
          break;
        }
      }
      if (at.lane.origins.size === 0) at.level.delete(at.lane.tenant);
    }
    return true;
  }

  /** Every queued run, in no promised order. */
  ids(): IterableIterator<string> {
    return this.placed.keys();
  }

  /**
   * The runs to hand out, in hand-out order, each checked against `admits` just before it is
   * yielded. The caller removes each run it is given (delete) before asking for the next, or
   * stops; a run it does not remove would be yielded again. Runs of a refused origin stay
   * queued.
   */
  *order(admits: HandOutAdmission): Generator<string, void, undefined> {
    for (const level of this.levels) {
      if (level.size === 0) continue;
      const refused = new Set<string>();
      // Tenants in turn: a full pass over the level serves each tenant at most one run.
      let served = true;
      while (served) {
        served = false;
        for (const lane of [...level.values()]) {
          const next = this.nextOf(lane, admits, refused);
          if (next === undefined) continue;
          served = true;
          yield next.fireId;
          // Taken (the caller asked for the next one): the origin's and the tenant's turns are
          // over, both go to the back. A caller that stops here leaves both where they were.
          const runs = lane.origins.get(next.origin);
          if (runs !== undefined) {
            lane.origins.delete(next.origin);
            lane.origins.set(next.origin, runs);
          }
          if (level.get(lane.tenant) === lane) {
            level.delete(lane.tenant);
            level.set(lane.tenant, lane);
          }
        }
      }
    }
  }

  /** The first run of the tenant's first origin in turn that is admitted now. */
  private nextOf(
    lane: TenantLane,
    admits: HandOutAdmission,
    refused: Set<string>,
  ): { readonly origin: string; readonly fireId: string } | undefined {
    for (const [origin, runs] of lane.origins) {
      const key = `${lane.tenant}\u0000${origin}`;
      if (refused.has(key)) continue;
      if (!admits(lane.tenant, origin)) {
        refused.add(key);
        continue;
      }
      const first = runs.values().next();
      if (first.done !== true) return { origin, fireId: first.value };
    }
    return undefined;
  }
}

/** The lane of a run whose job is gone: any, since the hand-out drops it unsent. */
const GONE: HandOutLane = { priority: 0, tenant: '', origin: '' };
