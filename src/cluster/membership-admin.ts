/**
 * Cluster membership: adding a node (a member record, then a learner of the meta group), a
 * group's configuration as its leader sees it, proposing a group membership change,
 * and the MoveDriver, which carries every replica move recorded in the meta group through its
 * steps. The driver runs on the meta leader only and keeps nothing it needs in memory: each
 * pass reads the move's phase from the meta group and the group's configuration from the
 * group's leader, and takes the one step that state calls for. So a crash of any node, the meta
 * leader included, leaves a move that the next meta leader resumes (or, before the promote
 * phase, rolls back) from where it stands.
 */
import { TickraftError } from '../base/errors.js';
import { str, Violations, type Msg } from '../base/fields.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import type { MoveRecord } from '../placement/membership-state.js';
import {
  clientAddressOf,
  encodeMetaCommand,
  type MetaCommand,
  type MetaResult,
} from '../placement/meta-state.js';
import { allMembers } from '../raft/conf-change.js';
import { NotLeaderError } from '../raft/errors.js';
import type { ConfChange, ConfChangeSingle, NodeId } from '../raft/messages.js';
import {
  sleep,
  type ClusterContext,
  type ClusterLogger,
  type OpContext,
} from './cluster-context.js';

export class MembershipError extends TickraftError {
  override readonly name = 'MembershipError';
}

const NODE_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const HOST_PORT = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/;

/** Proposes a meta command on this node (the meta leader); a refusal becomes its error code. */
export async function proposeMeta(api: ClusterContext, c: MetaCommand): Promise<void> {
  const r = (await api.node.host.propose(META_GROUP_ID, encodeMetaCommand(c))) as MetaResult;
  if (!r.ok) throw new MembershipError(r.code, r.reason);
}

/** AddNode on the meta leader: the member record, then the node as a meta learner. */
export async function addNodeLocal(api: ClusterContext, req: Msg): Promise<Msg> {
  const id = str(req, 'nodeId');
  const peerAddress = str(req, 'peerAddress');
  const apiAddress = str(req, 'apiAddress');
  const v = new Violations();
  if (!NODE_ID.test(id)) v.add('nodeId', `must match ${NODE_ID.source}`);
  if (!HOST_PORT.test(peerAddress)) v.add('peerAddress', 'must be host:port');
  if (apiAddress !== '' && !HOST_PORT.test(apiAddress)) v.add('apiAddress', 'must be host:port');
  if (apiAddress !== '' && apiAddress === peerAddress)
    v.add('apiAddress', 'must differ from the peer address');
  v.throwIfAny();
  // With peer mutual TLS, a node joins only if it proves a certificate of the cluster's CA on
  // the address the others will dial (a stranger's node is refused before it is recorded).
  await api.node.verifyJoiningPeer(peerAddress);
  await proposeMeta(api, { op: 'add-member', id, peerAddress, apiAddress });
  await ensureConfMember(api, META_GROUP_ID, id);
  return {
    nodes: [...api.node.meta.members.values()].map((m) => ({
      id: m.id,
      peerAddress: m.peerAddress,
      apiAddress: clientAddressOf(m),
      state: m.state,
    })),
  };
}

/**
 * Makes `id` a learner of a group this node leads, unless the configuration already names it;
 * waits (bounded) until the change has applied here.
 */
async function ensureConfMember(api: ClusterContext, groupId: number, id: NodeId): Promise<void> {
  const g = api.node.host.groups.get(groupId);
  for (let i = 0; i < 200; i++) {
    if (!g?.isLeader) throw new NotLeaderError(groupId, g?.leaderId ?? '');
    if (allMembers(g.node.status().confState).has(id)) return;
    const r = await api.node.host.proposeConfChange(groupId, {
      transition: 'simple',
      changes: [{ type: 'add-learner', nodeId: id }],
    });
    if (!r.ok && r.reason === 'not-leader') throw new NotLeaderError(groupId, r.leaderHint);
    // Accepted, or another change is pending: wait for it to apply and look again.
    await sleep(50);
  }
  throw new MembershipError(
    'MEMBERSHIP_CHANGE_REFUSED',
    `node ${id} was not added to group ${groupId} in time; retry`,
  );
}

