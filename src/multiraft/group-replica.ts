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
import type { Entry, Message, NodeId } from '../raft/messages.js';
import { RawNode } from '../raft/raw-node.js';
import type { Ready } from '../raft/ready.js';

/** What a group's replicated state machine must offer the runtime. */
export interface GroupStateMachine {
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
  | { readonly kind: 'transfer-leader'; readonly to: NodeId };

interface Waiter<T> {
  resolve(value: T): void;
  reject(err: Error): void;
}

interface QueuedProposal extends Waiter<unknown> {
  readonly data: Uint8Array;
}

export class GroupReplica {
  readonly node: RawNode;
  /** Proposals accepted by Raft, by log index, awaiting the entry applied there. */
  private readonly inFlight = new Map<number, { term: number } & Waiter<unknown>>();
  /** Proposals handed in since the last loop turn; proposed in one batch. */
  private queued: QueuedProposal[] = [];
  private readonly reads = new Map<number, Waiter<void>>();
  private waitingReads: { index: number; waiter: Waiter<void> }[] = [];
  private nextReadId = 1;
  /** Inbound work for the Raft core, handled at the start of the next loop turn. */
  inbox: InboxItem[] = [];
  private pendingReadIds: number[] = [];
  appliedIndex: number;
  snapshotIndex: number;
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
    if (snap && snap.meta.index > 0) stateMachine.restore(snap.data);
    this.appliedIndex = this.snapshotIndex;
    this.node = new RawNode({ id: nodeId, storage: log, rand, config, applied: this.appliedIndex });
  }

  get isLeader(): boolean {
    return this.node.raft.role === 'leader';
  }

  get leaderId(): NodeId {
    return this.node.raft.lead;
  }

  enqueueProposal(data: Uint8Array): Promise<unknown> {
    return new Promise((resolve, reject) => this.queued.push({ data, resolve, reject }));
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
        case 'transfer-leader':
          this.node.transferLeader(item.to);
          break;
      }
    }
    if (this.queued.length > 0) {
      const batch = this.queued;
      this.queued = [];
      const r = this.node.propose(...batch.map((p) => p.data));
      if (r.ok) {
        batch.forEach((p, i) => this.inFlight.set(r.index + i, { term: r.term, ...p }));
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
      this.snapshotIndex = rd.snapshot.meta.index;
      this.snapshotsInstalled++;
      this.bytesSinceSnapshot = 0;
    }
    for (const e of rd.committedEntries) {
      let result: unknown = undefined;
      if (e.type === 'normal' && e.data.byteLength > 0) result = this.stateMachine.apply(e);
      this.appliedIndex = e.index;
      this.bytesSinceSnapshot += e.data.byteLength;
      const waiter = this.inFlight.get(e.index);
      if (!waiter) continue;
      this.inFlight.delete(e.index);
      if (waiter.term === e.term) waiter.resolve(result);
      // Another entry committed at our index, so ours never will: a definite failure.
      else waiter.reject(new ProposalDroppedError(this.groupId, 'superseded'));
    }
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
    for (const w of this.inFlight.values())
      w.reject(new ProposalUnknownError(this.groupId, reason));
    this.inFlight.clear();
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
