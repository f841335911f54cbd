/**
 * One replica of one group hosted by this node: the RawNode, its durable log, its state
 * machine, and the proposals and reads waiting on it. The host's loop drives it; nothing here
 * does I/O itself.
 */
import type { Rand } from '../base/rand.js';
import type { CompiledRaftConfig } from '../raft/config.js';
import {
  NotLeaderError,
  ProposalDroppedError,
  ProposalUnknownError,
  ReadFailedError,
} from '../raft/errors.js';
import type { LogStorage } from '../raft/log-storage.js';
import type { ConfChange, Entry, Message, NodeId } from '../raft/messages.js';
import type { ProposeResult } from '../raft/raft.js';
import { RawNode } from '../raft/raw-node.js';
import type { Ready } from '../raft/ready.js';

/**
 * A group to create on this node from a state machine's own state at an applied entry (a range
 * split): its initial snapshot is `data` at (`index`, `term`), its voters the parent's.
 */
export interface GroupSpawn {
  readonly groupId: number;
  readonly index: number;
  readonly term: number;
  readonly data: Uint8Array;
}

/** What a group's replicated state machine must offer the runtime. */
export interface GroupStateMachine {
  /**
   * Groups the entries applied since the last call ask to create (optional). The host creates
   * them before it takes any snapshot of this group, so a crash never loses one: until then the
   * entry that asked is still in the log and is applied again at restart.
   */
  takeSpawns?(): GroupSpawn[];
  /** Applies a committed normal entry; the result goes to the proposer. Must be deterministic. */
  apply(entry: Entry): unknown;
  /** The whole state at the last applied index. */
  snapshot(): Uint8Array;
  restore(data: Uint8Array): void;
}

export type InboxItem =
  | { readonly kind: 'msg'; readonly message: Message }
  | { readonly kind: 'snapshot-status'; readonly to: NodeId; readonly ok: boolean }
  | { readonly kind: 'unreachable'; readonly to: NodeId }
  | { readonly kind: 'campaign' }
  /** Leave quiescence (the group has work coming, e.g. runs due soon). */
  | { readonly kind: 'wake' }
  | { readonly kind: 'due-soon'; readonly on: boolean }
  | { readonly kind: 'transfer-leader'; readonly to: NodeId }
  /** A membership change (joint consensus or a learner); `done` hears Raft's verdict. */
  | {
      readonly kind: 'conf-change';
      readonly change: ConfChange;
      readonly done: (result: ProposeResult) => void;
    };

interface Waiter<T> {
  readonly resolve: (value: T) => void;
  readonly reject: (err: Error) => void;
}

/** One proposal call: a single entry (`propose`) or a batch proposed together (`proposeBatch`). */
interface QueuedProposal extends Waiter<unknown> {
  /** The entries; a batch lands at consecutive indexes and settles once. */
  readonly datas: readonly Uint8Array[];
  /** Settles with the array of results (proposeBatch), not the one result (propose). */
  readonly batch: boolean;
}

/**
 * A proposal accepted by Raft at [first, last] in `term`, awaiting those entries' application.
 * Entries of one proposal are appended together, so if any of them is superseded (another entry
 * committed at its index) so is every later one: it committed completely, not at all, or only a
 * prefix (`committed` counts the entries applied with our term).
 */
interface InFlightProposal extends Waiter<unknown> {
  readonly term: number;
  readonly first: number;
  readonly last: number;
  /** Results of the entries applied so far (batches only). */
  readonly results: unknown[] | undefined;
  result: unknown;
  committed: number;
}

export class GroupReplica {
  readonly node: RawNode;
  /**
   * Proposals accepted by Raft, awaiting their entries' application, in log order from
   * `inFlightHead` on (all of one term: a leadership change fails them).
   */
  private inFlight: InFlightProposal[] = [];
  private inFlightHead = 0;
  /** Proposals handed in since the last loop turn; proposed in one batch. */
  private queued: QueuedProposal[] = [];
  private readonly reads = new Map<number, Waiter<void>>();
  private waitingReads: { index: number; waiter: Waiter<void> }[] = [];
  private nextReadId = 1;
  /** Inbound work for the Raft core, handled at the start of the next loop turn. */
  inbox: InboxItem[] = [];
  /**
   * The host's tick count (Ticker.elapsed) when a message from this replica's leader last
   * arrived: a follower counts only the ticks after it (MultiRaftHost.turn).
   */
  leaderHeardAtTick = -1;
  private pendingReadIds: number[] = [];
  appliedIndex: number;
  /**
   * Term of the last applied entry. Equal to the leader's own term once its first entry (the
   * term's no-op) applied: from then on its applied state holds everything earlier leaders
   * committed, which the dispatcher waits for before it acts.
   */
  appliedTerm: number;
  snapshotIndex: number;
  /** Bytes of the snapshot this replica was opened from (0: none). */
  readonly restoredBytes: number;
  snapshotsInstalled = 0;
  /** Entry bytes applied since the last snapshot (the size bound of the log). */
  bytesSinceSnapshot = 0;

