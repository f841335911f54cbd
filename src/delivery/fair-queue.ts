/**
 * The ready deliveries of one leader, and the order they start in. A slow or dead endpoint of
 * one tenant must not delay another tenant's fires (docs/ARCHITECTURE.md, The runtime and
 * delivery), so:
 * - at most `tenantInflightMax` deliveries of one tenant (or the tenant's own, lower cap: its
 *   share of its cluster-wide in-flight limit) and `originInflightMax` to one origin are in
 *   flight; a dead endpoint holds its own slots and nobody else's;
 * - at most `tenantQueuedMax` of one tenant wait, so its backlog cannot fill the queue;
 * - the lowest priority number goes first (P0 before P1 …), whenever one of it can start;
 * - within a priority, tenants take turns in proportion to their weight (the tenant's priority
 *   weight, 1 by default): with tenants A of weight 3 and B of weight 1 both waiting, A starts
 *   three items for each of B's. Equal weights make it plain round-robin. Within a tenant its
 *   origins take turns, so a tenant's dead origin does not hold up its healthy ones. Items of
 *   one tenant to one origin start in push order.
 * The queue is work-conserving: take() returns an item whenever some queued item is within both
 * of its caps. Items waiting behind a cap are not work for this node's CPU: `startableCount`
 * leaves them out (what the groups hand out is paced on it), and `hasRoomFor` refuses a tenant's
 * items to an origin once `blockedQueuedMax` of them wait behind a cap, so a dead endpoint's
 * backlog stays with its group instead of filling this queue. Pure and deterministic: no clock,
 * no I/O, iteration only over insertion-ordered Sets and Maps.
 *
 * Structure. Items sit in lanes, one FIFO per (priority, tenant, origin). A tenant's lanes of one
 * priority form a level. Rings hold only what can start: a level's `runnable` set holds its
 * non-empty lanes whose origin is below its cap, and the ring of a priority holds the levels with
 * a runnable lane whose tenant is below its cap. A level's turn is kept by stride scheduling: each
 * level has a pass, the ring serves the level with the lowest pass (ties: the one waiting
 * longest), and serving it adds 1 / weight to its pass. A level entering the ring starts at the
 * pass last served, so a tenant that had nothing waiting neither banks turns nor loses its place;
 * one that left only because it hit a cap keeps its pass. take() is O(priorities × log levels).
 * Within a level, a Set is the ring of lanes: delete and re-add moves one to the back in O(1).
 * Reaching or leaving a cap moves the affected lanes or levels in or out of the rings, in time
 * linear in the lanes of that origin (or levels of that tenant).
 */
import { assert, assertionFailed } from '../base/assert.js';
import { MinHeap } from '../base/min-heap.js';
import { ValidationError, type FieldViolation } from '../base/errors.js';
import { INVALID_OPTIONS } from './errors.js';

/** What the queue needs to know of a delivery. Each pushed item must be a distinct object. */
export interface FairItem {
  readonly tenant: string;
  /** `new URL(target).origin`. */
  readonly origin: string;
  /** 0 (first) to priorityCount − 1. */
  readonly priority: number;
  /**
   * The tenant's priority weight, 1 to WEIGHT_MAX; @default 1. The last pushed item's weight is
   * the tenant's from then on.
   */
  readonly weight?: number;
  /**
   * The tenant's own in-flight cap on this node, when lower than `tenantInflightMax` (its share
   * of its cluster-wide limit); @default tenantInflightMax. As with `weight`, the last pushed
   * item's value is the tenant's from then on; lowered below what is in flight, the tenant
   * starts nothing until enough of its deliveries end.
   */
  readonly inflightMax?: number | undefined;
}

/** The largest tenant weight the queue accepts (the API allows 1-100). */
export const WEIGHT_MAX = 1000;

