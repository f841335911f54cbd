/**
 * One simulated node: a RawNode, its disk (MemoryLogStorage that only changes when a simulated
 * fsync completes), a replicated state machine (the key-value store by default, the scheduler in
 * scheduler-sim.ts), and the runtime loop the real node will run:
 * drain the inbox → take a Ready → persist (taking simulated disk time; nothing else is stepped
 * meanwhile) → send → apply → advance. A crash drops the Ready being persisted, or persists only
 * a prefix of its entries (a torn tail), and loses all in-memory state.
 */
import type { SeededRand } from '../../src/base/rand.js';
import type { MemoryLogStorage } from '../../src/raft/log-storage.js';
import type { ConfChange, Entry, Message, NodeId } from '../../src/raft/messages.js';
import type { Raft, RaftInit } from '../../src/raft/raft.js';
import { RawNode } from '../../src/raft/raw-node.js';
import type { Ready } from '../../src/raft/ready.js';
import { KvStore } from './kv.js';

/**
 * The state machine a node replicates. It lives only in memory: a crash loses it, and boot()
 * makes a fresh one from the latest snapshot on disk.
 */
export interface ReplicatedApp {
  /** Applies one committed normal entry with a payload; the result goes to the proposer. */
  applyEntry(e: Entry): unknown;
  /** Called once the committed entries of a Ready (and its snapshot, if any) are applied. */
  afterApply?(): void;
  snapshot(): Uint8Array;
  /** Replaces the whole state with a snapshot's. */
  restoreFrom(data: Uint8Array): void;
  /** A linearizable read's answer, once the read index is applied. */
  read?(key: string): unknown;
}

export type InboxItem =
  | { kind: 'msg'; m: Message }
  /** `n` > 1 after a stall: every elapsed tick at once, as the real ticker does. */
  | { kind: 'tick'; n?: number }
  /** Runtime work outside Raft (the dispatcher), run between Readys like everything else. */
  | { kind: 'app'; run: () => void }
  | { kind: 'client'; op: ClientOp }
  | { kind: 'report-snap'; to: NodeId; ok: boolean }
  | { kind: 'transfer'; to: NodeId }
  | { kind: 'conf'; cc: ConfChange };

export interface ClientOp {
  readonly opId: number;
  readonly clientId: number;
  readonly kind: 'write' | 'read';
  readonly data: Uint8Array | undefined;
  readonly key: string;
}

export type OpOutcome =
  | { status: 'ok'; output: unknown; index?: number }
  | { status: 'fail'; reason: string; leaderHint?: NodeId }
  | { status: 'unknown'; reason: string };

export interface NodeHooks<A extends ReplicatedApp = KvStore> {
  send(from: SimNode<A>, m: Message): void;
  complete(op: ClientOp, outcome: OpOutcome): void;
  /**
   * A client operation still queued in the inbox when the node crashed: it never reached Raft,
   * and its client sees the connection drop. Without this hook it is silently forgotten.
   */
  onQueuedOpLost?(op: ClientOp): void;
  persistDelayMs(node: SimNode<A>): number;
  now(): number;
  trace(node: NodeId, line: string): void;
  onReady(node: SimNode<A>, rd: Ready): void;
  onApplied(node: SimNode<A>, e: Entry): void;
  onAdvanced(node: SimNode<A>): void;
  schedulePersisted(node: SimNode<A>, incarnation: number, delayMs: number): void;
  /** The app's state now reflects every entry up to `index` (agreement checks). */
  onStateAt?(node: SimNode<A>, index: number): void;
  /** The node took a snapshot of its app at `index`. */
  onSnapshotTaken?(node: SimNode<A>, index: number, data: Uint8Array): void;
}

export interface SimNodeConfig<A extends ReplicatedApp = KvStore> {
  readonly id: NodeId;
  /** A fresh, empty state machine (boot restores the snapshot into it). @default KvStore */
  readonly makeApp?: () => A;
  readonly rand: SeededRand;
  readonly hooks: NodeHooks<A>;
  readonly electionTimeoutTicks: number;
  readonly heartbeatTicks: number;
  readonly snapshotEveryEntries: number;
  readonly maxMsgBytes: number;
  readonly quiesceAfterTicks: number;
  /** RaftOptions.electionJitterTicks; absent: Raft's default (the election timeout). */
  readonly electionJitterTicks?: number;
  readonly makeRaft: ((init: RaftInit) => Raft) | undefined;
}