  constructor(
    readonly groupId: number,
    readonly nodeId: NodeId,
    readonly log: LogStorage,
    readonly stateMachine: GroupStateMachine,
    config: CompiledRaftConfig,
    rand: Rand,
  ) {
    const snap = log.snapshot();
    this.snapshotIndex = snap?.meta.index ?? 0;
    this.restoredBytes = snap && snap.meta.index > 0 ? snap.data.byteLength : 0;
    if (snap && snap.meta.index > 0) stateMachine.restore(snap.data);
    this.appliedIndex = this.snapshotIndex;
    this.appliedTerm = snap?.meta.term ?? 0;
    this.node = new RawNode({ id: nodeId, storage: log, rand, config, applied: this.appliedIndex });
  }

  get isLeader(): boolean {
    return this.node.raft.role === 'leader';
  }

  get leaderId(): NodeId {
    return this.node.raft.lead;
  }

  /** Whether this replica leads the group and `peer` is another of its members. */
  leadsWith(peer: NodeId): boolean {
    return this.isLeader && peer !== this.node.raft.id && this.node.raft.progress.has(peer);
  }

  enqueueProposal(data: Uint8Array): Promise<unknown> {
    return new Promise((resolve, reject) =>
      this.queued.push({ datas: [data], batch: false, resolve, reject }),
    );
  }

  /**
   * Proposes entries together: they land at consecutive indexes or not at all. Resolves with
   * their results in order once all are applied; rejects like a single proposal, except that a
   * batch of which only a prefix committed (leadership was lost) ends as ProposalUnknownError.
   */
  enqueueProposalBatch(datas: readonly Uint8Array[]): Promise<unknown[]> {
    if (datas.length === 0) return Promise.resolve([]);
    return new Promise((resolve, reject) =>
      this.queued.push({
        datas,
        batch: true,
        resolve: resolve as (value: unknown) => void,
        reject,
      }),
    );
  }

  enqueueRead(): Promise<void> {
    return new Promise((resolve, reject) => {
      const id = this.nextReadId++;
      this.reads.set(id, { resolve, reject });
      this.pendingReadIds.push(id);
    });
  }

  /** Steps queued messages and hands queued proposals and reads to Raft. */
  drain(): void {
    const items = this.inbox;
    this.inbox = [];
    for (const item of items) {
      switch (item.kind) {
        case 'msg':
          this.node.step(item.message);
          break;
        case 'snapshot-status':
          this.node.reportSnapshot(item.to, item.ok);
          break;
        case 'unreachable':
          this.node.reportUnreachable(item.to);
          break;
        case 'campaign':
          if (this.node.raft.lead === '') this.node.campaign();
          break;
        case 'wake':
          if (this.node.isQuiesced()) this.node.wakeUp();
          break;
        case 'due-soon':
          this.node.setDueSoon(item.on);
          break;
        case 'transfer-leader':
          this.node.transferLeader(item.to);
          break;
        case 'conf-change':
          item.done(this.node.proposeConfChange(item.change));
          break;
      }
    }
    if (this.queued.length > 0) {
      const batch = this.queued;
      this.queued = [];
      const datas: Uint8Array[] = [];
      for (const p of batch) for (const d of p.datas) datas.push(d);
      const r = this.node.proposeAll(datas);
      if (r.ok) {
        const tail = this.inFlight[this.inFlight.length - 1];
        // Waiters of an earlier term (a leadership change the Readys did not show): unknown.
        if (tail !== undefined && tail.term !== r.term) this.failInFlight('leadership lost');
        let index = r.index;
        for (const p of batch) {
          const count = p.datas.length;
          this.inFlight.push({
            term: r.term,
            first: index,
            last: index + count - 1,
            results: p.batch ? [] : undefined,
            result: undefined,
            committed: 0,
            resolve: p.resolve,
            reject: p.reject,
          });
          index += count;
        }
      } else {
        const err =
          r.reason === 'not-leader'
            ? new NotLeaderError(this.groupId, r.leaderHint)
            : new ProposalDroppedError(this.groupId, r.reason, r.detail);
        for (const p of batch) p.reject(err);
      }
    }
    if (this.pendingReadIds.length > 0) {
      for (const id of this.pendingReadIds) this.node.readIndex(id);
      this.pendingReadIds = [];
    }
  }