export interface FairQueueOptions {
  /** Items waiting, all tenants together. */
  readonly queuedMax: number;
  /** Items of one tenant waiting. @default queuedMax */
  readonly tenantQueuedMax?: number;
  /** Items of one tenant in flight. */
  readonly tenantInflightMax: number;
  /** Items to one origin in flight (typically the origin pool's connection count). */
  readonly originInflightMax: number;
  /** Priorities 0 … priorityCount − 1. @default 4 (P0–P3, as jobs have) */
  readonly priorityCount?: number;
  /**
   * Items of one tenant to one origin that hasRoomFor lets wait while that origin (or the
   * tenant) is at its in-flight cap: enough to refill the slots as they free up, no more.
   * @default originInflightMax
   */
  readonly blockedQueuedMax?: number;
}

export type CompiledFairQueueOptions = Readonly<Required<FairQueueOptions>>;

/** `full`: the queue holds queuedMax items; `tenant-full`: this tenant holds tenantQueuedMax. */
export type PushResult = 'queued' | 'full' | 'tenant-full';

export function compileFairQueueOptions(options: FairQueueOptions): CompiledFairQueueOptions {
  const violations: FieldViolation[] = [];
  const positiveInt = (field: keyof FairQueueOptions, value: number, hi: number): number => {
    if (!(Number.isSafeInteger(value) && value >= 1 && value <= hi)) {
      violations.push({ field, reason: `must be an integer in [1, ${hi}], got ${value}` });
    }
    return value;
  };
  const queuedMax = positiveInt('queuedMax', options.queuedMax, 10_000_000);
  const compiled = {
    queuedMax,
    // The default is reported under queuedMax only, when that is the faulty one.
    tenantQueuedMax:
      options.tenantQueuedMax === undefined
        ? queuedMax
        : positiveInt('tenantQueuedMax', options.tenantQueuedMax, 10_000_000),
    tenantInflightMax: positiveInt('tenantInflightMax', options.tenantInflightMax, 1_000_000),
    originInflightMax: positiveInt('originInflightMax', options.originInflightMax, 1_000_000),
    priorityCount: positiveInt('priorityCount', options.priorityCount ?? 4, 16),
    blockedQueuedMax:
      options.blockedQueuedMax === undefined
        ? options.originInflightMax
        : positiveInt('blockedQueuedMax', options.blockedQueuedMax, 10_000_000),
  };
  if (violations.length > 0) throw new ValidationError(INVALID_OPTIONS, violations);
  return Object.freeze(compiled);
}

interface Lane<T> {
  readonly level: Level<T>;
  readonly origin: OriginState<T>;
  /** FIFO: items[head …] are queued. */
  items: T[];
  head: number;
}

interface Level<T> {
  readonly tenant: TenantState<T>;
  readonly priority: number;
  /** Every non-empty lane of this tenant and priority, by origin name. */
  readonly lanes: Map<string, Lane<T>>;
  /** Invariant: exactly the lanes whose origin is below its cap, in round-robin order. */
  readonly runnable: Set<Lane<T>>;
  /** Invariant: the items queued in the `runnable` lanes. */
  runnableQueued: number;
  /** Stride scheduling: the ring serves the level with the lowest pass. */
  pass: number;
  /** In its priority's ring. */
  inRing: boolean;
  /** Bumped whenever the level's ring entry changes; older entries are stale. */
  ringVersion: number;
}

interface TenantState<T> {
  readonly name: string;
  weight: number;
  /** min(tenantInflightMax, the last pushed item's inflightMax). */
  cap: number;
  inflightCount: number;
  queuedCount: number;
  readonly levels: (Level<T> | undefined)[];
}

interface OriginState<T> {
  readonly name: string;
  inflightCount: number;
  /** Every non-empty lane to this origin. */
  readonly lanes: Set<Lane<T>>;
}

export class FairQueue<T extends FairItem> {
  readonly options: CompiledFairQueueOptions;
  /** Invariant: rings[p] holds exactly the levels of priority p with a runnable lane whose tenant is below its cap. */
  private readonly rings: PassRing<T>[];
  private readonly tenants = new Map<string, TenantState<T>>();
  private readonly origins = new Map<string, OriginState<T>>();
  /** Where each item is: pair-checked so that done() matches a take() exactly once. */
  private readonly states = new Map<T, 'queued' | 'inflight'>();
  private queued = 0;
  private inflight = 0;
  /** Invariant: the items queued in runnable lanes of levels in a ring (startableCount). */
  private startable = 0;