export class SimNode<A extends ReplicatedApp = KvStore> {
  readonly id: NodeId;
  /** What survives a crash. */
  disk: MemoryLogStorage;
  node: RawNode;
  app!: A;
  /** Term of the last applied entry (or of the snapshot restored): the dispatcher's caughtUp. */
  lastAppliedTerm = 0;
  incarnation = 0;
  up = true;
  private inbox: InboxItem[] = [];
  private persisting: Ready | undefined = undefined;
  private readonly pendingWrites = new Map<number, { term: number; op: ClientOp }>();
  private readonly pendingReads = new Map<number, ClientOp>();
  /** Reads whose index is confirmed, waiting for it to be applied; `since` is a Raft tick. */
  private readonly waitingReads: { index: number; op: ClientOp; since: number }[] = [];
  /** Per-incarnation monotonic cursors, checked by the invariants. */
  lastApplied = 0;
  lastCommit = 0;
  snapshotsTaken = 0;
  snapshotsInstalled = 0;

  constructor(
    private readonly cfg: SimNodeConfig<A>,
    disk: MemoryLogStorage,
  ) {
    this.id = cfg.id;
    this.disk = disk;
    this.node = this.boot();
  }

  /** The key-value store of the KV simulation. */
  get kv(): A {
    return this.app;
  }

  private newApp(): A {
    // Without makeApp the config's type parameter is the default, KvStore.
    return this.cfg.makeApp ? this.cfg.makeApp() : (new KvStore() as unknown as A);
  }

  private boot(): RawNode {
    const snap = this.disk.snapshot();
    this.app = this.newApp();
    if (snap) this.app.restoreFrom(snap.data);
    const applied = snap?.meta.index ?? 0;
    this.lastApplied = applied;
    this.lastAppliedTerm = snap?.meta.term ?? 0;
    this.lastCommit = 0;
    return new RawNode({
      id: this.id,
      storage: this.disk,
      rand: this.cfg.rand.fork(),
      options: {
        electionTimeoutTicks: this.cfg.electionTimeoutTicks,
        ...(this.cfg.electionJitterTicks !== undefined && {
          electionJitterTicks: this.cfg.electionJitterTicks,
        }),
        heartbeatTicks: this.cfg.heartbeatTicks,
        maxInflightMsgs: 16,
        maxMsgBytes: this.cfg.maxMsgBytes,
        quiesceAfterTicks: this.cfg.quiesceAfterTicks,
      },
      applied,
      ...(this.cfg.makeRaft ? { makeRaft: this.cfg.makeRaft } : {}),
    });
  }

  get raft(): Raft {
    return this.node.raft;
  }

  get isBusy(): boolean {
    return this.persisting !== undefined;
  }

  deliver(item: InboxItem): void {
    if (!this.up) return;
    this.inbox.push(item);
    if (!this.persisting) this.run();
  }

  /** Steps everything queued, then starts persisting the next Ready if there is one. */
  private run(): void {
    while (this.up && !this.persisting) {
      const items = this.inbox;
      this.inbox = [];
      for (const item of items) this.handle(item);
      if (!this.node.hasReady()) {
        if (this.inbox.length === 0) return;
        continue;
      }
      const rd = this.node.ready();
      this.persisting = rd;
      this.cfg.hooks.onReady(this, rd);
      const delay = rd.mustSync ? this.cfg.hooks.persistDelayMs(this) : 0;
      this.cfg.hooks.schedulePersisted(this, this.incarnation, delay);
    }
  }