  /** Applies what a persisted Ready delivers: snapshot, committed entries, read states. */
  applyReady(rd: Ready): void {
    if (rd.snapshot) {
      this.stateMachine.restore(rd.snapshot.data);
      this.appliedIndex = rd.snapshot.meta.index;
      this.appliedTerm = rd.snapshot.meta.term;
      this.snapshotIndex = rd.snapshot.meta.index;
      this.snapshotsInstalled++;
      this.bytesSinceSnapshot = 0;
    }
    const inFlight = this.inFlight;
    let head = this.inFlightHead;
    let w = inFlight[head];
    for (const e of rd.committedEntries) {
      let result: unknown = undefined;
      // (Uint8Array length: byteLength, the getter V8 inlines.)
      if (e.type === 'normal' && e.data.length > 0) result = this.stateMachine.apply(e);
      this.appliedIndex = e.index;
      this.appliedTerm = e.term;
      this.bytesSinceSnapshot += e.data.length;
      // Proposals whose entries were passed without being applied (not expected): unknown.
      while (w !== undefined && w.last < e.index) {
        w.reject(new ProposalUnknownError(this.groupId, 'entries not applied one by one'));
        w = inFlight[++head];
      }
      if (w === undefined || e.index < w.first) continue;
      if (e.term === w.term) {
        w.committed++;
        if (w.results !== undefined) w.results.push(result);
        else w.result = result;
      }
      if (e.index !== w.last) continue;
      if (e.term === w.term) w.resolve(w.results ?? w.result);
      // Another entry committed at our index, so ours never will: a definite failure...
      else if (w.committed === 0) w.reject(new ProposalDroppedError(this.groupId, 'superseded'));
      // ... unless earlier entries of the same batch did commit.
      else {
        const count = w.last - w.first + 1;
        w.reject(
          new ProposalUnknownError(
            this.groupId,
            `superseded after ${w.committed} of ${count} entries committed`,
          ),
        );
      }
      w = inFlight[++head];
    }
    if (w === undefined) {
      if (head > 0) {
        this.inFlight = [];
        head = 0;
      }
    } else if (head > 1024 && head * 2 > inFlight.length) {
      this.inFlight = inFlight.slice(head);
      head = 0;
    }
    this.inFlightHead = head;
    for (const s of rd.readStates) {
      const waiter = this.reads.get(s.requestId);
      if (!waiter) continue;
      this.reads.delete(s.requestId);
      if (s.ok) this.waitingReads.push({ index: s.index, waiter });
      else waiter.reject(new ReadFailedError(this.groupId, s.reason, this.leaderId));
    }
    if (this.waitingReads.length > 0) {
      const still: typeof this.waitingReads = [];
      for (const w of this.waitingReads) {
        if (this.appliedIndex >= w.index) w.waiter.resolve();
        else still.push(w);
      }
      this.waitingReads = still;
    }
    if (rd.softState && rd.softState.role !== 'leader') this.failInFlight('leadership lost');
  }

  /** Every waiting proposal ends as unknown: it may still commit under the next leader. */
  failInFlight(reason: string): void {
    const waiters = this.inFlight;
    const head = this.inFlightHead;
    this.inFlight = [];
    this.inFlightHead = 0;
    for (let i = head; i < waiters.length; i++)
      waiters[i]!.reject(new ProposalUnknownError(this.groupId, reason));
  }

  /** Fails everything on shutdown or removal. */
  close(reason: string): void {
    this.failInFlight(reason);
    for (const p of this.queued) p.reject(new ProposalDroppedError(this.groupId, reason));
    this.queued = [];
    for (const w of this.reads.values()) w.reject(new ReadFailedError(this.groupId, reason, ''));
    this.reads.clear();
    for (const w of this.waitingReads)
      w.waiter.reject(new ReadFailedError(this.groupId, reason, ''));
    this.waitingReads = [];
  }

  hasWork(): boolean {
    return this.inbox.length > 0 || this.queued.length > 0 || this.pendingReadIds.length > 0;
  }
}