  constructor(options: FairQueueOptions) {
    this.options = compileFairQueueOptions(options);
    this.rings = Array.from({ length: this.options.priorityCount }, () => new PassRing<T>());
  }

  get queuedCount(): number {
    return this.queued;
  }

  get inflightCount(): number {
    return this.inflight;
  }

  /**
   * Queued items below both of their caps: what take() can start as fast as the CPU allows.
   * The rest wait for an answer from their origin (or for their tenant's), not for this node.
   */
  get startableCount(): number {
    return this.startable;
  }

  /**
   * Whether an item of this tenant to this origin should be queued now. Yes while it could start
   * (both caps have room) and while fewer than `blockedQueuedMax` of the tenant's items (to this
   * origin, for the origin's cap) wait behind a cap; no otherwise: it would only wait here,
   * holding room that other tenants' and origins' items need. Not a promise: push() still
   * applies queuedMax and tenantQueuedMax.
   */
  hasRoomFor(tenant: string, origin: string): boolean {
    const t = this.tenants.get(tenant);
    if (t === undefined) return true;
    const max = this.options.blockedQueuedMax;
    if (t.inflightCount >= t.cap && t.queuedCount >= max) return false;
    if ((this.origins.get(origin)?.inflightCount ?? 0) < this.options.originInflightMax)
      return true;
    let waiting = 0;
    for (const level of t.levels) {
      const lane = level?.lanes.get(origin);
      if (lane !== undefined) waiting += lane.items.length - lane.head;
    }
    return waiting < max;
  }

  tenantCounts(tenant: string): { queuedCount: number; inflightCount: number } {
    const state = this.tenants.get(tenant);
    return { queuedCount: state?.queuedCount ?? 0, inflightCount: state?.inflightCount ?? 0 };
  }

  originInflightCount(origin: string): number {
    return this.origins.get(origin)?.inflightCount ?? 0;
  }

  /** Queues an item, or says why not; a full queue is back-pressure, never growth. */
  push(item: T): PushResult {
    if (!(
      Number.isSafeInteger(item.priority) &&
      item.priority >= 0 &&
      item.priority < this.options.priorityCount
    ))
      assertionFailed(
        `priority must be an integer in [0, ${this.options.priorityCount}), got ${item.priority}`,
      );
    assert(!this.states.has(item), 'item pushed twice (each push needs its own object)');
    const weight = item.weight ?? 1;
    if (!(Number.isSafeInteger(weight) && weight >= 1 && weight <= WEIGHT_MAX))
      assertionFailed(`weight must be an integer in [1, ${WEIGHT_MAX}], got ${weight}`);
    if (this.queued >= this.options.queuedMax) return 'full';
    const inflightMax = item.inflightMax ?? this.options.tenantInflightMax;
    if (!(Number.isSafeInteger(inflightMax) && inflightMax >= 1))
      assertionFailed(`inflightMax must be a positive integer, got ${inflightMax}`);
    const tenant = this.tenantState(item.tenant);
    tenant.weight = weight;
    const cap = Math.min(inflightMax, this.options.tenantInflightMax);
    if (cap !== tenant.cap) {
      tenant.cap = cap;
      for (const l of tenant.levels) if (l !== undefined) this.refreshLevel(l);
    }
    if (tenant.queuedCount >= this.options.tenantQueuedMax) {
      this.forgetIfUnused(tenant);
      return 'tenant-full';
    }
    const level = this.levelOf(tenant, item.priority);
    let lane = level.lanes.get(item.origin);
    if (lane === undefined) {
      const origin = this.originState(item.origin);
      lane = { level, origin, items: [], head: 0 };
      level.lanes.set(item.origin, lane);
      origin.lanes.add(lane);
      if (origin.inflightCount < this.options.originInflightMax) this.setRunnable(lane, true);
      this.refreshLevel(level);
    }
    lane.items.push(item);
    tenant.queuedCount++;
    this.queued++;
    if (level.runnable.has(lane)) this.countRunnable(level, 1);
    this.states.set(item, 'queued');
    return 'queued';
  }