  private handle(item: InboxItem): void {
    const n = this.node;
    switch (item.kind) {
      case 'msg':
        n.step(item.m);
        break;
      case 'tick':
        n.tick(item.n ?? 1);
        this.expireWaitingReads();
        break;
      case 'app':
        item.run();
        break;
      case 'report-snap':
        n.reportSnapshot(item.to, item.ok);
        break;
      case 'transfer': {
        const r = n.transferLeader(item.to);
        this.cfg.hooks.trace(
          this.id,
          `transfer-leader to ${item.to} ${r ? `refused ${r.ok ? '' : r.reason}` : 'started'}`,
        );
        break;
      }
      case 'conf': {
        const r = n.proposeConfChange(item.cc);
        this.cfg.hooks.trace(
          this.id,
          `propose-conf ${JSON.stringify(item.cc)} ${r.ok ? `at ${r.index}` : `refused ${r.reason} ${r.detail ?? ''}`}`,
        );
        break;
      }
      case 'client':
        this.handleClient(item.op);
        break;
    }
  }

  /** Proposes a write; only from inside an inbox item (between Readys), e.g. an 'app' item. */
  proposeWrite(op: ClientOp): void {
    this.handleClient(op);
  }

  private handleClient(op: ClientOp): void {
    if (op.kind === 'read') {
      this.pendingReads.set(op.opId, op);
      this.node.readIndex(op.opId);
      return;
    }
    const r = this.node.propose(op.data!);
    if (r.ok) {
      this.pendingWrites.set(r.index, { term: r.term, op });
    } else {
      this.cfg.hooks.complete(op, { status: 'fail', reason: r.reason, leaderHint: r.leaderHint });
    }
  }

  /** The simulated fsync finished: the Ready is durable; send, apply, advance. */
  persisted(incarnation: number, tornKeep?: number): void {
    if (!this.up || incarnation !== this.incarnation || !this.persisting) return;
    const rd = this.persisting;
    this.writeToDisk(rd, tornKeep);
    for (const m of rd.messages) this.cfg.hooks.send(this, m);
    if (rd.snapshot) {
      this.app.restoreFrom(rd.snapshot.data);
      this.snapshotsInstalled++;
      this.lastApplied = rd.snapshot.meta.index;
      this.lastAppliedTerm = rd.snapshot.meta.term;
      this.cfg.hooks.trace(
        this.id,
        `install-snapshot i${rd.snapshot.meta.index} t${rd.snapshot.meta.term}`,
      );
      this.cfg.hooks.onStateAt?.(this, rd.snapshot.meta.index);
    }
    // Proposers hear of their entries once the whole batch is applied and the app has caught up
    // with it (the dispatcher settles proposals against its derived state).
    const done: [ClientOp, OpOutcome][] = [];
    for (const e of rd.committedEntries) this.apply(e, done);
    if (rd.snapshot || rd.committedEntries.length > 0) this.app.afterApply?.();
    for (const [op, outcome] of done) this.cfg.hooks.complete(op, outcome);
    for (const s of rd.readStates) {
      const op = this.pendingReads.get(s.requestId);
      if (!op) continue;
      this.pendingReads.delete(s.requestId);
      if (s.ok) this.waitingReads.push({ index: s.index, op, since: this.node.raft.ticks });
      else this.cfg.hooks.complete(op, { status: 'fail', reason: s.reason });
    }
    this.serveReads();
    if (rd.softState && rd.softState.role !== 'leader') this.abandonPending('lost leadership');
    this.persisting = undefined;
    this.node.advance();
    this.cfg.hooks.onAdvanced(this);
    this.maybeSnapshot();
    this.run();
  }

  private writeToDisk(rd: Ready, tornKeep?: number): void {
    if (rd.snapshot) this.disk.applySnapshot(rd.snapshot);
    const entries = tornKeep === undefined ? rd.entries : rd.entries.slice(0, tornKeep);
    this.disk.append(entries);
    if (rd.hardState && tornKeep === undefined) this.disk.setHardState(rd.hardState);
  }

