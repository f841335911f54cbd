/**
 * What a node does when the meta group's membership changes: it keeps its peer transport's
 * address book equal to the members, creates an empty replica of a group a move is adding it
 * to (the group's leader then catches it up), and deletes its replica of a group it no longer
 * belongs to (a move took it away, or one to it was abandoned).
 *
 * Deletion is the one irreversible step, so it is decided on a meta state known to be current:
 * after a ReadIndex on the meta group, not on a replica that may still be replaying an old log
 * after a restart. The meta group records a move as finished (or abandoned) only once the
 * group's own configuration no longer names the leaving node, so the data deleted is never
 * needed for a quorum.
 */
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import { groupsHeldBy } from '../placement/membership-state.js';
import type { MetaStateMachine } from '../placement/meta-state.js';
import type { MultiRaftHost } from '../multiraft/host.js';
import type { NodeId } from '../raft/messages.js';
import type { NodeLogger } from './node.js';

export interface PeerBook {
  setPeer(nodeId: NodeId, address: string): void;
  removePeer(nodeId: NodeId): void;
}

export interface MembershipRuntimeOptions {
  readonly selfId: NodeId;
  readonly host: MultiRaftHost;
  readonly meta: MetaStateMachine;
  readonly peers: PeerBook;
  /** --peer-route: where this node dials some peers instead of their advertised address. */
  readonly peerRoutes: ReadonlyMap<NodeId, string>;
  readonly log: NodeLogger;
  /** Whether this node's replica of `parentId` has applied its split into `childId`. */
  readonly splitApplied: (parentId: number, childId: number) => boolean;
}

export class MembershipRuntime {
  /** The meta applied index last acted on; -1 forces another look. */
  private seenMetaIndex = -1;
  private readonly creating = new Set<number>();
  private checkingRemovals = false;
  readonly stats = { replicasCreated: 0, replicasDeleted: 0 };

  constructor(private readonly opts: MembershipRuntimeOptions) {}

  /** After each loop turn: cheap unless the meta group applied something new. */
  afterTurn(): void {
    const { host, meta } = this.opts;
    const g0 = host.groups.get(META_GROUP_ID);
    if (!g0 || !meta.initialized || g0.appliedIndex === this.seenMetaIndex) return;
    this.seenMetaIndex = g0.appliedIndex;
    this.syncPeers();
    this.createReplicas();
    this.maybeDeleteReplicas();
  }

  private syncPeers(): void {
    for (const m of this.opts.meta.members.values()) {
      if (m.id === this.opts.selfId) continue;
      if (m.state === 'removed') this.opts.peers.removePeer(m.id);
      else this.opts.peers.setPeer(m.id, this.opts.peerRoutes.get(m.id) ?? m.peerAddress);
    }
  }

  private createReplicas(): void {
    const { meta, selfId } = this.opts;
    for (const mv of meta.moves.values())
      if (mv.to === selfId) this.createEmpty(mv.groupId, 'replica created for a move to this node');
    // A group split off one this node holds is normally created here by the split entry itself
    // (MultiRaftHost.spawn). A replica that skipped that entry (it installed a snapshot past it,
    // or crashed before creating the child) gets an empty replica that the child's leader
    // catches up.
    // Only once this node's parent replica is past the split (or gone): before that, the split
    // entry is still to apply here and creates the child with its state.
    for (const g of meta.groups.values()) {
      const parent = g.splitFrom;
      if (parent === undefined || !g.replicas.includes(selfId)) continue;
      if (this.opts.host.isHosted(parent) && !this.opts.splitApplied(parent, g.id)) {
        this.seenMetaIndex = -1;
        continue;
      }
      this.createEmpty(g.id, 'empty replica created for a group split off this node');
    }
  }

  private createEmpty(groupId: number, what: string): void {
    const { host, log } = this.opts;
    if (host.isHosted(groupId) || this.creating.has(groupId)) return;
    this.creating.add(groupId);
    host.createGroup(groupId, undefined).then(
      () => {
        this.creating.delete(groupId);
        this.stats.replicasCreated++;
        log.info({ group: groupId }, what);
      },
      (err: unknown) => {
        this.creating.delete(groupId);
        this.seenMetaIndex = -1;
        log.error({ group: groupId, err: String(err) }, 'could not create a replica');
      },
    );
  }

  private unwanted(): number[] {
    const { host, meta, selfId } = this.opts;
    const wanted = new Set(groupsHeldBy(meta, selfId));
    const out: number[] = [];
    for (const groupId of host.groups.keys()) {
      if (groupId === META_GROUP_ID || wanted.has(groupId) || !meta.groups.has(groupId)) continue;
      out.push(groupId);
    }
    return out;
  }

  private maybeDeleteReplicas(): void {
    if (this.checkingRemovals || this.unwanted().length === 0) return;
    this.checkingRemovals = true;
    const { host, log } = this.opts;
    const check = async (): Promise<void> => {
      // Current meta state first: everything committed before now is applied here.
      await host.read(META_GROUP_ID);
      for (const groupId of this.unwanted()) {
        await host.removeGroup(groupId);
        this.stats.replicasDeleted++;
        log.info({ group: groupId }, 'replica deleted: this node no longer holds the group');
      }
    };
    check().then(
      () => {
        this.checkingRemovals = false;
      },
      (err: unknown) => {
        this.checkingRemovals = false;
        // Look again after the next meta change or turn (a read fails while leaders change).
        this.seenMetaIndex = -1;
        log.warn({ err: String(err) }, 'replica deletion postponed');
      },
    );
  }
}