  /** The next item to start, counted as in flight until done(); undefined if none may start. */
  take(): T | undefined {
    for (const ring of this.rings) {
      const level = ring.first();
      if (level === undefined) continue;
      const lane = first(level.runnable);
      assert(lane !== undefined, 'a level in a ring has no runnable lane');
      const item = lane.items[lane.head];
      assert(item !== undefined, 'a runnable lane is empty');
      lane.head++;
      this.countRunnable(level, -1);
      this.compact(lane);
      // The level's turn moves on by its stride; the lane goes to the back of its level's ring.
      ring.served(level, level.tenant.weight);
      level.runnable.delete(lane);
      level.runnable.add(lane);

      const tenant = level.tenant;
      tenant.queuedCount--;
      this.queued--;
      tenant.inflightCount++;
      lane.origin.inflightCount++;
      this.inflight++;
      this.states.set(item, 'inflight');
      // After the counts moved, so that the origin is not forgotten while it has work in flight.
      if (lane.head === lane.items.length) this.dropLane(lane);
      if (lane.origin.inflightCount === this.options.originInflightMax) {
        for (const l of lane.origin.lanes) {
          this.setRunnable(l, false);
          this.refreshLevel(l.level);
        }
      }
      // At the cap the tenant's levels leave the rings; otherwise this refresh drops the level
      // only if its last runnable lane just emptied.
      for (const l of tenant.levels) if (l !== undefined) this.refreshLevel(l);
      return item;
    }
    return undefined;
  }

  /** Releases the capacity a taken item held. */
  done(item: T): void {
    assert(this.states.get(item) === 'inflight', 'done() for an item not in flight');
    this.states.delete(item);
    this.inflight--;
    const tenant = this.tenants.get(item.tenant);
    const origin = this.origins.get(item.origin);
    assert(tenant !== undefined && origin !== undefined, 'in-flight item lost its counters');
    const wasOriginFull = origin.inflightCount === this.options.originInflightMax;
    origin.inflightCount--;
    tenant.inflightCount--;
    const tenantFreed = tenant.inflightCount === tenant.cap - 1;
    if (wasOriginFull) {
      for (const lane of origin.lanes) {
        this.setRunnable(lane, true);
        this.refreshLevel(lane.level);
      }
    }
    if (tenantFreed) for (const l of tenant.levels) if (l !== undefined) this.refreshLevel(l);
    this.forgetIfUnused(tenant);
    this.forgetOriginIfUnused(origin);
  }

  /**
   * Removes and returns the queued items that match, in no promised order (a job paused or
   * deleted, or leadership lost: `() => true`). O(queued items).
   */
  removeQueuedWhere(predicate: (item: T) => boolean): T[] {
    const removed: T[] = [];
    for (const tenant of [...this.tenants.values()]) {
      for (const level of tenant.levels) {
        if (level === undefined) continue;
        for (const lane of [...level.lanes.values()]) {
          const kept: T[] = [];
          for (let i = lane.head; i < lane.items.length; i++) {
            const item = lane.items[i] as T;
            if (predicate(item)) removed.push(item);
            else kept.push(item);
          }
          const removedHere = lane.items.length - lane.head - kept.length;
          if (level.runnable.has(lane)) this.countRunnable(level, -removedHere);
          lane.items = kept;
          lane.head = 0;
          tenant.queuedCount -= removedHere;
          this.queued -= removedHere;
          if (kept.length === 0) this.dropLane(lane);
        }
        this.refreshLevel(level);
      }
      this.forgetIfUnused(tenant);
    }
    for (const item of removed) this.states.delete(item);
    return removed;
  }

