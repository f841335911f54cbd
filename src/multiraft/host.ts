/**
 * The node runtime: hosts every group replica of this node and drives them through one loop.
 *
 * One loop turn: tick (all elapsed ticks) → drain each group's inbox, proposals and reads →
 * collect every group's Ready → persist them all in ONE synced write (group commit) → send the
 * messages, batched per peer → apply committed entries → advance → take snapshots where a log
 * has grown past its bound. While a turn awaits the disk, inbound work only queues, so no
 * replica is stepped between its ready() and advance() (the persist-before-send contract).
 */
import { assertionFailed } from '../base/assert.js';
import type { Clock } from '../base/clock.js';
import type { SeededRand } from '../base/rand.js';
import type { CompiledRaftConfig } from '../raft/config.js';
import { NotLeaderError } from '../raft/errors.js';
import type { LogStorage } from '../raft/log-storage.js';
import {
  NO_NODE,
  type ConfChange,
  type Entry,
  type HardState,
  type Message,
  type NodeId,
  type Snapshot,
} from '../raft/messages.js';
import type { ProposeResult } from '../raft/raft.js';
import type { Ready } from '../raft/ready.js';
import {
  GroupReplica,
  type GroupSpawn,
  type GroupStateMachine,
  type InboxItem,
} from './group-replica.js';
import { Ticker } from './ticker.js';

export interface GroupMessage {
  readonly groupId: number;
  readonly message: Message;
}

export interface GroupUpdate {
  readonly groupId: number;
  readonly entries: readonly Entry[];
  readonly hardState?: HardState | undefined;
  readonly snapshot?: Snapshot | undefined;
}

export interface CommitStats {
  readonly groups: number;
  readonly entries: number;
  readonly bytes: number;
  readonly fsyncMs: number;
}

/** The durable store as the host uses it (src/storage's NodeStore). */
export interface HostStore {
  groupIds(): number[];
  group(groupId: number): LogStorage | undefined;
  createGroup(
    groupId: number,
    bootstrap: { voters: readonly NodeId[]; learners?: readonly NodeId[] } | undefined,
  ): Promise<LogStorage>;
  commit(updates: GroupUpdate[], options?: { sync?: boolean }): Promise<CommitStats>;
  saveSnapshot(groupId: number, snapshot: Snapshot): Promise<void>;
  deleteGroup(groupId: number): Promise<void>;
}

/** The peer transport as the host uses it (src/transport's PeerTransport). */
export interface HostTransport {
  send(to: NodeId, msgs: GroupMessage[]): void;
}

export interface HostOptions {
  readonly nodeId: NodeId;
  readonly store: HostStore;
  readonly clock: Clock;
  readonly rand: SeededRand;
  readonly raft: CompiledRaftConfig;
  /** Per-group override of the Raft config (e.g. the meta group never quiesces). */
  readonly raftFor?: (groupId: number) => CompiledRaftConfig;
  readonly tickMs: number;
  readonly makeStateMachine: (groupId: number) => GroupStateMachine;
  /** Take a snapshot and compact once this many entries were applied since the last one, */
  readonly snapshotEveryEntries: number;
  /** … or once this many entry bytes were. */
  readonly snapshotEveryBytes: number;
  /** Called once when the loop hits an error it cannot survive (a storage failure). */
  readonly onFatal: (err: unknown) => void;
  /** A turn at least this long (ms) is reported to onSlowTurn; 0 reports none. */
  readonly slowTurnMs?: number;
  /**
   * Applying a turn's Readies and its afterTurn hook yield the event loop (through yieldToLoop)
   * once this many ms ran since the last yield (0: after every group); undefined: never.
   */
  readonly applySliceMs?: number;
  /** Lets the runtime's other work run (a setImmediate; the simulator's event queue). */
  readonly yieldToLoop?: () => Promise<void>;
}