/** GroupMembership on the group's leader. */
export function groupMembershipLocal(api: ClusterContext, groupId: number): Promise<Msg> {
  const g = api.node.host.groups.get(groupId);
  if (!g?.isLeader) return Promise.reject(new NotLeaderError(groupId, g?.leaderId ?? ''));
  const st = g.node.status();
  return Promise.resolve({
    leader: st.lead,
    term: st.term,
    commitIndex: st.commit,
    voters: st.confState.voters,
    votersOutgoing: st.confState.votersOutgoing,
    learners: st.confState.learners,
    learnersNext: st.confState.learnersNext,
    progress: [...st.progress].map(([nodeId, p]) => ({ nodeId, match: p.match })),
    jobCount: api.node.data.get(groupId)?.scheduler.jobs.size ?? 0,
    fireRatePerSec: api.node.scheduler.fireRatePerSec(groupId),
  });
}

const TRANSITIONS = new Set(['simple', 'auto', 'explicit']);
const CHANGE_TYPES = new Set(['add-voter', 'add-learner', 'remove-node']);

/** ChangeGroupMembership on the group's leader: resolves once Raft accepted the proposal. */
export async function changeGroupMembershipLocal(
  api: ClusterContext,
  groupId: number,
  req: Msg,
): Promise<Msg> {
  const transition = str(req, 'transition');
  const raw = Array.isArray(req['changes']) ? (req['changes'] as Msg[]) : [];
  const v = new Violations();
  if (!TRANSITIONS.has(transition)) v.add('transition', 'must be simple, auto or explicit');
  raw.forEach((c, i) => {
    if (!CHANGE_TYPES.has(str(c, 'type')))
      v.add(`changes[${i}].type`, 'must be add-voter, add-learner or remove-node');
    if (str(c, 'nodeId') === '') v.add(`changes[${i}].nodeId`, 'is required');
  });
  v.throwIfAny();
  const changes = raw.map((c) => ({ type: str(c, 'type'), nodeId: str(c, 'nodeId') }));
  const cc: ConfChange = {
    transition: transition as ConfChange['transition'],
    changes: changes as ConfChangeSingle[],
  };
  const r = await api.node.host.proposeConfChange(groupId, cc);
  if (r.ok) return {};
  if (r.reason === 'not-leader') throw new NotLeaderError(groupId, r.leaderHint);
  throw new MembershipError(
    'MEMBERSHIP_CHANGE_REFUSED',
    `group ${groupId} refused the change: ${r.reason}${r.detail ? ` (${r.detail})` : ''}`,
  );
}

/** What the driver reads of a group: its configuration and each member's progress. */
interface GroupFacts {
  leader: string;
  commitIndex: number;
  voters: string[];
  votersOutgoing: string[];
  learners: string[];
  learnersNext: string[];
  progress: { nodeId: string; match: number }[];
}

/** Voters the meta group keeps when a voter is removed and an active learner can replace it. */
const META_VOTERS_WANTED = 3;

export interface MoveDriverOptions {
  /** How often the meta leader looks at the moves in flight. @default 250 */
  readonly everyMs?: number;
  /** A move still in its learner phase after this long is rolled back. @default 120000 */
  readonly learnerTimeoutMs?: number;
  /** A learner this close (entries) to the commit index counts as caught up. @default 64 */
  readonly catchUpLagEntries?: number;
}

export interface MoveStepEvent {
  readonly groupId: number;
  readonly step: string;
}

export class MoveDriver {
  private timer: NodeJS.Timeout | undefined;
  private readonly busy = new Set<number>();
  /** A change of the meta group's own configuration is being proposed. */
  private metaChanging = false;
  /** When this node first saw each move (its learner phase is bounded from then). */
  private readonly firstSeenMs = new Map<string, number>();
  private readonly everyMs: number;
  private readonly learnerTimeoutMs: number;
  private readonly catchUpLag: number;