  /**
   * Checks every invariant by walking the whole structure; for tests (O(items)). A failure is
   * an AssertionError naming the broken rule.
   */
  checkInvariants(): void {
    let queued = 0;
    let inflight = 0;
    for (const [, state] of this.states) {
      if (state === 'queued') queued++;
      else inflight++;
    }
    assert(queued === this.queued && inflight === this.inflight, 'counts disagree with states');
    let originInflight = 0;
    for (const origin of this.origins.values()) {
      assert(origin.inflightCount <= this.options.originInflightMax, 'origin over its cap');
      originInflight += origin.inflightCount;
      for (const lane of origin.lanes) {
        assert(lane.head < lane.items.length, 'an empty lane is still registered');
        const isRunnable = origin.inflightCount < this.options.originInflightMax;
        assert(lane.level.runnable.has(lane) === isRunnable, 'lane runnable set is stale');
      }
    }
    assert(originInflight === this.inflight, 'origin in-flight counts disagree');
    let startable = 0;
    let tenantInflight = 0;
    for (const tenant of this.tenants.values()) {
      // A cap lowered while deliveries were in flight leaves the tenant over it for a while.
      assert(tenant.cap <= this.options.tenantInflightMax, 'tenant cap above the node cap');
      tenantInflight += tenant.inflightCount;
      let tenantQueued = 0;
      for (const level of tenant.levels) {
        if (level === undefined) continue;
        for (const lane of level.lanes.values()) tenantQueued += lane.items.length - lane.head;
        const inRing = this.rings[level.priority]?.has(level) ?? false;
        const shouldBe = level.runnable.size > 0 && tenant.inflightCount < tenant.cap;
        assert(inRing === shouldBe, 'priority ring is stale');
        let runnableQueued = 0;
        for (const lane of level.runnable) runnableQueued += lane.items.length - lane.head;
        assert(runnableQueued === level.runnableQueued, 'level runnable count disagrees');
        if (inRing) startable += runnableQueued;
      }
      assert(tenantQueued === tenant.queuedCount, 'tenant queued count disagrees');
    }
    assert(tenantInflight === this.inflight, 'tenant in-flight counts disagree');
    assert(startable === this.startable, 'startable count disagrees');
  }

  private tenantState(name: string): TenantState<T> {
    let state = this.tenants.get(name);
    if (state === undefined) {
      state = {
        name,
        weight: 1,
        cap: this.options.tenantInflightMax,
        inflightCount: 0,
        queuedCount: 0,
        levels: [],
      };
      this.tenants.set(name, state);
    }
    return state;
  }

  private originState(name: string): OriginState<T> {
    let state = this.origins.get(name);
    if (state === undefined) {
      state = { name, inflightCount: 0, lanes: new Set() };
      this.origins.set(name, state);
    }
    return state;
  }

  private levelOf(tenant: TenantState<T>, priority: number): Level<T> {
    let level = tenant.levels[priority];
    if (level === undefined) {
      level = {
        tenant,
        priority,
        lanes: new Map(),
        runnable: new Set(),
        runnableQueued: 0,
        pass: 0,
        inRing: false,
        ringVersion: 0,
      };
      tenant.levels[priority] = level;
    }
    return level;
  }

  /** Puts a level in its ring (at the back, if absent) or takes it out, per the invariant. */
  private refreshLevel(level: Level<T>): void {
    const ring = this.rings[level.priority];
    assert(ring !== undefined, 'level priority out of range');
    const belongs = level.runnable.size > 0 && level.tenant.inflightCount < level.tenant.cap;
    if (belongs === level.inRing) return;
    if (belongs) ring.add(level);
    else ring.delete(level);
    this.startable += belongs ? level.runnableQueued : -level.runnableQueued;
  }

  /** Puts a lane in or out of its level's runnable set, keeping the counts. */
  private setRunnable(lane: Lane<T>, runnable: boolean): void {
    const level = lane.level;
    if (level.runnable.has(lane) === runnable) return;
    if (runnable) level.runnable.add(lane);
    else level.runnable.delete(lane);
    this.countRunnable(level, (runnable ? 1 : -1) * (lane.items.length - lane.head));
  }

