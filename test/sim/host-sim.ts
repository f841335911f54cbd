/**
 * The host simulation: the production node runtime under deterministic simulation. Each of
 * three nodes is a real MultiRaftHost (src/multiraft) over a real NodeStore (src/storage), whose
 * LevelDB is replaced by a SimDisk (sim-disk.ts) that keeps unsynced writes in a volatile layer
 * and loses them, torn, at a power loss. Time is virtual (the hosts read a Clock that the event
 * queue moves), messages go through SimNetwork (loss, delay, duplication, partitions), and each
 * disk write completes when the event queue says so.
 *
 * The host loop is async: it awaits its store. After every event the simulator lets the Node
 * event loop run a few setImmediate rounds, in which the hosts' loops (scheduled with
 * setImmediate) run until they wait on the disk again. Nothing else in the process touches the
 * simulation, immediates run in FIFO order and every write's completion is an event, so a seed
 * gives the same trace every time.
 *
 * Faults: message loss, delay and duplication; partitions; leadership transfers; synced writes
 * that stall for up to three election timeouts (the loop waits, its leaders send round-less
 * heartbeats meanwhile, and the next drain takes in everything that queued); process crashes
 * (the host and all memory are lost, the disk's volatile layer survives); power losses of one
 * node or of all (the volatile layer is dropped, a random prefix of it kept); each followed by a
 * restart through the real recovery code (NodeStore.openOn → loadGroups). Half the seeds run the
 * host with applySliceMs 0: a turn yields (an event of the queue) after every group's apply.
 *
 * Checked at every step:
 * - the Ready contract, as host.ts promises it (persist in one synced write, then send): when a
 *   node sends a message, its durable state (what survives a power loss) already holds what the
 *   message depends on: the term of every message but a pre-vote and its answer; its vote for
 *   itself when it asks for votes; its vote for the candidate when it grants one; the entries,
 *   with their terms, of an append it sends and up to the index of an append it acknowledges;
 * - before a client is told its write succeeded, the entry is durable on a majority;
 * - a ReadIndex read sees every write acknowledged before it started;
 * - at most one leader per group and term;
 * - no two replicas apply different entries at an index.
 * At the end, faults healed and every node restarted: each group has a leader and commits a new
 * write, and every acknowledged write is applied on a majority of the nodes.
 */
import { createHash } from 'node:crypto';
import type { Clock } from '../../src/base/clock.js';
import { SeededRand } from '../../src/base/rand.js';
import { MultiRaftHost, type GroupMessage, type HostStore } from '../../src/multiraft/host.js';
import type { GroupStateMachine } from '../../src/multiraft/group-replica.js';
import { compileRaftOptions } from '../../src/raft/config.js';
import { NotLeaderError, ProposalDroppedError } from '../../src/raft/errors.js';
import {
  EMPTY_HARD_STATE,
  type Entry,
  type HardState,
  type Message,
  type NodeId,
} from '../../src/raft/messages.js';
import { decodeKey } from '../../src/storage/keys.js';
import { decodeLogRecord } from '../../src/storage/log-record.js';
import { NodeStore } from '../../src/storage/node-store.js';
import { decodeHardState, decodeSnapshotMeta } from '../../src/storage/records.js';
import { EventQueue } from './event-queue.js';
import { KvStore, decodeCommand, encodeCommand } from './kv.js';
import { SimDisk } from './sim-disk.js';
import {
  CALM_NETWORK,
  SimNetwork,
  type NetworkProfile,
  type PartitionShape,
} from './sim-network.js';
import { TraceLog } from './trace-log.js';

export interface HostSimOptions {
  readonly seed: number;
  /** Virtual ms of the fault phase. @default 3000 */
  readonly safetyMs?: number;
  /** Virtual ms after healing in which every group must elect a leader and commit. @default 2000 */
  readonly livenessMs?: number;
  /** Keep this many readable trace lines for the failure report. @default 80 */
  readonly traceTail?: number;
  /** No faults at all (baseline). */
  readonly calm?: boolean;
  /**
   * Test seam: wraps each node's store as the host sees it (e.g. one that drops the sync flag),
   * to show the checks catch a runtime that breaks the Ready contract.
   */
  readonly wrapStore?: (store: HostStore) => HostStore;
  /**
   * Run the checks that read the disks' durable layer: the Ready contract at every send and
   * every acknowledgement durable on a majority (default true). Off, only what clients and
   * replicas can observe judges the run (no acknowledged write lost, agreement, one leader per
   * term): for showing that a missing fsync is caught through power losses alone.
   */
  readonly inspectDisks?: boolean;
}

