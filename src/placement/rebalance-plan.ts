/**
 * The rebalancer's decision, as a pure function of the cluster's layout: which replicas to move
 * (each move adds a replica on one node and then removes one from another, so a group never has
 * fewer than its replica count) and which leaderships to hand over, so that
 *
 * - draining nodes end with no replica and no leadership;
 * - a group short of replicas (a node removed for good) gets them back, up to the replica count;
 * - replicas are spread over the active nodes: max − min replicas per node ≤ 1;
 * - leaderships are spread the same way, as far as the replicas allow (a node can only lead a
 *   group it holds), and never on a draining node;
 * - no node ever holds two replicas of one group.
 *
 * The plan is computed on a simulated copy of the layout, step by step, so every step is legal
 * after the ones before it. Moves come in waves: a wave holds at most `maxConcurrentMoves` moves
 * and at most one per group; a wave starts when the previous one is done. Ties are broken by
 * node id and group id, so the same layout always gives the same plan on every node.
 */
import { assert, assertionFailed } from '../base/assert.js';
import type { NodeId } from '../raft/messages.js';

export interface PlanMember {
  readonly id: NodeId;
  /** Removed members are not passed in; a draining node receives nothing and gives everything. */
  readonly state: 'active' | 'draining';
}

export interface PlanGroup {
  readonly id: number;
  readonly replicas: readonly NodeId[];
  /** The current leader, or '' when unknown (then no transfer is planned for the group). */
  readonly leader: NodeId;
}

export interface RebalanceInput {
  readonly members: readonly PlanMember[];
  readonly groups: readonly PlanGroup[];
  /** Wanted replicas per group (usually 3); capped by the number of active nodes. */
  readonly replicaCount: number;
  /** Moves carried out at once, at most. */
  readonly maxConcurrentMoves: number;
}

/**
 * Moves one replica of `groupId` from `from` to `to`: add `to` as a learner, catch it up,
 * promote it and remove `from` by joint consensus. `from` is '' when the group is short of
 * replicas: the replica is only added.
 */
export interface ReplicaMove {
  readonly groupId: number;
  readonly from: NodeId;
  readonly to: NodeId;
  /** Moves of one wave run together; wave w + 1 starts when wave w is done. */
  readonly wave: number;
}

export interface LeaderTransfer {
  readonly groupId: number;
  readonly from: NodeId;
  readonly to: NodeId;
}

export interface RebalancePlan {
  readonly moves: readonly ReplicaMove[];
  /** Planned on the layout the moves leave; carried out after them. */
  readonly transfers: readonly LeaderTransfer[];
  /** Replicas and leaderships per active node once the plan is carried out. */
  readonly replicasAfter: ReadonlyMap<NodeId, number>;
  readonly leadersAfter: ReadonlyMap<NodeId, number>;
  /** Every group's replicas and leader once the plan is carried out. */
  readonly layoutAfter: readonly PlanGroup[];
}

interface SimGroup {
  readonly id: number;
  replicas: NodeId[];
  leader: NodeId;
}

export function planRebalance(input: RebalanceInput): RebalancePlan {
  assert(input.maxConcurrentMoves >= 1, 'maxConcurrentMoves must be at least 1');
  assert(input.replicaCount >= 1, 'replicaCount must be at least 1');
  const active = input.members
    .filter((m) => m.state === 'active')
    .map((m) => m.id)
    .sort();
  const draining = new Set(input.members.filter((m) => m.state === 'draining').map((m) => m.id));
  const groups: SimGroup[] = [...input.groups]
    .sort((a, b) => a.id - b.id)
    .map((g) => {
      if (new Set(g.replicas).size !== g.replicas.length)
        assertionFailed(`group ${g.id} repeats a replica`);
      return { id: g.id, replicas: [...g.replicas], leader: g.leader };
    });
  const sim = new Layout(active, groups);
  const moves: Omit<ReplicaMove, 'wave'>[] = [];
  const move = (g: SimGroup, from: NodeId, to: NodeId): void => {
    sim.move(g, from, to);
    moves.push({ groupId: g.id, from, to });
  };

  // 1. Empty the draining nodes (and any node that is no longer a member).
  for (const g of groups) {
    for (const from of [...g.replicas].sort()) {
      if (sim.isActive(from)) continue;
      const to = sim.leastLoadedOutside(g);
      // No active node is free for this group: it keeps the replica rather than lose one.
      if (to !== undefined) move(g, from, to);
    }
  }
  // 2. Give groups short of replicas their missing ones.
  const wanted = Math.min(input.replicaCount, active.length);
  for (const g of groups) {
    while (g.replicas.length < wanted) {
      const to = sim.leastLoadedOutside(g);
      assert(to !== undefined, 'an active node outside the group exists while it is short');
      move(g, '', to);
    }
  }
  // 3. Spread replicas: the busiest node gives one to the idlest until they differ by ≤ 1. The
  //    busier node always holds a group the idler does not, and the sum of squared loads falls
  //    at every move, so this ends.
  for (;;) {
    const busiest = sim.busiestNode();
    const idlest = sim.idlestNode();
    if (busiest === undefined || idlest === undefined) break;
    if (sim.replicaCount(busiest) - sim.replicaCount(idlest) <= 1) break;
    // Prefer a group the busy node does not lead: no leadership has to move with it.
    const candidates = groups.filter(
      (g) => g.replicas.includes(busiest) && !g.replicas.includes(idlest),
    );
    assert(candidates.length > 0, 'a busier node holds a group the idler does not');
    const g = candidates.find((c) => c.leader !== busiest) ?? candidates[0]!;
    move(g, busiest, idlest);
  }
  const transfers = planLeaderTransfers(sim, groups, draining);
  return {
    moves: assignWaves(moves, input.maxConcurrentMoves),
    transfers,
    replicasAfter: sim.replicaCounts(),
    leadersAfter: sim.leaderCounts(),
    layoutAfter: groups.map((g) => ({
      id: g.id,
      replicas: [...g.replicas].sort(),
      leader: g.leader,
    })),
  };
}