export interface LoopStats {
  turns: number;
  commits: number;
  entriesPersisted: number;
  fsyncMsTotal: number;
  messagesSent: number;
  /** Heartbeats sent while a turn awaited the disk or yielded (beatWhileHeld). */
  heartbeatsWhileHeld: number;
  /** Times a turn yielded the event loop between slices of its apply (applySliceMs). */
  applySlices: number;
  /** Times a turn after a stall yielded once so that what peers sent meanwhile is read first. */
  stallYields: number;
  snapshotsTaken: number;
  /** Snapshots taken: bytes, and time encoding the state (the loop waits) and writing it. */
  snapshotBytesTotal: number;
  snapshotEncodeMsTotal: number;
  snapshotEncodeMsMax: number;
  snapshotWriteMsTotal: number;
  /** Snapshots loaded when the groups were opened (start-up): bytes and time to restore. */
  snapshotsRestored: number;
  snapshotRestoreBytes: number;
  snapshotRestoreMs: number;
}

/**
 * Where one loop turn's time went, in ms of the host's clock: reported for a turn that held the
 * loop long enough to matter to elections (HostOptions.slowTurnMs). `stepMs` covers draining
 * inboxes, ticking and collecting Readies; `applyMs` applying committed entries; `snapshotMs`
 * encoding and writing a snapshot (of `snapshotGroup`); `afterTurnMs` the layers' afterTurn hook
 * (the scheduler's planning and hand-out). `applyMs` and `afterTurnMs` include the time the turn
 * yielded to other work between slices (applySliceMs).
 */
export interface SlowTurn {
  readonly totalMs: number;
  readonly stepMs: number;
  readonly persistMs: number;
  readonly sendMs: number;
  readonly applyMs: number;
  readonly snapshotMs: number;
  readonly snapshotGroup: number | undefined;
  readonly afterTurnMs: number;
  readonly groupsReady: number;
  readonly entriesApplied: number;
  readonly ticks: number;
  /** Times the turn yielded the event loop (apply slices): 0 = it held the loop throughout. */
  readonly slices: number;
  /** The group whose apply took longest, without a yield: ms, entries and their data bytes. */
  readonly longestApply: {
    readonly ms: number;
    readonly groupId: number;
    readonly entries: number;
    readonly bytes: number;
  };
}

/** One group's snapshot taken by snapshotNow(). */
export interface SnapshotTiming {
  readonly groupId: number;
  readonly index: number;
  readonly bytes: number;
  readonly encodeMs: number;
  readonly writeMs: number;
}

export class MultiRaftHost {
  readonly nodeId: NodeId;
  readonly groups = new Map<number, GroupReplica>();
  transport: HostTransport | undefined;
  readonly stats: LoopStats = {
    turns: 0,
    commits: 0,
    entriesPersisted: 0,
    fsyncMsTotal: 0,
    messagesSent: 0,
    heartbeatsWhileHeld: 0,
    applySlices: 0,
    stallYields: 0,
    snapshotsTaken: 0,
    snapshotBytesTotal: 0,
    snapshotEncodeMsTotal: 0,
    snapshotEncodeMsMax: 0,
    snapshotWriteMsTotal: 0,
    snapshotsRestored: 0,
    snapshotRestoreBytes: 0,
    snapshotRestoreMs: 0,
  };
  /** snapshotNow()'s pass: the groups still to snapshot, what was taken, who waits. */
  private snapshotForced:
    | { groups: Set<number>; taken: SnapshotTiming[]; waiters: ((t: SnapshotTiming[]) => void)[] }
    | undefined;
  private readonly ticker: Ticker;
  private running = false;
  private again = false;
  private scheduled = false;
  private interval: NodeJS.Timeout | undefined;
  private stopped = false;
  /** A turn awaits the disk or yields between slices (see beatWhileHeld). */
  private held = false;
  /** When this node last sent its leaders' heartbeats (or any turn's messages). */
  private beatAtMs = Number.NEGATIVE_INFINITY;
  /** holdElections(): only leaders are ticked, so no replica here starts an election. */
  private electionsHeld = false;
  private idleWaiters: (() => void)[] = [];
  /** Replicas to delete at the start of the next turn (see removeGroup). */
  private removals: { groupId: number; done: () => void; fail: (err: unknown) => void }[] = [];
  /** Hooks for layers above: called after each turn's apply (e.g. to react to role changes). */
  afterTurn: (() => void) | undefined;
  /** Called once a group's replica was deleted from this node (removeGroup). */
  onGroupRemoved: ((groupId: number) => void) | undefined;
  /** Called once a group was created on this node from another group's state (a split). */
  onGroupSpawned: ((groupId: number, parentId: number) => void) | undefined;
  /** Called with a turn that took at least HostOptions.slowTurnMs, once it is done. */
  onSlowTurn: ((turn: SlowTurn) => void) | undefined;
  /** Metrics hook: called with each group commit's stats (the store's object, not a copy). */
  onCommit: ((stats: CommitStats) => void) | undefined;