  private apply(e: Entry, done: [ClientOp, OpOutcome][]): void {
    this.cfg.hooks.onApplied(this, e);
    this.lastApplied = e.index;
    this.lastAppliedTerm = e.term;
    const pending = this.pendingWrites.get(e.index);
    let result: unknown = true;
    if (e.type === 'normal' && e.data.byteLength > 0) result = this.app.applyEntry(e);
    this.cfg.hooks.onStateAt?.(this, e.index);
    if (pending) {
      this.pendingWrites.delete(e.index);
      if (pending.term === e.term) {
        done.push([pending.op, { status: 'ok', output: result, index: e.index }]);
      } else {
        // Another entry was committed at our index: ours never will be.
        done.push([pending.op, { status: 'fail', reason: 'superseded' }]);
      }
    }
  }

  private serveReads(): void {
    for (let i = 0; i < this.waitingReads.length;) {
      const w = this.waitingReads[i]!;
      if (this.lastApplied >= w.index) {
        this.cfg.hooks.complete(w.op, { status: 'ok', output: this.app.read?.(w.op.key) });
        this.waitingReads.splice(i, 1);
      } else {
        i++;
      }
    }
  }

  /**
   * A read whose index does not get applied within two election timeouts is given up (it had no
   * effect, so the client may retry): this node is cut off from the leader, or was removed from
   * the group without ever applying its removal, and would otherwise leave the client waiting
   * forever. Raft gives up a forwarded read after the same time (expireForwardedReads).
   */
  private expireWaitingReads(): void {
    if (this.waitingReads.length === 0) return;
    const oldest = this.node.raft.ticks - 2 * this.cfg.electionTimeoutTicks;
    for (let i = 0; i < this.waitingReads.length;) {
      const w = this.waitingReads[i]!;
      if (w.since <= oldest) {
        this.waitingReads.splice(i, 1);
        this.cfg.hooks.complete(w.op, {
          status: 'fail',
          reason: `read index ${w.index} not applied in time (applied ${this.lastApplied})`,
        });
      } else {
        i++;
      }
    }
  }

  private abandonPending(reason: string): void {
    for (const { op } of this.pendingWrites.values()) {
      this.cfg.hooks.complete(op, { status: 'unknown', reason });
    }
    this.pendingWrites.clear();
  }

  private maybeSnapshot(): void {
    const applied = this.node.raft.log.applied;
    if (applied - this.disk.firstIndex() + 1 < this.cfg.snapshotEveryEntries) return;
    if (applied > this.disk.lastIndex()) return;
    const data = this.app.snapshot();
    this.disk.createSnapshot(applied, this.node.raft.confState, data);
    this.snapshotsTaken++;
    this.cfg.hooks.onSnapshotTaken?.(this, applied, data);
  }

  /** kill -9: in-memory state is gone; a Ready being persisted is lost or torn. */
  crash(rand: SeededRand): string {
    let what = 'clean';
    if (this.persisting) {
      const rd = this.persisting;
      if (rd.entries.length > 0 && rand.chance(0.5)) {
        // Part of the entries reached the disk: any prefix is possible, the hard state is not.
        const keep = rand.int(rd.entries.length);
        this.writeToDisk(rd, keep);
        what = `torn: kept ${keep}/${rd.entries.length} entries`;
      } else {
        what = `lost unsynced ready (${rd.entries.length} entries)`;
      }
    }
    this.up = false;
    this.persisting = undefined;
    for (const item of this.inbox)
      if (item.kind === 'client') this.cfg.hooks.onQueuedOpLost?.(item.op);
    this.inbox = [];
    for (const { op } of this.pendingWrites.values()) {
      this.cfg.hooks.complete(op, { status: 'unknown', reason: 'node crashed' });
    }
    this.pendingWrites.clear();
    for (const op of this.pendingReads.values())
      this.cfg.hooks.complete(op, { status: 'fail', reason: 'crash' });
    this.pendingReads.clear();
    for (const w of this.waitingReads)
      this.cfg.hooks.complete(w.op, { status: 'fail', reason: 'crash' });
    this.waitingReads.length = 0;
    return what;
  }

  restart(): void {
    this.incarnation++;
    this.up = true;
    this.node = this.boot();
  }

  /** Everything in the log right now (durable and not), for the log-matching check. */
  logTerm(i: number): number | undefined {
    return this.node.raft.log.term(i);
  }
}