export interface HostSimCounts {
  crashes: number;
  powerLosses: number;
  clusterPowerLosses: number;
  batchesLost: number;
  restarts: number;
  partitions: number;
  writes: number;
  syncedWrites: number;
  messagesSent: number;
  messagesChecked: number;
  delivered: number;
  dropped: number;
  clientOps: number;
  clientAcked: number;
  clientUnknown: number;
  /** ReadIndex reads that saw an earlier acknowledged write. */
  readsChecked: number;
  transfers: number;
  snapshotsTaken: number;
  /** Snapshots a leader sent to a lagging follower (the transport's snapshot path). */
  snapshotsSent: number;
  leaderships: number;
  /** Heartbeats leaders sent while their loop awaited a write (slow syncs) or yielded. */
  heartbeatsWhileHeld: number;
  /** Times a turn yielded between groups' applies (profiles with applySliceMs). */
  applySlices: number;
}

export interface HostSimResult {
  readonly seed: number;
  readonly ok: boolean;
  readonly violation: string | undefined;
  readonly traceHash: string;
  readonly traceTail: readonly string[];
  readonly counts: HostSimCounts;
  readonly events: number;
  readonly endMs: number;
}

export class HostSimViolation extends Error {
  override readonly name = 'HostSimViolation';
}

const NODE_IDS: readonly NodeId[] = ['n1', 'n2', 'n3'];
const MAJORITY = 2;
const GROUPS: readonly number[] = [1, 2];
const TICK_MS = 10;
const CLIENT_TIMEOUT_MS = 500;
/** setImmediate rounds after each event: enough for a woken loop to reach its next disk wait. */
const DRAIN_ROUNDS = 3;
/**
 * Loop turns in one event beyond which a host is deemed livelocked. Turns that write wait for the
 * disk (an event), so only turns with nothing to persist count; a loop spinning on them would
 * never let the simulation go on, so it is stopped and the run fails.
 */
const TURNS_PER_EVENT_MAX = 10_000;
/**
 * Messages sent in one run beyond which the cluster is deemed to be in a message storm (a seed
 * sends about 10,000); a broken store can make replication amplify itself without end.
 */
const MESSAGES_MAX = 2_000_000;
/** Events in one run beyond which the simulation gives up likewise (a seed has about 10,000). */
const EVENTS_MAX = 2_000_000;

const RAFT = compileRaftOptions({
  electionTimeoutTicks: 10,
  heartbeatTicks: 2,
  preVote: true,
  checkQuorum: true,
  maxMsgBytes: 2048,
});

interface FaultProfile {
  readonly net: NetworkProfile;
  readonly crashP: number;
  readonly powerLossP: number;
  readonly clusterPowerLossP: number;
  readonly partitionP: number;
  readonly transferP: number;
  readonly faultEveryMs: number;
  readonly clients: number;
  readonly snapshotEveryEntries: number;
  /** Chance that a synced write stalls for 30-300 ms (up to three election timeouts). */
  readonly slowSyncP: number;
  /** The host's applySliceMs: 0 yields after every group's apply, undefined never. */
  readonly applySliceMs: number | undefined;
}

interface SimEvent {
  readonly label: string;
  /** Kept in the readable trace tail (chatter is only hashed). */
  readonly keep: boolean;
  readonly run: () => void;
}

/** A node's durable state (the disk's durable layer), decoded as records land there. */
class DurableView {
  private readonly groups = new Map<
    number,
    { hard: HardState; records: Map<number, Entry[]>; snapIndex: number; snapTerm: number }
  >();

  private group(groupId: number) {
    let g = this.groups.get(groupId);
    if (g === undefined) {
      g = { hard: EMPTY_HARD_STATE, records: new Map(), snapIndex: 0, snapTerm: 0 };
      this.groups.set(groupId, g);
    }
    return g;
  }

  onDurable(key: Uint8Array, value: Uint8Array | undefined): void {
    const k = decodeKey(key);
    if (k === undefined) return;
    switch (k.kind) {
      case 'hard-state':
        this.group(k.groupId).hard =
          value === undefined ? EMPTY_HARD_STATE : decodeHardState(value);
        return;
      case 'log': {
        const g = this.group(k.groupId);
        if (value === undefined) g.records.delete(k.first);
        else g.records.set(k.first, decodeLogRecord(value));
        return;
      }
      case 'snapshot-meta': {
        const g = this.group(k.groupId);
        const meta = value === undefined ? undefined : decodeSnapshotMeta(value).meta;
        g.snapIndex = meta?.index ?? 0;
        g.snapTerm = meta?.term ?? 0;
        return;
      }
      default:
        return;
    }
  }

  hardState(groupId: number): HardState {
    return this.group(groupId).hard;
  }