/**
 * Leaderships: first off nodes that are not active, then from the node leading most to one
 * leading at least two fewer, along a chain of hand-overs when no single one helps (A hands a
 * group to B, B one to C, …): an augmenting path, so the spread reached is the best the replica
 * layout allows.
 */
function planLeaderTransfers(
  sim: Layout,
  groups: readonly SimGroup[],
  draining: ReadonlySet<NodeId>,
): LeaderTransfer[] {
  const transfers: LeaderTransfer[] = [];
  const transfer = (g: SimGroup, to: NodeId): void => {
    assert(g.replicas.includes(to) && sim.isActive(to), 'a leader must be an active replica');
    transfers.push({ groupId: g.id, from: g.leader, to });
    sim.setLeader(g, to);
  };
  // A draining node that kept a replica (no active node was free) still hands leadership over.
  for (const g of groups) {
    if (g.leader === '' || !draining.has(g.leader) || !g.replicas.includes(g.leader)) continue;
    const to = sim.leastLeadingOf(g.replicas);
    if (to !== undefined) transfer(g, to);
  }
  for (let guard = 0; guard < groups.length * groups.length + 1; guard++) {
    const path = sim.improvingLeaderPath(groups);
    if (path === undefined) break;
    for (const [g, to] of path) transfer(g, to);
  }
  return transfers;
}

/** Waves of at most `max` moves, one per group each, in plan order. */
function assignWaves(moves: readonly Omit<ReplicaMove, 'wave'>[], max: number): ReplicaMove[] {
  const out: ReplicaMove[] = [];
  const waveSize: number[] = [];
  const lastWaveOfGroup = new Map<number, number>();
  for (const m of moves) {
    let w = (lastWaveOfGroup.get(m.groupId) ?? -1) + 1;
    while ((waveSize[w] ?? 0) >= max) w++;
    waveSize[w] = (waveSize[w] ?? 0) + 1;
    lastWaveOfGroup.set(m.groupId, w);
    out.push({ ...m, wave: w });
  }
  // Stable by wave, then plan order: a later wave never lists before an earlier one.
  return out
    .map((m, i) => ({ m, i }))
    .sort((a, b) => a.m.wave - b.m.wave || a.i - b.i)
    .map((x) => x.m);
}

/** The simulated layout: replica and leader counts per active node, kept with every change. */
class Layout {
  private readonly replicas = new Map<NodeId, number>();
  private readonly leaders = new Map<NodeId, number>();

  constructor(
    private readonly active: readonly NodeId[],
    groups: readonly SimGroup[],
  ) {
    for (const id of active) {
      this.replicas.set(id, 0);
      this.leaders.set(id, 0);
    }
    for (const g of groups) {
      for (const r of g.replicas) if (this.replicas.has(r)) this.bump(this.replicas, r, 1);
      if (this.leaders.has(g.leader) && g.replicas.includes(g.leader))
        this.bump(this.leaders, g.leader, 1);
    }
  }

  isActive(id: NodeId): boolean {
    return this.replicas.has(id);
  }

  replicaCount(id: NodeId): number {
    return this.replicas.get(id) ?? 0;
  }