  constructor(private readonly opts: HostOptions) {
    this.nodeId = opts.nodeId;
    this.ticker = new Ticker(opts.clock, opts.tickMs);
  }

  /** Loads every group the store holds. */
  openGroups(): void {
    for (const id of this.opts.store.groupIds()) this.attach(id);
  }

  private attach(groupId: number): GroupReplica {
    const log = this.opts.store.group(groupId);
    if (log === undefined) assertionFailed(`group ${groupId} has no storage`);
    const t0 = this.opts.clock.monotonicMs();
    const g = new GroupReplica(
      groupId,
      this.nodeId,
      log,
      this.opts.makeStateMachine(groupId),
      this.opts.raftFor?.(groupId) ?? this.opts.raft,
      this.opts.rand.fork(),
    );
    if (g.snapshotIndex > 0) {
      this.stats.snapshotsRestored++;
      this.stats.snapshotRestoreBytes += g.restoredBytes;
      this.stats.snapshotRestoreMs += this.opts.clock.monotonicMs() - t0;
    }
    this.groups.set(groupId, g);
    return g;
  }

  /**
   * Takes a snapshot of every group with entries applied since its last one (one a turn, from
   * the next) and resolves with what each cost: what an operator's compaction or a benchmark's
   * snapshot measure asks for. A call during a pass joins it. Resolves with what was taken so far
   * once the host is stopped.
   */
  snapshotNow(): Promise<SnapshotTiming[]> {
    if (this.stopped) return Promise.resolve([]);
    const p = new Promise<SnapshotTiming[]>((resolve) => {
      if (this.snapshotForced === undefined)
        this.snapshotForced = { groups: new Set(this.groups.keys()), taken: [], waiters: [] };
      this.snapshotForced.waiters.push(resolve);
    });
    this.wake();
    return p;
  }

  /** Creates a replica: with `bootstrap` a member of a new group, without an empty joiner. */
  async createGroup(
    groupId: number,
    bootstrap: { voters: readonly NodeId[]; learners?: readonly NodeId[] } | undefined,
  ): Promise<GroupReplica> {
    const existing = this.groups.get(groupId);
    if (existing) return existing;
    await this.opts.store.createGroup(groupId, bootstrap);
    const g = this.attach(groupId);
    this.wake();
    return g;
  }

  /**
   * Deletes this node's replica of a group (it no longer belongs here): the replica is closed
   * (waiting proposals and reads fail) and its log, hard state and snapshot are deleted. Done at
   * the start of a turn, so no Ready of the group is between ready() and advance().
   */
  removeGroup(groupId: number): Promise<void> {
    if (!this.groups.has(groupId)) return Promise.resolve();
    const p = new Promise<void>((done, fail) => this.removals.push({ groupId, done, fail }));
    this.wake();
    return p;
  }