  /** The durable term at `index`; 'compacted' when a durable snapshot covers it. */
  termAt(groupId: number, index: number): number | 'compacted' | undefined {
    const g = this.group(groupId);
    if (index < g.snapIndex) return 'compacted';
    if (index === g.snapIndex && index > 0) return g.snapTerm;
    for (const [first, entries] of g.records) {
      if (index >= first && index < first + entries.length) return entries[index - first]!.term;
    }
    return undefined;
  }
}

/** The KV store of kv.ts as a group's state machine; apply answers with the entry's position. */
class HostKv implements GroupStateMachine {
  readonly kv = new KvStore();

  constructor(private readonly onApply: (e: Entry) => void) {}

  apply(entry: Entry): { index: number; term: number } {
    this.onApply(entry);
    this.kv.apply(decodeCommand(entry.data));
    return { index: entry.index, term: entry.term };
  }

  snapshot(): Uint8Array {
    return this.kv.snapshot();
  }

  restore(data: Uint8Array): void {
    this.kv.restoreFrom(data);
  }
}

interface SimHostNode {
  readonly id: NodeId;
  readonly disk: SimDisk;
  readonly view: DurableView;
  /** Bumped at every start and every crash: work of an older process is ignored. */
  incarnation: number;
  state: 'down' | 'starting' | 'up';
  host: MultiRaftHost | undefined;
  sms: Map<number, HostKv>;
}

interface AckedWrite {
  readonly opId: number;
  readonly groupId: number;
  readonly key: string;
  readonly value: string;
}