  /** `n` items joined (or, negative, left) the runnable lanes of `level`. */
  private countRunnable(level: Level<T>, n: number): void {
    level.runnableQueued += n;
    if (level.inRing) this.startable += n;
  }

  private dropLane(lane: Lane<T>): void {
    lane.level.lanes.delete(lane.origin.name);
    this.setRunnable(lane, false);
    lane.origin.lanes.delete(lane);
    this.forgetOriginIfUnused(lane.origin);
  }

  /** Drops consumed slots once they are half the array, so a long-lived lane stays small. */
  private compact(lane: Lane<T>): void {
    if (lane.head >= 64 && lane.head * 2 >= lane.items.length) {
      lane.items = lane.items.slice(lane.head);
      lane.head = 0;
    }
  }

  /** Tenants and origins with nothing queued or in flight are forgotten: memory stays bounded. */
  private forgetIfUnused(tenant: TenantState<T>): void {
    if (tenant.inflightCount > 0 || tenant.queuedCount > 0) return;
    // Nothing queued: leaving the rings changes no count.
    for (const level of tenant.levels) {
      if (level !== undefined) this.rings[level.priority]?.delete(level);
    }
    this.tenants.delete(tenant.name);
  }

  private forgetOriginIfUnused(origin: OriginState<T>): void {
    if (origin.inflightCount === 0 && origin.lanes.size === 0) this.origins.delete(origin.name);
  }
}

function first<V>(set: Set<V>): V | undefined {
  for (const v of set) return v;
  return undefined;
}

interface RingEntry<T> {
  readonly level: Level<T>;
  readonly pass: number;
  /** Order of entry, so that equal passes are served first come, first served. */
  readonly seq: number;
  readonly version: number;
}

/**
 * The levels of one priority that can start, served lowest pass first (stride scheduling). A
 * min-heap of entries; leaving the ring only marks the level, and its stale entry is dropped when
 * it reaches the top (or when stale entries outnumber live ones, by a rebuild).
 */
class PassRing<T> {
  private readonly heap = new MinHeap<RingEntry<T>>(
    (a, b) => a.pass < b.pass || (a.pass === b.pass && a.seq < b.seq),
  );
  private seq = 0;
  private liveCount = 0;
  /** The pass of the level served last: where a level entering the ring starts. */
  private virtualPass = 0;

  has(level: Level<T>): boolean {
    return level.inRing;
  }

  add(level: Level<T>): void {
    if (level.inRing) return;
    level.inRing = true;
    this.liveCount++;
    level.pass = Math.max(level.pass, this.virtualPass);
    this.push(level);
  }

  delete(level: Level<T>): void {
    if (!level.inRing) return;
    level.inRing = false;
    level.ringVersion++;
    this.liveCount--;
    if (this.heap.size > 2 * this.liveCount + 64) this.rebuild();
  }

  /** The level to serve next, or undefined when the ring is empty. */
  first(): Level<T> | undefined {
    for (let top = this.heap.peek(); top !== undefined; top = this.heap.peek()) {
      if (top.level.inRing && top.version === top.level.ringVersion) return top.level;
      this.heap.pop();
    }
    return undefined;
  }

  /** `level` (which first() returned) was served: its pass moves on by 1 / weight. */
  served(level: Level<T>, weight: number): void {
    const top = this.heap.pop();
    assert(top?.level === level, 'served a level that was not first in its ring');
    this.virtualPass = level.pass;
    level.pass += 1 / weight;
    this.push(level);
  }

  private push(level: Level<T>): void {
    level.ringVersion++;
    this.heap.push({ level, pass: level.pass, seq: this.seq++, version: level.ringVersion });
  }

  private rebuild(): void {
    const live = this.heap
      .values()
      .filter((e) => e.level.inRing && e.version === e.level.ringVersion);
    this.heap.clear();
    for (const e of live) this.heap.push(e);
  }
}