  /** Proposes a membership change to a group this node leads; resolves with Raft's verdict. */
  proposeConfChange(groupId: number, change: ConfChange): Promise<ProposeResult> {
    const g = this.groups.get(groupId);
    if (!g) return Promise.reject(new NotLeaderError(groupId, '', 'group not hosted on this node'));
    const p = new Promise<ProposeResult>((done) =>
      g.inbox.push({ kind: 'conf-change', change, done }),
    );
    this.wake();
    return p;
  }

  isHosted(groupId: number): boolean {
    return this.groups.has(groupId);
  }

  start(): void {
    this.interval = setInterval(() => this.wake(), this.opts.tickMs);
    this.wake();
  }

  /**
   * From now on no replica here starts an election on its own (a node that is stopping): only
   * leaders are ticked, so they keep their heartbeats, check-quorum and transfer time-outs,
   * while followers' election timers stand still. A replica still votes, and still campaigns
   * when a leader hands it the group (timeout-now) or the node asks it to.
   */
  holdElections(): void {
    this.electionsHeld = true;
  }

  /** Stops the loop after the current turn; pending work fails. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.interval) clearInterval(this.interval);
    await this.idle();
    for (const g of this.groups.values()) g.close('node stopping');
    const forced = this.snapshotForced;
    this.snapshotForced = undefined;
    for (const w of forced?.waiters ?? []) w(forced?.taken ?? []);
  }

  /** Resolves when no turn is running. */
  idle(): Promise<void> {
    if (!this.running && !this.scheduled) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  // -------------------------------------------------------------------------------------
  // Inputs

  /** Queues a received frame's messages for their groups (a frame of one peer: `from`). */
  deliver(_from: NodeId, msgs: readonly GroupMessage[]): void {
    let atTick = -1;
    for (const { groupId, message } of msgs) {
      const g = this.groups.get(groupId);
      if (!g) continue;
      g.inbox.push({ kind: 'msg', message });
      if (message.from === g.node.raft.lead) {
        if (atTick < 0) atTick = this.ticker.elapsed();
        g.leaderHeardAtTick = atTick;
      }
    }
    this.wake();
  }

  report(groupId: number, item: InboxItem): void {
    const g = this.groups.get(groupId);
    if (!g) return;
    g.inbox.push(item);
    this.wake();
  }

  /**
   * `peer` is up (a new stream from it: a restart, a healed partition). Every quiet group led
   * here that it is a member of wakes and heartbeats at once, so the peer learns its leaders
   * and commit indexes now rather than at the next beacon, three election timeouts away.
   * Returns how many groups were woken.
   */
  wakeGroupsLedWith(peer: NodeId): number {
    return this.wakeGroups((g) => g.leadsWith(peer));
  }

  /**
   * `peer`'s stream here ended or broke (it crashed or stopped, or the network failed). Every
   * quiet group hosted here that `peer` leads wakes and campaigns at once instead of after three
   * missed beacons. Pre-vote keeps a live leader in place: the other followers, which still hear
   * it, refuse. Returns how many groups were woken.
   */
  wakeGroupsLedBy(peer: NodeId): number {
    return this.wakeGroups((g) => !g.isLeader && g.leaderId === peer);
  }

  /** Reports 'wake' to every group `which` picks (a no-op for one that is not quiet). */
  private wakeGroups(which: (g: GroupReplica) => boolean): number {
    let woken = 0;
    for (const g of this.groups.values()) {
      if (!which(g)) continue;
      g.inbox.push({ kind: 'wake' });
      woken++;
    }
    if (woken > 0) this.wake();
    return woken;
  }

  /**
   * Ticks of wall time the groups have not been ticked for yet. After a stall (a SIGSTOP, a long
   * GC pause) Raft still believes in a lease that the clock says has run out, until the next
   * turn ticks it; whoever acts on the lease checks this first.
   */
  ticksBehind(): number {
    return this.ticker.pending();
  }

  propose(groupId: number, data: Uint8Array): Promise<unknown> {
    const g = this.groups.get(groupId);
    if (!g) return Promise.reject(new NotLeaderError(groupId, '', 'group not hosted on this node'));
    const p = g.enqueueProposal(data);
    this.wake();
    return p;
  }

  /**
   * Proposes entries as one batch (consecutive indexes, all or none appended); resolves with
   * their results once all are applied. See GroupReplica.enqueueProposalBatch for failures.
   */
  proposeBatch(groupId: number, datas: readonly Uint8Array[]): Promise<unknown[]> {
    const g = this.groups.get(groupId);
    if (!g) return Promise.reject(new NotLeaderError(groupId, '', 'group not hosted on this node'));
    const p = g.enqueueProposalBatch(datas);
    this.wake();
    return p;
  }

  /** Resolves once this replica has applied everything committed before the call (ReadIndex). */
  read(groupId: number): Promise<void> {
    const g = this.groups.get(groupId);
    if (!g) return Promise.reject(new NotLeaderError(groupId, '', 'group not hosted on this node'));
    const p = g.enqueueRead();
    this.wake();
    return p;
  }

  // -------------------------------------------------------------------------------------
  // The loop

  wake(): void {
    if (this.stopped && !this.running) return;
    if (this.running) {
      this.again = true;
      if (this.held) this.beatWhileHeld();
      return;
    }
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.loop().catch((err: unknown) => this.opts.onFatal(err));
    });
  }

  private async loop(): Promise<void> {
    this.running = true;
    try {
      do {
        this.again = false;
        await this.turn();
      } while (this.again && !this.stopped);
    } finally {
      this.running = false;
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }

  private async turn(): Promise<void> {
    this.stats.turns++;
    const clock = this.opts.clock;
    const t0 = clock.monotonicMs();
    const slicesAtStart = this.stats.applySlices;
    if (this.removals.length > 0) await this.removeNow();
    // After a stall (a turn that held the loop, a collection), what peers sent meanwhile may
    // still be unread in the sockets: one yield lets the transport queue it before the stall's
    // ticks are counted against the groups.
    if (this.ticker.pending() > 1 && this.opts.yieldToLoop !== undefined) {
      this.stats.stallYields++;
      await this.heldBy(this.opts.yieldToLoop());
    }
    const ticks = this.ticker.due();
    const fromTick = this.ticker.done - ticks;
    const readies: [GroupReplica, Ready][] = [];
    const updates: GroupUpdate[] = [];
    for (const g of this.groups.values()) {
      // Messages first, then time: after a stall the inbox holds the heartbeats and the
      // acknowledgements that arrived during it, and a leader that ticked past its check-quorum
      // window before reading them would step down although its peers were there all along.
      // The lease does not move: it counts from when a heartbeat round was sent, not from when
      // its acknowledgements are read. A follower counts only the ticks since its leader was
      // last heard: the ticks of the stall before that message are not silence, and counting
      // them after it would start a campaign against a leader that never went quiet.
      // Undercounting a follower's time is safe: it only delays its campaign, and its refusal
      // of votes while it still hears its leader lasts longer, never shorter.
      g.drain();
      let n = ticks;
      if (!g.isLeader && g.leaderHeardAtTick > fromTick)
        n = Math.max(0, this.ticker.done - g.leaderHeardAtTick);
      if (n > 0 && (!this.electionsHeld || g.isLeader)) g.node.tick(n);
      if (!g.node.hasReady()) continue;
      const rd = g.node.ready();
      readies.push([g, rd]);
      if (rd.entries.length > 0 || rd.hardState || rd.snapshot) {
        // One shape for every update (no spreads of optional fields).
        updates.push({
          groupId: g.groupId,
          entries: rd.entries,
          hardState: rd.hardState,
          snapshot: rd.snapshot,
        });
      }
    }
    if (readies.length === 0) {
      // An idle (quiesced) node still answers snapshotNow().
      if (this.snapshotForced !== undefined) await this.maybeSnapshot();
      return;
    }
    const tStepped = clock.monotonicMs();
    if (updates.length > 0) {
      const sync = readies.some(([, rd]) => rd.mustSync);
      const s = await this.heldBy(this.opts.store.commit(updates, { sync }));
      this.stats.commits++;
      this.stats.entriesPersisted += s.entries;
      this.stats.fsyncMsTotal += s.fsyncMs;
      this.onCommit?.(s);
    }
    const tPersisted = clock.monotonicMs();
    this.sendAll(readies);
    const tSent = clock.monotonicMs();
    let entriesApplied = 0;
    let sliceAtMs = tSent;
    const longest = { ms: 0, groupId: 0, entries: 0, bytes: 0 };
    for (const [g, rd] of readies) {
      entriesApplied += rd.committedEntries.length;
      const applyFromMs = clock.monotonicMs();
      g.applyReady(rd);
      g.node.advance();
      const applyMs = clock.monotonicMs() - applyFromMs;
      if (applyMs > longest.ms) {
        longest.ms = applyMs;
        longest.groupId = g.groupId;
        longest.entries = rd.committedEntries.length;
        longest.bytes = 0;
        for (const e of rd.committedEntries) longest.bytes += e.data.length;
      }
      sliceAtMs = await this.endSlice(sliceAtMs);
    }
    for (const [g, rd] of readies) {
      if (rd.committedEntries.length === 0 || g.stateMachine.takeSpawns === undefined) continue;
      for (const s of g.stateMachine.takeSpawns()) await this.spawn(g, s);
    }
    const tApplied = clock.monotonicMs();
    const snapshotGroup = await this.maybeSnapshot();
    const tSnapshot = clock.monotonicMs();
    await this.endSlice(sliceAtMs);
    this.afterTurn?.();
    const tEnd = clock.monotonicMs();
    const slowMs = this.opts.slowTurnMs ?? 0;
    if (slowMs > 0 && tEnd - t0 >= slowMs && this.onSlowTurn !== undefined)
      this.onSlowTurn({
        totalMs: tEnd - t0,
        stepMs: tStepped - t0,
        persistMs: tPersisted - tStepped,
        sendMs: tSent - tPersisted,
        applyMs: tApplied - tSent,
        snapshotMs: tSnapshot - tApplied,
        snapshotGroup,
        afterTurnMs: tEnd - tSnapshot,
        groupsReady: readies.length,
        entriesApplied,
        ticks,
        slices: this.stats.applySlices - slicesAtStart,
        longestApply: longest,
      });
    // Advancing can produce more work (self-acknowledged commits, auto-leave): go again.
    for (const [g] of readies) {
      if (g.node.hasReady() || g.hasWork()) {
        this.again = true;
        break;
      }
    }
  }

  /**
   * Creates a group from a parent's state at an applied entry (a range split): its storage
   * holds that state as its first snapshot, with the parent's voters, and a hard state at the
   * entry's term, so its first election is in a later term than the parent's at the split
   * (fencing tokens keep rising per job). Every replica of the parent does the same at the
   * same index, so the new group needs no data sent over the network. A group already here (a
   * replay after a restart, or an empty replica the membership runtime created) is left alone.
   * The parent's leader campaigns for the child at once, so it is not leaderless for an
   * election timeout.
   */
  private async spawn(parent: GroupReplica, s: GroupSpawn): Promise<void> {
    if (this.groups.has(s.groupId)) return;
    const store = this.opts.store;
    const cs = parent.node.raft.confState;
    if (cs.votersOutgoing.length !== 0)
      assertionFailed(`group ${parent.groupId} split while its configuration is joint`);
    if (store.group(s.groupId) === undefined) await store.createGroup(s.groupId, undefined);
    if (store.group(s.groupId)!.lastIndex() < s.index) {
      const snapshot: Snapshot = {
        meta: {
          index: s.index,
          term: s.term,
          confState: { ...cs, learners: [], learnersNext: [], autoLeave: false },
        },
        data: s.data,
      };
      await store.commit([
        {
          groupId: s.groupId,
          entries: [],
          hardState: { term: s.term, vote: NO_NODE, commit: s.index },
          snapshot,
        },
      ]);
    }
    const child = this.attach(s.groupId);
    if (parent.isLeader) child.inbox.push({ kind: 'campaign' });
    this.onGroupSpawned?.(s.groupId, parent.groupId);
  }

  private async removeNow(): Promise<void> {
    const removals = this.removals;
    this.removals = [];
    for (const r of removals) {
      const g = this.groups.get(r.groupId);
      if (g) {
        this.groups.delete(r.groupId);
        g.close('replica removed from this node');
      }
      try {
        await this.opts.store.deleteGroup(r.groupId);
        this.onGroupRemoved?.(r.groupId);
        r.done();
      } catch (err) {
        r.fail(err);
        throw err;
      }
    }
  }

  /** Awaits a disk write (or a yield) during which beatWhileHeld() keeps our leaders heard. */
  private async heldBy<T>(write: Promise<T>): Promise<T> {
    this.held = true;
    try {
      return await write;
    } finally {
      this.held = false;
    }
  }

  /**
   * Ends a slice of the turn's synchronous work once applySliceMs ran since `sinceMs`: yields the
   * event loop, so that a turn applying hundreds of milliseconds of commands does not hold it
   * whole. Meanwhile inbound work only queues, as while the turn awaits the disk (the groups
   * not yet applied stay between ready() and advance()), timers run, and beatWhileHeld() keeps
   * this node's leaders heard. Returns when the next slice starts.
   */
  private async endSlice(sinceMs: number): Promise<number> {
    const sliceMs = this.opts.applySliceMs;
    const yieldToLoop = this.opts.yieldToLoop;
    if (sliceMs === undefined || yieldToLoop === undefined) return sinceMs;
    if (this.opts.clock.monotonicMs() - sinceMs < sliceMs) return sinceMs;
    this.stats.applySlices++;
    await this.heldBy(yieldToLoop());
    return this.opts.clock.monotonicMs();
  }

  /**
   * Called on every wake (the tick interval, arriving messages) while a turn awaits the disk or
   * yields between slices. Nothing is stepped then, so the loop's own heartbeats stop, and a
   * synced write that takes longer than an election timeout (a disk flushing, LevelDB
   * compacting) would make every follower of this node's leaders campaign although the leader is
   * alive and well. So once a heartbeat interval has passed since this node last sent (a turn's
   * messages, or such a beat), each leader here sends its followers a heartbeat that changes no
   * Raft state (Raft.heartbeatsWithoutRound). Only leaders whose own term's first entry is
   * applied: their term is on disk, and nothing in the write being awaited can be what makes
   * them leader.
   */
  private beatWhileHeld(): void {
    if (this.transport === undefined) return;
    const now = this.opts.clock.monotonicMs();
    if (now - this.beatAtMs < this.opts.raft.heartbeatTicks * this.opts.tickMs) return;
    // Also when no group here leads: the next look is a heartbeat interval away.
    this.beatAtMs = now;
    const beats: [GroupReplica, readonly Message[]][] = [];
    for (const g of this.groups.values()) {
      const raft = g.node.raft;
      if (raft.role === 'leader' && g.appliedTerm === raft.term)
        beats.push([g, raft.heartbeatsWithoutRound()]);
    }
    this.stats.heartbeatsWhileHeld += this.sendByPeer(beats);
  }

  private sendAll(readies: readonly [GroupReplica, Ready][]): void {
    this.sendByPeer(readies.map(([g, rd]) => [g, rd.messages]));
  }

  /**
   * Sends each group's messages, one batch per peer, and returns how many went. Heartbeats go
   * out among a turn's messages whenever a leader's is due, so any send counts as a beat.
   */
  private sendByPeer(groups: readonly [GroupReplica, readonly Message[]][]): number {
    const transport = this.transport;
    const byPeer = new Map<NodeId, GroupMessage[]>();
    for (const [g, messages] of groups) {
      for (const message of messages) {
        let list = byPeer.get(message.to);
        if (!list) byPeer.set(message.to, (list = []));
        list.push({ groupId: g.groupId, message });
      }
    }
    if (!transport || byPeer.size === 0) return 0;
    this.beatAtMs = this.opts.clock.monotonicMs();
    let sent = 0;
    for (const [peer, msgs] of byPeer) {
      sent += msgs.length;
      transport.send(peer, msgs);
    }
    this.stats.messagesSent += sent;
    return sent;
  }

  /**
   * Takes at most one group's snapshot per turn, so that the loop ticks, sends heartbeats and
   * applies between them: encoding a group of hundreds of thousands of jobs holds the loop for
   * a few hundred milliseconds, and a turn that took every due group's in a row could hold it
   * past an election timeout. A snapshotNow() group goes first.
   */
  private async maybeSnapshot(): Promise<number | undefined> {
    const forced = this.snapshotForced;
    let g: GroupReplica | undefined;
    if (forced !== undefined) {
      for (const id of forced.groups) {
        forced.groups.delete(id);
        const candidate = this.groups.get(id);
        if (candidate !== undefined && candidate.appliedIndex > candidate.snapshotIndex) {
          g = candidate;
          break;
        }
      }
    }
    if (g === undefined)
      for (const candidate of this.groups.values())
        if (
          candidate.appliedIndex - candidate.snapshotIndex >= this.opts.snapshotEveryEntries ||
          (candidate.bytesSinceSnapshot >= this.opts.snapshotEveryBytes &&
            candidate.appliedIndex > candidate.snapshotIndex)
        ) {
          g = candidate;
          break;
        }
    if (g !== undefined) {
      const timing = await this.snapshotOf(g);
      forced?.taken.push(timing);
      // Another group may be due: a turn of its own.
      this.again = true;
    }
    if (forced !== undefined && forced.groups.size === 0) {
      this.snapshotForced = undefined;
      for (const w of forced.waiters) w(forced.taken);
    }
    return g?.groupId;
  }

  private async snapshotOf(g: GroupReplica): Promise<SnapshotTiming> {
    const index = g.appliedIndex;
    const term = g.log.term(index) ?? g.node.raft.log.term(index);
    if (term === undefined)
      assertionFailed(`group ${g.groupId}: no term for applied index ${index}`);
    const t0 = this.opts.clock.monotonicMs();
    const snapshot: Snapshot = {
      meta: { index, term, confState: g.node.raft.confState },
      data: g.stateMachine.snapshot(),
    };
    const t1 = this.opts.clock.monotonicMs();
    await this.heldBy(this.opts.store.saveSnapshot(g.groupId, snapshot));
    const t2 = this.opts.clock.monotonicMs();
    g.snapshotIndex = index;
    g.bytesSinceSnapshot = 0;
    const timing: SnapshotTiming = {
      groupId: g.groupId,
      index,
      bytes: snapshot.data.byteLength,
      encodeMs: t1 - t0,
      writeMs: t2 - t1,
    };
    this.stats.snapshotsTaken++;
    this.stats.snapshotBytesTotal += timing.bytes;
    this.stats.snapshotEncodeMsTotal += timing.encodeMs;
    this.stats.snapshotEncodeMsMax = Math.max(this.stats.snapshotEncodeMsMax, timing.encodeMs);
    this.stats.snapshotWriteMsTotal += timing.writeMs;
    return timing;
  }
}