  move(g: SimGroup, from: NodeId, to: NodeId): void {
    if (!this.isActive(to)) assertionFailed(`move target ${to} is not an active node`);
    if (!!g.replicas.includes(to)) assertionFailed(`group ${g.id} already has a replica on ${to}`);
    if (!(from === '' || g.replicas.includes(from)))
      assertionFailed(`group ${g.id} has no replica on ${from}`);
    g.replicas.push(to);
    this.bump(this.replicas, to, 1);
    if (from === '') return;
    g.replicas.splice(g.replicas.indexOf(from), 1);
    if (this.isActive(from)) this.bump(this.replicas, from, -1);
    if (g.leader === from) {
      if (this.isActive(from)) this.bump(this.leaders, from, -1);
      // The move hands leadership to the remaining replica leading least (not the newcomer,
      // which is still a learner when the old replica leaves).
      const next = this.leastLeadingOf(g.replicas.filter((r) => r !== to)) ?? '';
      g.leader = next;
      if (next !== '') this.bump(this.leaders, next, 1);
    }
  }

  /** The active node outside `g` holding the fewest replicas (ties: lowest id). */
  leastLoadedOutside(g: SimGroup): NodeId | undefined {
    let best: NodeId | undefined;
    for (const id of this.active) {
      if (g.replicas.includes(id)) continue;
      if (best === undefined || this.replicaCount(id) < this.replicaCount(best)) best = id;
    }
    return best;
  }

  /** Among `ids`, the active node leading the fewest groups (ties: lowest id). */
  leastLeadingOf(ids: readonly NodeId[]): NodeId | undefined {
    let best: NodeId | undefined;
    for (const id of [...ids].sort()) {
      if (!this.isActive(id)) continue;
      if (best === undefined || this.leaderCount(id) < this.leaderCount(best)) best = id;
    }
    return best;
  }

  busiestNode(): NodeId | undefined {
    let best: NodeId | undefined;
    for (const id of this.active)
      if (best === undefined || this.replicaCount(id) > this.replicaCount(best)) best = id;
    return best;
  }

  idlestNode(): NodeId | undefined {
    let best: NodeId | undefined;
    for (const id of this.active)
      if (best === undefined || this.replicaCount(id) < this.replicaCount(best)) best = id;
    return best;
  }

  leaderCount(id: NodeId): number {
    return this.leaders.get(id) ?? 0;
  }

  /**
   * A chain of hand-overs that moves one leadership from a node leading the most to a node
   * leading at least two fewer, through nodes whose counts do not change (breadth first, so
   * the chain is shortest); undefined when none exists.
   */
  improvingLeaderPath(groups: readonly SimGroup[]): [SimGroup, NodeId][] | undefined {
    const counts = this.active.map((id) => this.leaderCount(id));
    const maxCount = Math.max(...counts);
    for (const start of this.active.filter((id) => this.leaderCount(id) === maxCount)) {
      const cameFrom = new Map<NodeId, [SimGroup, NodeId]>();
      const queue: NodeId[] = [start];
      const seen = new Set<NodeId>([start]);
      while (queue.length > 0) {
        const at = queue.shift()!;
        for (const g of groups) {
          if (g.leader !== at) continue;
          for (const next of [...g.replicas].sort()) {
            if (seen.has(next) || !this.isActive(next)) continue;
            seen.add(next);
            cameFrom.set(next, [g, at]);
            if (this.leaderCount(next) <= maxCount - 2) return this.pathTo(next, cameFrom);
            queue.push(next);
          }
        }
      }
    }
    return undefined;
  }

  private pathTo(
    end: NodeId,
    cameFrom: ReadonlyMap<NodeId, [SimGroup, NodeId]>,
  ): [SimGroup, NodeId][] {
    const path: [SimGroup, NodeId][] = [];
    for (let at = end; cameFrom.has(at);) {
      const [g, prev] = cameFrom.get(at)!;
      path.push([g, at]);
      at = prev;
    }
    // Hand-overs from the end of the chain first, so no node's count passes the maximum.
    return path;
  }

  setLeader(g: SimGroup, to: NodeId): void {
    if (this.isActive(g.leader) && g.replicas.includes(g.leader))
      this.bump(this.leaders, g.leader, -1);
    g.leader = to;
    this.bump(this.leaders, to, 1);
  }

  replicaCounts(): Map<NodeId, number> {
    return new Map(this.replicas);
  }

  leaderCounts(): Map<NodeId, number> {
    return new Map(this.leaders);
  }

  private bump(m: Map<NodeId, number>, id: NodeId, by: number): void {
    m.set(id, (m.get(id) ?? 0) + by);
  }
}
