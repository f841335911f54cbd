/**
 * Rebalance, DrainNode and RemoveNode on the meta leader. Each call is one round: it plans from
 * the meta group's layout and the leaders the nodes report (src/placement/rebalance-plan.ts),
 * then starts the plan's first wave of moves (nothing new while moves are in flight), or, once
 * no move is left, carries out the leader transfers. tickctl calls again until nothing is left,
 * so a crash of the meta leader between rounds loses nothing: the moves are recorded in the meta
 * group and the MoveDriver carries them on.
 *
 * A drain is a rebalance restricted to the draining node: only moves away from it and
 * hand-overs of its leaderships. A forced removal is a drain of a node that is gone: its
 * groups keep a quorum among the live replicas (checked first), so each move adds a learner on
 * a live node, catches it up from the group's leader and swaps it for the dead replica by joint
 * consensus, whose old and new halves both have a live majority.
 */
import { num, str, Violations, type Msg } from '../base/fields.js';
import { groupsHeldBy } from '../placement/membership-state.js';
import { planRebalance, type PlanGroup } from '../placement/rebalance-plan.js';
import type { NodeId } from '../raft/messages.js';
import type { ClusterContext, OpContext } from './cluster-context.js';
import { clusterStatus } from './cluster-status.js';
import { transferLeader } from './leader-transfer.js';
import { MembershipError, proposeMeta } from './membership-admin.js';

/** Replicas per data group the rebalancer keeps (the bootstrap plan's default). */
export const REPLICA_COUNT = 3;

function loadOf(groups: readonly PlanGroup[], nodes: readonly string[]): Msg[] {
  return nodes.map((nodeId) => ({
    nodeId,
    replicas: groups.filter((g) => g.replicas.includes(nodeId)).length,
    leaders: groups.filter((g) => g.leader === nodeId).length,
  }));
}

function moveMsgs(api: ClusterContext): Msg[] {
  return [...api.node.meta.moves.values()].map((m) => ({
    groupId: m.groupId,
    fromNode: m.from,
    toNode: m.to,
    phase: m.phase,
  }));
}

export interface RoundOptions {
  readonly dryRun: boolean;
  readonly maxConcurrentMoves: number;
  /**
   * Restrict the round to emptying these nodes (planned as draining whatever their recorded
   * state): only moves away from them and hand-overs of their leaderships.
   */
  readonly drain?: ReadonlySet<NodeId>;
}

/** One round of rebalancing (or draining); see the module comment. */
export async function rebalanceRound(
  api: ClusterContext,
  ctx: OpContext,
  opts: RoundOptions,
): Promise<Msg> {
  const status = await clusterStatus(api, ctx);
  const leaders = new Map(
    (status['groups'] as Msg[]).map((g) => [g['groupId'] as number, String(g['leader'])]),
  );
  const meta = api.node.meta;
  const drain = opts.drain;
  const members = [...meta.members.values()]
    .filter((m) => m.state !== 'removed')
    .map((m) => ({
      id: m.id,
      state:
        m.state === 'draining' || drain?.has(m.id) === true
          ? ('draining' as const)
          : ('active' as const),
    }));
  const groups: PlanGroup[] = [...meta.groups.values()].map((g) => ({
    id: g.id,
    replicas: g.replicas,
    leader: leaders.get(g.id) ?? '',
  }));
  const plan = planRebalance({
    members,
    groups,
    replicaCount: REPLICA_COUNT,
    maxConcurrentMoves: opts.maxConcurrentMoves,
  });
  // A drain carries out only what empties its nodes; the steps are planned first, in order,
  // so each stays legal without the spreading moves planned after them.
  const moves = drain ? plan.moves.filter((m) => drain.has(m.from)) : plan.moves;
  const transfers = drain ? plan.transfers.filter((t) => drain.has(t.from)) : plan.transfers;
  const active = members
    .filter((m) => m.state === 'active')
    .map((m) => m.id)
    .sort();
  const out = {
    moves: moves.map((m) => ({
      groupId: m.groupId,
      fromNode: m.from,
      toNode: m.to,
      wave: m.wave,
    })),
    transfers: transfers.map((t) => ({ groupId: t.groupId, fromNode: t.from, toNode: t.to })),
    loadNow: loadOf(groups, active),
    loadAfter: loadOf(plan.layoutAfter, active),
    started: [] as Msg[],
    transferred: [] as Msg[],
    inFlight: moveMsgs(api),
  };
  if (opts.dryRun || meta.moves.size > 0) return out;
  if (moves.length > 0) {
    const firstWave = Math.min(...moves.map((m) => m.wave));
    for (const m of moves.filter((x) => x.wave === firstWave)) {
      await proposeMeta(api, { op: 'begin-move', groupId: m.groupId, from: m.from, to: m.to });
      out.started.push({ groupId: m.groupId, fromNode: m.from, toNode: m.to, wave: m.wave });
    }
    return out;
  }
  // Calls of our own to other groups' leaders: a fresh route, the caller's deadline.
  const own: OpContext = { deadlineMs: ctx.deadlineMs, forwarded: false, route: undefined };
  for (const t of transfers) {
    const treq = { groupId: t.groupId, toNode: t.to };
    await api.onGroup(own, t.groupId, 'AdminService', 'TransferLeader', treq, () =>
      transferLeader(api, own, treq),
    );
    out.transferred.push({ groupId: t.groupId, fromNode: t.from, toNode: t.to });
  }
  return out;
}