  constructor(
    private readonly api: ClusterContext,
    private readonly log: ClusterLogger,
    opts: MoveDriverOptions = {},
  ) {
    this.everyMs = opts.everyMs ?? 250;
    this.learnerTimeoutMs = opts.learnerTimeoutMs ?? 120_000;
    this.catchUpLag = opts.catchUpLagEntries ?? 64;
  }

  start(): void {
    this.timer = setInterval(() => this.pass(), this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private pass(): void {
    const meta = this.api.node.host.groups.get(META_GROUP_ID);
    if (!meta?.isLeader) return;
    this.reconcileMeta();
    for (const mv of this.api.node.meta.moves.values()) {
      if (this.busy.has(mv.groupId)) continue;
      this.busy.add(mv.groupId);
      this.step(mv)
        .catch((err: unknown) => {
          // The next pass looks again (a leader changed, a node is restarting).
          this.log.warn({ group: mv.groupId, err: String(err) }, 'move step failed; will retry');
        })
        .finally(() => this.busy.delete(mv.groupId));
    }
  }

  /**
   * Keeps the meta group's configuration in step with the members: a removed member is taken
   * out of it (a voter is first replaced by a caught-up active learner when fewer than three
   * voters would be left), and a meta leader that is draining or removed hands the meta group to
   * an active voter. One simple change at a time; the next pass looks again, so a crash in
   * between only delays the rest.
   */
  private reconcileMeta(): void {
    const host = this.api.node.host;
    const g0 = host.groups.get(META_GROUP_ID);
    if (this.metaChanging || !g0?.isLeader) return;
    const st = g0.node.status();
    const cs = st.confState;
    const stateOf = (id: NodeId): string | undefined => this.api.node.meta.members.get(id)?.state;
    const caughtUp = (id: NodeId): boolean =>
      (st.progress.get(id)?.match ?? 0) + this.catchUpLag >= st.commit;
    const selfState = stateOf(this.api.node.id);
    if (selfState === 'draining' || selfState === 'removed') {
      const to = cs.voters.find(
        (v) => v !== this.api.node.id && stateOf(v) === 'active' && caughtUp(v),
      );
      if (to !== undefined) host.report(META_GROUP_ID, { kind: 'transfer-leader', to });
      return;
    }
    if (cs.votersOutgoing.length > 0) return;
    const gone = [...allMembers(cs)].filter((id) => stateOf(id) === 'removed').sort();
    const r = gone[0];
    if (r === undefined) return;
    let change: ConfChangeSingle = { type: 'remove-node', nodeId: r };
    const kept = cs.voters.filter((v) => stateOf(v) !== 'removed');
    if (cs.voters.includes(r) && kept.length < META_VOTERS_WANTED) {
      const learner = [...cs.learners].sort().find((l) => stateOf(l) === 'active' && caughtUp(l));
      if (learner !== undefined) change = { type: 'add-voter', nodeId: learner };
    }
    this.metaChanging = true;
    this.log.info({ group: META_GROUP_ID, change }, 'meta configuration follows the members');
    host
      .proposeConfChange(META_GROUP_ID, { transition: 'simple', changes: [change] })
      .then(
        (res) => {
          if (!res.ok) this.log.warn({ group: META_GROUP_ID, res }, 'meta change not accepted yet');
        },
        (err: unknown) => this.log.warn({ err: String(err) }, 'meta change failed; will retry'),
      )
      .finally(() => {
        this.metaChanging = false;
      });
  }

  private ctx(): OpContext {
    return { deadlineMs: Date.now() + 10_000, forwarded: false, route: undefined };
  }

  private async facts(groupId: number): Promise<GroupFacts> {
    const m = await this.api.onGroup(
      this.ctx(),
      groupId,
      'NodeService',
      'GroupMembership',
      { groupId },
      () => groupMembershipLocal(this.api, groupId),
    );
    // Local answers and decoded GroupMembershipResponse messages have this one shape.
    return m as unknown as GroupFacts;
  }

  private async change(
    groupId: number,
    transition: ConfChange['transition'],
    changes: ConfChangeSingle[],
    step: string,
  ): Promise<void> {
    const req = { groupId, transition, changes };
    this.log.info({ group: groupId, step, changes }, 'move: membership change');
    await this.api.onGroup(this.ctx(), groupId, 'NodeService', 'ChangeGroupMembership', req, () =>
      changeGroupMembershipLocal(this.api, groupId, req),
    );
  }

  private async meta(c: MetaCommand, step: string): Promise<void> {
    this.log.info({ group: 'groupId' in c ? c.groupId : undefined, step }, 'move: meta step');
    await proposeMeta(this.api, c);
  }

  /** One step of one move, decided from the recorded phase and the group's configuration. */
  private async step(mv: MoveRecord): Promise<void> {
    const key = `${mv.groupId}:${mv.from}:${mv.to}`;
    const now = Date.now();
    if (!this.firstSeenMs.has(key)) this.firstSeenMs.set(key, now);
    const f = await this.facts(mv.groupId);
    const named = new Set([...f.voters, ...f.votersOutgoing, ...f.learners, ...f.learnersNext]);
    const G = mv.groupId;
    if (mv.phase === 'learner') {
      const target = this.api.node.meta.members.get(mv.to);
      const expired = now - this.firstSeenMs.get(key)! > this.learnerTimeoutMs;
      if (!target || target.state !== 'active' || expired) {
        // Roll back: take the learner out of the group, then forget the move.
        if (named.has(mv.to))
          return this.change(G, 'simple', [{ type: 'remove-node', nodeId: mv.to }], 'rollback');
        this.firstSeenMs.delete(key);
        return this.meta({ op: 'abort-move', groupId: G }, 'abort');
      }
      if (!named.has(mv.to))
        return this.change(G, 'simple', [{ type: 'add-learner', nodeId: mv.to }], 'add-learner');
      const match = f.progress.find((p) => p.nodeId === mv.to)?.match ?? 0;
      if (f.learners.includes(mv.to) && match + this.catchUpLag >= f.commitIndex)
        return this.meta({ op: 'promote-move', groupId: G }, 'promote');
      return;
    }
    // Promote phase: only forward from here.
    if (f.votersOutgoing.length > 0) return this.change(G, 'explicit', [], 'leave-joint');
    const isFinal = f.voters.includes(mv.to) && (mv.from === '' || !named.has(mv.from));
    if (isFinal) {
      this.firstSeenMs.delete(key);
      return this.meta({ op: 'finish-move', groupId: G }, 'finish');
    }
    if (mv.from !== '' && f.leader === mv.from) return this.handOverFrom(G, mv.from, f);
    if (mv.from === '')
      return this.change(G, 'simple', [{ type: 'add-voter', nodeId: mv.to }], 'promote');
    return this.change(
      G,
      'explicit',
      [
        { type: 'add-voter', nodeId: mv.to },
        { type: 'remove-node', nodeId: mv.from },
      ],
      'enter-joint',
    );
  }

  /**
   * The leaving replica leads: hand the group over first (draining its deliveries), to the
   * most caught-up other voter, rather than let it step down when it is removed.
   */
  private async handOverFrom(groupId: number, from: NodeId, f: GroupFacts): Promise<void> {
    let best: string | undefined;
    let bestMatch = -1;
    for (const p of f.progress) {
      if (p.nodeId === from || !f.voters.includes(p.nodeId)) continue;
      if (p.match > bestMatch) {
        best = p.nodeId;
        bestMatch = p.match;
      }
    }
    if (best === undefined) return;
    this.log.info({ group: groupId, from, to: best }, 'move: hand leadership over first');
    const req = { groupId, toNode: best };
    await this.api.onGroup(this.ctx(), groupId, 'AdminService', 'TransferLeader', req, () => {
      this.api.node.scheduler.handOver(groupId, best);
      return Promise.resolve({});
    });
  }
}

/** Validates a MoveReplica request against the meta state; begin-move checks it again. */
export function checkMoveRequest(api: ClusterContext, req: Msg): void {
  const v = new Violations();
  const groupId = req['groupId'];
  if (typeof groupId !== 'number' || !api.node.meta.groups.has(groupId))
    v.add('groupId', `no data group ${String(groupId)}`);
  if (str(req, 'toNode') === '') v.add('toNode', 'is required');
  v.throwIfAny();
}