function errorText(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

function entryDigest(e: Entry): string {
  return `${e.term}:${createHash('sha256').update(e.data).digest('hex').slice(0, 16)}`;
}

export class HostSim {
  private readonly rand: SeededRand;
  private readonly q = new EventQueue<SimEvent>();
  private readonly net: SimNetwork;
  private readonly nodes = new Map<NodeId, SimHostNode>();
  private readonly traceLog: TraceLog;
  private readonly profile: FaultProfile;
  /** The profile's slowSyncP while faults are injected; 0 once healed (and in calm runs). */
  private slowSyncP: number;
  private now = 0;
  private events = 0;
  private turnsSinceEvent = 0;
  private phase: 'safety' | 'liveness' | 'done' = 'safety';
  private violation: string | undefined = undefined;
  private readonly clock: Clock = { nowMs: () => this.now, monotonicMs: () => this.now };
  readonly counts: HostSimCounts = {
    crashes: 0,
    powerLosses: 0,
    clusterPowerLosses: 0,
    batchesLost: 0,
    restarts: 0,
    partitions: 0,
    writes: 0,
    syncedWrites: 0,
    messagesSent: 0,
    messagesChecked: 0,
    delivered: 0,
    dropped: 0,
    clientOps: 0,
    clientAcked: 0,
    clientUnknown: 0,
    readsChecked: 0,
    transfers: 0,
    snapshotsTaken: 0,
    snapshotsSent: 0,
    leaderships: 0,
    heartbeatsWhileHeld: 0,
    applySlices: 0,
  };
  // Invariant state.
  private readonly leaderOfTerm = new Map<string, NodeId>();
  private readonly appliedAt = new Map<string, string>();
  private readonly acked: AckedWrite[] = [];
  private readonly ackedByGroup = new Map<number, AckedWrite[]>();
  /** Per group: a write acknowledged after the liveness phase began. */
  private readonly ackedAfterHeal = new Set<number>();
  private nextOpId = 1;
  private clientsStopped = false;
  private readonly leaderHint = new Map<number, NodeId>();

  constructor(private readonly opts: HostSimOptions) {
    this.rand = new SeededRand(opts.seed);
    this.traceLog = new TraceLog(opts.traceTail ?? 80);
    this.profile = this.drawProfile();
    this.net = new SimNetwork(this.rand.fork(), opts.calm ? CALM_NETWORK : this.profile.net);
    this.slowSyncP = opts.calm ? 0 : this.profile.slowSyncP;
    for (const id of NODE_IDS) {
      const view = new DurableView();
      const diskRand = this.rand.fork();
      const disk = new SimDisk(id, {
        schedule: (delayMs, fn) => this.at(delayMs, `${id} disk write done`, fn, false),
        rand: diskRand,
        writeMs: (sync) => {
          if (!sync) return 0.05 + diskRand.float() * 0.2;
          // A disk flushing or a store compacting: the loop waits on the write, its leaders' only
          // voice meanwhile the heartbeats it sends while held (MultiRaftHost.beatWhileHeld).
          if (this.slowSyncP > 0 && diskRand.chance(this.slowSyncP))
            return 30 + diskRand.float() * 270;
          return 0.5 + diskRand.float() * 4;
        },
        onDurable: (key, value) => view.onDurable(key, value),
      });
      this.nodes.set(id, {
        id,
        disk,
        view,
        incarnation: 0,
        state: 'down',
        host: undefined,
        sms: new Map(),
      });
    }
  }

  /** Swarm testing: each seed weights the faults differently, some not at all. */
  private drawProfile(): FaultProfile {
    const r = this.rand;
    const maybe = (p: number, max: number): number => (r.chance(p) ? r.float() * max : 0);
    return {
      net: {
        dropP: maybe(0.6, 0.1),
        duplicateP: maybe(0.4, 0.05),
        delayMinMs: 0.5,
        delayMaxMs: 1 + r.int(10),
        longDelayP: maybe(0.4, 0.05),
        longDelayMs: 100,
      },
      crashP: maybe(0.7, 0.3),
      powerLossP: maybe(0.8, 0.3),
      clusterPowerLossP: maybe(0.5, 0.1),
      partitionP: maybe(0.6, 0.3),
      transferP: maybe(0.5, 0.3),
      faultEveryMs: 100 + r.int(200),
      clients: 2 + r.int(3),
      snapshotEveryEntries: r.chance(0.5) ? 8 + r.int(20) : 200,
      slowSyncP: maybe(0.5, 0.05),
      applySliceMs: r.chance(0.5) ? 0 : undefined,
    };
  }

  // -------------------------------------------------------------------------------------
  // The event loop

  private at(delayMs: number, label: string, run: () => void, keep = true): void {
    this.q.push(this.now + delayMs, { label, keep, run });
  }

  private trace(who: string, line: string, keep = true): void {
    this.traceLog.add(this.now, who, line, keep);
  }

  private fail(what: string): void {
    if (this.violation !== undefined) return;
    this.violation = what;
    this.trace('sim', `VIOLATION ${what}`);
  }

  async run(): Promise<HostSimResult> {
    const safetyMs = this.opts.safetyMs ?? 3000;
    const livenessMs = this.opts.livenessMs ?? 2000;
    for (const n of this.nodes.values()) this.startNode(n, true);
    for (let c = 0; c < this.profile.clients; c++)
      this.at(20 + this.rand.float() * 50, `client ${c} starts`, () => this.clientStep(c));
    if (!this.opts.calm) this.at(this.profile.faultEveryMs, 'fault roll', () => this.faultRoll());
    this.at(safetyMs, 'heal: faults stop, every node restarts', () => this.heal());
    const endMs = safetyMs + livenessMs;
    // The last writes' commit reaches the followers with the next heartbeats.
    this.at(endMs - 300, 'clients stop', () => (this.clientsStopped = true));
    for (;;) {
      const next = this.q.peekTime();
      if (next === undefined || next > endMs || this.violation !== undefined) break;
      const ev = this.q.pop()!;
      this.now = ev.at;
      for (const n of this.nodes.values()) n.disk.setNow(this.now);
      this.events++;
      this.turnsSinceEvent = 0;
      if (this.events > EVENTS_MAX) {
        this.fail(`more than ${EVENTS_MAX} events (a storm of work that never ends)`);
        break;
      }
      this.trace('sim', ev.event.label, ev.event.keep);
      try {
        ev.event.run();
      } catch (err) {
        this.fail(`event '${ev.event.label}' threw ${errorText(err)}`);
      }
      for (let i = 0; i < DRAIN_ROUNDS; i++) await new Promise<void>((r) => setImmediate(r));
      this.checkLeaders();
    }
    if (this.violation === undefined) {
      this.now = endMs;
      this.finalChecks();
    }
    this.phase = 'done';
    for (const n of this.nodes.values()) {
      this.counts.writes += n.disk.counts.writes;
      this.counts.syncedWrites += n.disk.counts.syncedWrites;
      this.counts.batchesLost += n.disk.counts.batchesLost;
      this.counts.snapshotsTaken += n.host?.stats.snapshotsTaken ?? 0;
      this.counts.heartbeatsWhileHeld += n.host?.stats.heartbeatsWhileHeld ?? 0;
      this.counts.applySlices += n.host?.stats.applySlices ?? 0;
      // Crashed processes are left behind; make sure nothing of them runs on.
      n.incarnation++;
      n.host = undefined;
    }
    this.counts.delivered = this.net.delivered;
    this.counts.dropped = this.net.dropped;
    return {
      seed: this.opts.seed,
      ok: this.violation === undefined,
      violation: this.violation,
      traceHash: this.traceLog.digest(),
      traceTail: this.traceLog.tail(),
      counts: this.counts,
      events: this.events,
      endMs: this.now,
    };
  }

  // -------------------------------------------------------------------------------------
  // Nodes: start, crash, power loss

  private startNode(n: SimHostNode, fresh: boolean): void {
    const incarnation = ++n.incarnation;
    n.state = 'starting';
    this.openNode(n, incarnation, fresh).then(
      () => undefined,
      (err: unknown) => {
        if (n.incarnation === incarnation) this.fail(`${n.id} failed to start: ${errorText(err)}`);
      },
    );
  }

  private async openNode(n: SimHostNode, incarnation: number, fresh: boolean): Promise<void> {
    // The real recovery path: every group rebuilt from what the disk kept.
    const store = await NodeStore.openOn(n.disk.open());
    if (n.incarnation !== incarnation) return;
    const sms = new Map<number, HostKv>();
    const host = new MultiRaftHost({
      nodeId: n.id,
      store: this.opts.wrapStore ? this.opts.wrapStore(store) : store,
      clock: this.clock,
      rand: this.rand.fork(),
      raft: RAFT,
      tickMs: TICK_MS,
      snapshotEveryEntries: this.profile.snapshotEveryEntries,
      snapshotEveryBytes: 1 << 20,
      ...(this.profile.applySliceMs === undefined
        ? {}
        : {
            applySliceMs: this.profile.applySliceMs,
            // The rest of the simulation runs while the turn waits: deliveries, ticks, clients.
            yieldToLoop: () =>
              new Promise<void>((resolve) => this.at(0, `${n.id} turn yields`, resolve, false)),
          }),
      makeStateMachine: (groupId) => {
        const sm = new HostKv((e) => this.onApplied(n, incarnation, groupId, e));
        sms.set(groupId, sm);
        return sm;
      },
      onFatal: (err) => {
        if (n.incarnation === incarnation) this.fail(`${n.id} loop died: ${errorText(err)}`);
      },
    });
    host.transport = { send: (to, msgs) => this.send(n, incarnation, host, to, msgs) };
    host.afterTurn = () => {
      // Thrown out of the loop, which stops it; onFatal reports it.
      if (++this.turnsSinceEvent > TURNS_PER_EVENT_MAX)
        throw new HostSimViolation(`${TURNS_PER_EVENT_MAX} loop turns in one event (a livelock)`);
    };
    host.openGroups();
    n.host = host;
    n.sms = sms;
    n.state = 'up';
    this.trace(n.id, `up (incarnation ${incarnation}, groups ${store.groupIds().join(',')})`);
    this.scheduleTick(n, incarnation, this.rand.float() * TICK_MS);
    // Bootstrap. A group whose creation a power loss undid never sent anything, so creating it
    // again is the same as creating it the first time.
    for (const g of GROUPS) {
      if (host.isHosted(g)) continue;
      if (!fresh) this.trace(n.id, `g${g} was lost before its creation was synced; creating it`);
      await host.createGroup(g, { voters: NODE_IDS });
    }
  }

  private scheduleTick(n: SimHostNode, incarnation: number, delayMs = TICK_MS): void {
    this.at(
      delayMs,
      `${n.id} tick`,
      () => {
        if (n.incarnation !== incarnation) return;
        n.host?.wake();
        this.scheduleTick(n, incarnation);
      },
      false,
    );
  }

  private stopProcess(n: SimHostNode): void {
    this.counts.heartbeatsWhileHeld += n.host?.stats.heartbeatsWhileHeld ?? 0;
    this.counts.applySlices += n.host?.stats.applySlices ?? 0;
    n.incarnation++;
    n.state = 'down';
    n.host = undefined;
    n.sms = new Map();
  }

  private crash(n: SimHostNode): void {
    this.counts.crashes++;
    this.stopProcess(n);
    n.disk.crash();
    this.trace(n.id, `CRASH (unsynced batches kept: ${n.disk.volatileBatches()})`);
    this.scheduleRestart(n);
  }

  private powerLoss(n: SimHostNode, restart: boolean): void {
    this.counts.powerLosses++;
    this.stopProcess(n);
    const lost = n.disk.powerLoss();
    this.trace(n.id, `POWER LOSS (${lost} unsynced batches lost)`);
    if (restart) this.scheduleRestart(n);
  }

  private scheduleRestart(n: SimHostNode, delayMs = 50 + this.rand.float() * 400): void {
    const incarnation = n.incarnation;
    this.at(delayMs, `${n.id} restarts`, () => {
      if (n.incarnation !== incarnation || n.state !== 'down') return;
      this.counts.restarts++;
      this.startNode(n, false);
    });
  }

  // -------------------------------------------------------------------------------------
  // Network and the Ready contract

  private send(
    n: SimHostNode,
    incarnation: number,
    host: MultiRaftHost,
    to: NodeId,
    msgs: GroupMessage[],
  ): void {
    // A crashed process's loop may still finish a turn in memory; nothing it sends leaves.
    if (n.incarnation !== incarnation) return;
    this.counts.messagesSent += msgs.length;
    if (this.counts.messagesSent > MESSAGES_MAX) {
      this.fail(`more than ${MESSAGES_MAX} messages sent (a message storm)`);
      return;
    }
    if (this.opts.inspectDisks ?? true) for (const gm of msgs) this.checkReadyContract(n, host, gm);
    const delays = this.net.plan(n.id, to);
    const what = msgs.map((gm) => describe(gm)).join(' ');
    const chatter = msgs.every((gm) => isChatter(gm.message));
    this.trace(n.id, `send>${to} ${delays.length === 0 ? 'LOST' : ''} ${what}`, !chatter);
    for (const d of delays) {
      this.at(
        d,
        `${n.id}>${to} deliver`,
        () => {
          const target = this.nodes.get(to);
          if (target?.state !== 'up' || target.host === undefined) return;
          this.net.delivered++;
          target.host.deliver(n.id, msgs);
        },
        false,
      );
    }
    for (const gm of msgs) {
      if (gm.message.type !== 'snap') continue;
      this.counts.snapshotsSent++;
      // The transport reports a snapshot's fate back to the sender's Raft.
      const ok = delays.length > 0;
      this.at(delays[0] ?? 5, `${n.id} snapshot to ${to} ${ok ? 'sent' : 'failed'}`, () => {
        if (n.incarnation !== incarnation) return;
        host.report(gm.groupId, { kind: 'snapshot-status', to, ok });
      });
    }
  }

  /** The Ready contract for one message at the moment it leaves (see the file header). */
  private checkReadyContract(n: SimHostNode, host: MultiRaftHost, gm: GroupMessage): void {
    this.counts.messagesChecked++;
    const m = gm.message;
    const g = gm.groupId;
    const hs = n.view.hardState(g);
    const who = `${n.id} sent g${g} ${m.type}>${m.to} t${m.term}`;
    if (m.type !== 'pre-vote' && m.type !== 'pre-vote-resp' && hs.term < m.term) {
      this.fail(`${who} while its durable term is ${hs.term}`);
      return;
    }
    switch (m.type) {
      case 'vote':
        if (hs.term === m.term && hs.vote !== n.id)
          this.fail(`${who} while its durable vote in that term is '${hs.vote}'`);
        return;
      case 'vote-resp':
        if (!m.reject && !(hs.term === m.term && hs.vote === m.to))
          this.fail(`${who} granting a vote while durable is t${hs.term} vote '${hs.vote}'`);
        return;
      case 'app': {
        for (const e of m.entries) {
          const have = n.view.termAt(g, e.index);
          if (have !== 'compacted' && have !== e.term) {
            this.fail(`${who} with entry ${e.index}@t${e.term} while durable has t${have}`);
            return;
          }
        }
        return;
      }
      case 'app-resp': {
        if (m.reject || m.index === 0) return;
        const have = n.view.termAt(g, m.index);
        const want = host.groups.get(g)?.node.raft.log.term(m.index);
        if (have !== 'compacted' && (have === undefined || have !== want))
          this.fail(`${who} acknowledging ${m.index}@t${want} while durable has t${have}`);
        return;
      }
      default:
        return;
    }
  }

  // -------------------------------------------------------------------------------------
  // Invariants

  private onApplied(n: SimHostNode, incarnation: number, groupId: number, e: Entry): void {
    if (n.incarnation !== incarnation) return;
    const key = `${groupId}:${e.index}`;
    const digest = entryDigest(e);
    const prior = this.appliedAt.get(key);
    if (prior === undefined) this.appliedAt.set(key, digest);
    else if (prior !== digest)
      this.fail(`${n.id} applied ${digest} at g${groupId} index ${e.index}, another node ${prior}`);
  }

  private checkLeaders(): void {
    for (const n of this.nodes.values()) {
      if (n.state !== 'up' || n.host === undefined) continue;
      for (const [groupId, g] of n.host.groups) {
        if (!g.isLeader) continue;
        const key = `${groupId}:${g.node.raft.term}`;
        const prior = this.leaderOfTerm.get(key);
        if (prior === undefined) {
          this.leaderOfTerm.set(key, n.id);
          this.leaderHint.set(groupId, n.id);
          this.counts.leaderships++;
          this.trace(n.id, `leader of g${groupId} in t${g.node.raft.term}`);
        } else if (prior !== n.id) {
          this.fail(`two leaders of g${groupId} in t${g.node.raft.term}: ${prior} and ${n.id}`);
        }
      }
    }
  }

  /** A client was told its write succeeded: the entry must be durable on a majority. */
  private checkAckDurable(groupId: number, index: number, term: number, opId: number): void {
    let holders = 0;
    for (const n of this.nodes.values()) {
      const have = n.view.termAt(groupId, index);
      if (have === 'compacted' || have === term) holders++;
    }
    if (holders < MAJORITY)
      this.fail(
        `op ${opId} acknowledged at g${groupId} ${index}@t${term} but durable on ${holders} node(s)`,
      );
  }

  private finalChecks(): void {
    for (const g of GROUPS) {
      const leader = [...this.nodes.values()].some(
        (n) => n.state === 'up' && n.host?.groups.get(g)?.isLeader === true,
      );
      if (!leader)
        return this.fail(`no leader of g${g} ${this.opts.livenessMs ?? 2000} ms after healing`);
      if (!this.ackedAfterHeal.has(g))
        return this.fail(`g${g} acknowledged no write after healing`);
    }
    for (const w of this.acked) {
      let holders = 0;
      for (const n of this.nodes.values())
        if (n.sms.get(w.groupId)?.kv.get(w.key) === w.value) holders++;
      if (holders < MAJORITY)
        return this.fail(
          `acknowledged write op ${w.opId} (g${w.groupId} ${w.key}) applied on ${holders} node(s)`,
        );
    }
  }

  // -------------------------------------------------------------------------------------
  // Faults

  private faultRoll(): void {
    if (this.phase !== 'safety') return;
    const p = this.profile;
    const r = this.rand;
    const nodes = [...this.nodes.values()];
    const pick = (): SimHostNode => nodes[r.int(nodes.length)]!;
    if (r.chance(p.crashP)) {
      const n = pick();
      if (n.state !== 'down') this.crash(n);
    }
    if (r.chance(p.powerLossP)) {
      const n = pick();
      if (n.state !== 'down') this.powerLoss(n, true);
      else {
        // A node already down may lose power too (its page cache goes).
        this.counts.powerLosses++;
        n.disk.powerLoss();
      }
    }
    if (r.chance(p.clusterPowerLossP)) {
      this.counts.clusterPowerLosses++;
      this.trace('sim', 'CLUSTER POWER LOSS');
      for (const n of nodes) this.powerLoss(n, false);
      const delay = 50 + r.float() * 200;
      for (const n of nodes) this.scheduleRestart(n, delay + r.float() * 50);
    }
    if (r.chance(p.transferP)) {
      // A graceful leadership transfer of one group, to a random other node.
      const groupId = GROUPS[r.int(GROUPS.length)]!;
      const to = NODE_IDS[r.int(NODE_IDS.length)]!;
      const leader = nodes.find(
        (n) => n.state === 'up' && n.host?.groups.get(groupId)?.isLeader === true,
      );
      if (leader !== undefined && leader.id !== to) {
        this.counts.transfers++;
        this.trace('sim', `TRANSFER g${groupId} ${leader.id} -> ${to}`);
        leader.host!.report(groupId, { kind: 'transfer-leader', to });
      }
    }
    if (r.chance(p.partitionP)) {
      const shapes: PartitionShape[] = [
        'isolate-one',
        'halves',
        'one-way',
        'bridge',
        'random-links',
      ];
      const shape = shapes[r.int(shapes.length)]!;
      this.counts.partitions++;
      const what = this.net.partition(shape, NODE_IDS);
      this.trace('sim', `PARTITION ${what}`);
      this.at(100 + r.float() * 400, 'partition heals', () => this.net.heal());
    }
    this.at(p.faultEveryMs, 'fault roll', () => this.faultRoll());
  }

  private heal(): void {
    this.phase = 'liveness';
    this.net.heal();
    this.net.profile = CALM_NETWORK;
    // Liveness is judged on a calm cluster: disks as quick as the network.
    this.slowSyncP = 0;
    for (const n of this.nodes.values()) {
      if (n.state === 'down') {
        this.counts.restarts++;
        this.startNode(n, false);
      }
    }
  }

  // -------------------------------------------------------------------------------------
  // Clients: each writes unique keys, one write at a time, to the node it believes leads.

  private clientStep(c: number): void {
    if (this.clientsStopped) return;
    const groupId = GROUPS[this.rand.int(GROUPS.length)]!;
    const hint = this.leaderHint.get(groupId);
    const nodes = [...this.nodes.values()];
    const target =
      hint !== undefined && this.rand.chance(0.8)
        ? this.nodes.get(hint)!
        : nodes[this.rand.int(nodes.length)]!;
    const next = (delayMs: number): void =>
      this.at(delayMs, `client ${c} next`, () => this.clientStep(c));
    const host = target.host;
    if (target.state !== 'up' || host === undefined) {
      next(10 + this.rand.float() * 20);
      return;
    }
    const ackedHere = this.ackedByGroup.get(groupId);
    if (ackedHere !== undefined && this.rand.chance(0.25)) {
      // A read from any node (followers serve ReadIndex reads too) of one of the last writes
      // acknowledged before it starts.
      const reader = nodes[this.rand.int(nodes.length)]!;
      const w = ackedHere[ackedHere.length - 1 - this.rand.int(Math.min(3, ackedHere.length))]!;
      if (reader.state === 'up' && reader.host !== undefined) {
        this.clientRead(c, reader, reader.host, w, next);
        return;
      }
    }
    const opId = this.nextOpId++;
    this.counts.clientOps++;
    const key = `c${c}-${opId}`;
    const value = `v${opId}`;
    const phaseAtCall = this.phase;
    let settled = false;
    this.at(
      CLIENT_TIMEOUT_MS,
      `client ${c} op ${opId} timer`,
      () => {
        if (settled) return;
        settled = true;
        this.trace('sim', `client ${c} op ${opId} timed out`);
        this.counts.clientUnknown++;
        next(1);
      },
      false,
    );
    host.propose(groupId, encodeCommand({ op: 'put', key, value, opId })).then(
      (result) => {
        if (settled) return;
        settled = true;
        const { index, term } = result as { index: number; term: number };
        this.counts.clientAcked++;
        this.trace(target.id, `ack op ${opId} g${groupId} ${index}@t${term}`);
        if (this.opts.inspectDisks ?? true) this.checkAckDurable(groupId, index, term, opId);
        const w: AckedWrite = { opId, groupId, key, value };
        this.acked.push(w);
        let inGroup = this.ackedByGroup.get(groupId);
        if (inGroup === undefined) this.ackedByGroup.set(groupId, (inGroup = []));
        inGroup.push(w);
        if (phaseAtCall === 'liveness') this.ackedAfterHeal.add(groupId);
        // Often read it back at once from any node: a follower that has not applied it yet
        // must wait for its ReadIndex.
        const reader = nodes[this.rand.int(nodes.length)]!;
        if (this.rand.chance(0.3) && reader.state === 'up' && reader.host !== undefined)
          this.clientRead(c, reader, reader.host, w, next);
        else next(1 + this.rand.float() * 20);
      },
      (err: unknown) => {
        if (settled) return;
        settled = true;
        if (err instanceof NotLeaderError && err.leaderHint !== '')
          this.leaderHint.set(groupId, err.leaderHint);
        if (!(err instanceof NotLeaderError || err instanceof ProposalDroppedError))
          this.counts.clientUnknown++;
        next(5 + this.rand.float() * 20);
      },
    );
  }

  /** A ReadIndex read: once it resolves, the replica must show a write acknowledged before. */
  private clientRead(
    c: number,
    n: SimHostNode,
    host: MultiRaftHost,
    w: AckedWrite,
    next: (delayMs: number) => void,
  ): void {
    const incarnation = n.incarnation;
    let settled = false;
    this.at(
      CLIENT_TIMEOUT_MS,
      `client ${c} read timer`,
      () => {
        if (settled) return;
        settled = true;
        next(1);
      },
      false,
    );
    host.read(w.groupId).then(
      () => {
        if (settled) return;
        settled = true;
        if (n.incarnation === incarnation) {
          const got = n.sms.get(w.groupId)?.kv.get(w.key);
          this.counts.readsChecked++;
          this.trace(n.id, `read g${w.groupId} ${w.key}=${got}`);
          if (got !== w.value)
            this.fail(
              `stale read on ${n.id}: g${w.groupId} ${w.key}=${got} after op ${w.opId} was acknowledged`,
            );
        }
        next(1 + this.rand.float() * 20);
      },
      () => {
        if (settled) return;
        settled = true;
        next(5 + this.rand.float() * 20);
      },
    );
  }
}

function isChatter(m: Message): boolean {
  return (
    m.type === 'heartbeat' ||
    m.type === 'heartbeat-resp' ||
    ((m.type === 'app' || m.type === 'app-resp') && m.entries.length === 0)
  );
}

function describe(gm: GroupMessage): string {
  const m = gm.message;
  const extra =
    m.type === 'app'
      ? ` ${m.index}+${m.entries.length}`
      : m.type === 'app-resp'
        ? ` ${m.index}${m.reject ? ' rej' : ''}`
        : m.reject
          ? ' rej'
          : '';
  return `g${gm.groupId}:${m.type}@t${m.term}${extra}`;
}

/** Runs one seed of the host simulation. */
export function runHostSim(opts: HostSimOptions): Promise<HostSimResult> {
  return new HostSim(opts).run();
}