export function rebalance(api: ClusterContext, ctx: OpContext, req: Msg): Promise<Msg> {
  return rebalanceRound(api, ctx, {
    dryRun: req['dryRun'] === true,
    maxConcurrentMoves: Math.max(1, num(req, 'maxConcurrentMoves') || 1),
  });
}

/** The member a DrainNode or RemoveNode names; NOT_FOUND when there is none. */
function memberOf(api: ClusterContext, req: Msg): { id: NodeId; state: string } {
  const id = str(req, 'nodeId');
  const v = new Violations();
  if (id === '') v.add('nodeId', 'is required');
  v.throwIfAny();
  const m = api.node.meta.members.get(id);
  if (!m) throw new MembershipError('META_NO_MEMBER', `no member ${id}`);
  return m;
}

/** DrainNode on the meta leader: marks the node draining (unless dry_run), then one round. */
export async function drainNode(api: ClusterContext, ctx: OpContext, req: Msg): Promise<Msg> {
  const m = memberOf(api, req);
  if (m.state === 'removed')
    throw new MembershipError('META_MEMBER_REMOVED', `member ${m.id} was removed`);
  const dryRun = req['dryRun'] === true;
  if (!dryRun && m.state === 'active')
    await proposeMeta(api, { op: 'set-member-state', id: m.id, state: 'draining' });
  return rebalanceRound(api, ctx, {
    dryRun,
    maxConcurrentMoves: Math.max(1, num(req, 'maxConcurrentMoves') || 1),
    drain: new Set([m.id]),
  });
}

/**
 * UndrainNode on the meta leader: a draining node becomes active again (so the planner may give
 * it replicas); an active node is left as it is.
 */
export async function undrainNode(api: ClusterContext, req: Msg): Promise<Msg> {
  const m = memberOf(api, req);
  if (m.state === 'removed')
    throw new MembershipError('META_MEMBER_REMOVED', `member ${m.id} was removed`);
  if (m.state === 'draining')
    await proposeMeta(api, { op: 'set-member-state', id: m.id, state: 'active' });
  return { previousState: m.state };
}

/**
 * RemoveNode on the meta leader. Without force the meta group refuses while the node holds a
 * replica. With force (a node gone for good): refused while the node still answers, and when a
 * group it holds has no quorum among its other replicas (no move can commit there: bring one of
 * the dead replicas back instead); otherwise it is marked draining and drained like DrainNode,
 * and removed once it holds nothing.
 */
export async function removeNode(api: ClusterContext, ctx: OpContext, req: Msg): Promise<Msg> {
  const m = memberOf(api, req);
  const meta = api.node.meta;
  const out = {
    removed: false,
    holding: [] as number[],
    started: [] as Msg[],
    inFlight: [] as Msg[],
  };
  if (m.state === 'removed') return { ...out, removed: true };
  const force = req['force'] === true;
  if (force) {
    const status = await clusterStatus(api, ctx);
    const reachable = new Set(
      (status['nodes'] as Msg[]).filter((n) => n['reachable'] === true).map((n) => String(n['id'])),
    );
    if (reachable.has(m.id))
      throw new MembershipError(
        'NODE_STILL_REACHABLE',
        `node ${m.id} still answers; drain it (tickctl cluster drain-node ${m.id}) and remove it without --force, or stop it for good first`,
      );
    const lost: string[] = [];
    for (const groupId of groupsHeldBy(meta, m.id)) {
      const g = meta.groups.get(groupId);
      if (!g) continue;
      const live = g.replicas.filter((r) => r !== m.id && reachable.has(r)).length;
      const quorum = Math.floor(g.replicas.length / 2) + 1;
      if (live < quorum) lost.push(`${groupId} (${live} of ${g.replicas.length} replicas live)`);
    }
    if (lost.length > 0)
      throw new MembershipError(
        'GROUP_QUORUM_LOST',
        `group(s) ${lost.join(', ')} have no quorum without ${m.id}: no replica can be added; restart one of their stopped nodes first`,
      );
  }
  const holding = groupsHeldBy(meta, m.id);
  if (holding.length === 0 || !force) {
    // The meta group refuses (META_MEMBER_HAS_REPLICAS) while the node holds anything.
    await proposeMeta(api, { op: 'set-member-state', id: m.id, state: 'removed' });
    return { ...out, removed: true };
  }
  if (m.state === 'active')
    await proposeMeta(api, { op: 'set-member-state', id: m.id, state: 'draining' });
  const round = await rebalanceRound(api, ctx, {
    dryRun: false,
    maxConcurrentMoves: Math.max(1, num(req, 'maxConcurrentMoves') || 1),
    drain: new Set([m.id]),
  });
  return {
    removed: false,
    holding,
    started: round['started'],
    inFlight: round['inFlight'],
  };
}
