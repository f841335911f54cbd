/**
 * The deterministic cluster simulator. One seed drives everything: the fault profile (swarm
 * testing: each seed draws its own probabilities), per-node clock rates, the network, crashes
 * and torn writes, partitions, leadership transfers, membership changes, and the clients'
 * workload. Time is virtual; a run is a pure function of its options.
 *
 * A run has two phases. Safety: faults on, invariants checked after every event. Progress
 * (the liveness phase): faults healed, every node restarted; a leader followed by every member
 * must appear within LEADER_BOUND_MS (QUIESCED_LEADER_BOUND_MS if the seed quiesces), every
 * client operation ever handed to a node (including those still pending at the heal) must get an
 * outcome (ok, fail, or unknown with a reason) within OUTCOME_AFTER_LEADER_MS more, and writes
 * proposed after the heal must commit.
 * Finally the clients' history is checked for linearizability per key.
 *
 * Trace format, one line per event: `<virtual ms, 3 decimals> <node|sim> <what>`; ticks and
 * heartbeats are hashed but not kept in the readable tail.
 */
import { SeededRand } from '../../src/base/rand.js';
import { MemoryLogStorage } from '../../src/raft/log-storage.js';
import { isJoint } from '../../src/raft/conf-change.js';
import type { ConfChange, Entry, Message, NodeId } from '../../src/raft/messages.js';
import type { Raft, RaftInit } from '../../src/raft/raft.js';
import type { Ready } from '../../src/raft/ready.js';
import { EventQueue } from './event-queue.js';
import { TraceLog } from './trace-log.js';
import { encodeCommand, type KvCommand } from './kv.js';
import {
  drawScenarioMix,
  WindowMeter,
  WindowScenarios,
  type ScenarioHost,
  type ScenarioMix,
  type WindowCounts,
} from './window-scenarios.js';
import {
  CALM_NETWORK,
  SimNetwork,
  type NetworkProfile,
  type PartitionShape,
} from './sim-network.js';
import {
  SimNode,
  type ClientOp,
  type InboxItem,
  type NodeHooks,
  type OpOutcome,
} from './sim-node.js';

export interface SimOptions {
  readonly seed: number;
  /** Virtual milliseconds of the fault phase. @default 5000 */
  readonly safetyMs?: number;
  /** Virtual milliseconds allowed for the liveness phase. @default 4000 */
  readonly livenessMs?: number;
  /** Test seam: a Raft with a deliberately broken rule. */
  readonly makeRaft?: (init: RaftInit) => Raft;
  /** Disable faults (for determinism and baseline tests). */
  readonly calm?: boolean;
  /** Override parts of the seed's drawn fault profile (e.g. a harsher swarm for bug hunts). */
  readonly profile?: Partial<FaultProfile>;
  /** Keep this many readable trace lines for the failure report. @default 80 */
  readonly traceTail?: number;
  /** Override the seed's drawn window-scenario mix (window-scenarios.ts); 'off' for none. */
  readonly scenarios?: Partial<ScenarioMix> | 'off';
}

export interface FaultCounts {
  crashes: number;
  tornWrites: number;
  restarts: number;
  partitions: number;
  heals: number;
  transfers: number;
  confChanges: number;
  dropped: number;
  duplicated: number;
  delivered: number;
  snapshotsTaken: number;
  snapshotsInstalled: number;
  clientOps: number;
  clientOk: number;
  clientUnknown: number;
}

export interface HistoryOp {
  readonly clientId: number;
  readonly key: string;
  readonly input: KvCommand | { op: 'get'; key: string };
  output: unknown;
  readonly call: number;
  ret: number;
  status: 'pending' | 'ok' | 'fail' | 'unknown';
}

/** How fast the cluster recovered once the faults healed (virtual ms after the heal). */
export interface ProgressStats {
  /** Until a leader followed by every member (bound: LEADER_BOUND_MS or the quiesced one). */
  leaderMs: number;
  /** Until the last outcome of a client operation invoked before the heal. */
  lastPendingOutcomeMs: number;
  /** Client operations still without an outcome when the fault phase ended. */
  pendingAtHeal: number;
}

export interface SimResult {
  readonly seed: number;
  readonly ok: boolean;
  readonly violation: string | undefined;
  readonly traceHash: string;
  readonly traceTail: readonly string[];
  readonly faults: FaultCounts;
  readonly history: readonly HistoryOp[];
  readonly events: number;
  readonly endMs: number;
  readonly finalLeader: NodeId | undefined;
  readonly progress: ProgressStats;
  /** The window scenarios this seed drew, and how often each window was reached. */
  readonly mix: ScenarioMix;
  readonly windows: WindowCounts;
}

export class InvariantViolation extends Error {
  override readonly name = 'InvariantViolation';
}

type SimEvent =
  | { kind: 'node'; node: NodeId; item: InboxItem }
  | { kind: 'tick'; node: NodeId; incarnation: number }
  | { kind: 'persisted'; node: NodeId; incarnation: number }
  | { kind: 'fault' }
  | { kind: 'heal-partition' }
  | { kind: 'isolate'; node: NodeId }
  | { kind: 'restart'; node: NodeId }
  | { kind: 'client'; clientId: number }
  | { kind: 'client-timeout'; opId: number }
  | { kind: 'scenario'; run: () => void };

const TICK_MS = 10;
const ELECTION_TICKS = 10;
const HEARTBEAT_TICKS = 2;
const CLIENT_TIMEOUT_MS = 400;
/** One election timeout on a node's own clock. */
export const ELECTION_TIMEOUT_MS = ELECTION_TICKS * TICK_MS;
/**
 * Once the faults heal (every node up, every link open), a leader followed by every member must
 * exist within this bound: a node restarted at the heal ignores candidates for 1 election timeout
 * (startup quiet), a follower of a vanished leader campaigns after its randomized timeout (under
 * 2), and one pre-vote or vote round lost to a split or to that quiet costs up to 2 more.
 */
export const LEADER_BOUND_MS = 5 * ELECTION_TIMEOUT_MS;
/**
 * The same bound for a seed whose groups quiesce: followers quiesced under a leader that is gone
 * ignore candidates until they have missed three beacons (raft.ts quiescedTimeoutTicks, 9
 * election timeouts), and a member restarted under a quiesced leader first hears of it at a
 * beacon (every 3).
 */
export const QUIESCED_LEADER_BOUND_MS = LEADER_BOUND_MS + 9 * ELECTION_TIMEOUT_MS;
/**
 * Every client operation handed to a node, at any time, has an outcome (ok, fail, or unknown with
 * a reason) within the leader bound plus this of the heal (or of its invocation, if later): once
 * a leader leads every member, a deposed leader has heard the new term and abandoned its
 * proposals and reads; a follower gives up a read forwarded to a leader that went away, or a
 * read index it cannot apply, after 2 election timeouts (raft.ts expireForwardedReads, sim-node.ts
 * expireWaitingReads); one more covers the commit, a lagging replica's catch-up and the apply.
 */
export const OUTCOME_AFTER_LEADER_MS = 3 * ELECTION_TIMEOUT_MS;
const KEYS = ['a', 'b', 'c'];

export interface FaultProfile {
  net: NetworkProfile;
  crashP: number;
  partitionP: number;
  transferP: number;
  confP: number;
  tornP: number;
  driftMax: number;
  clients: number;
  initialVoters: number;
  /** 1 = one entry per append message, which exposes more interleavings. */
  maxMsgBytes: number;
  /** Virtual ms between fault rolls. */
  faultEveryMs: number;
  /** Probability per roll of a fault aimed at the current leader (crash or isolate it). */
  leaderFaultP: number;
  /** Raft quiesceAfterTicks: 0 (off) or a small number, so idle spells quiesce the group. */
  quiesceAfterTicks: number;
  /** Probability of isolating a node within 3 ms of it becoming leader. */
  newLeaderFaultP: number;
}

export class ClusterSim {
  readonly rand: SeededRand;
  private readonly q = new EventQueue<SimEvent>();
  readonly net: SimNetwork;
  readonly nodes = new Map<NodeId, SimNode>();
  private readonly clockRate = new Map<NodeId, number>();
  private now = 0;
  private events = 0;
  private readonly traceLog: TraceLog;
  readonly faults: FaultCounts = {
    crashes: 0,
    tornWrites: 0,
    restarts: 0,
    partitions: 0,
    heals: 0,
    transfers: 0,
    confChanges: 0,
    dropped: 0,
    duplicated: 0,
    delivered: 0,
    snapshotsTaken: 0,
    snapshotsInstalled: 0,
    clientOps: 0,
    clientOk: 0,
    clientUnknown: 0,
  };
  private readonly profile: FaultProfile;
  private phase: 'safety' | 'liveness' = 'safety';
  private nextNodeNumber = 1;
  readonly history: HistoryOp[] = [];
  private readonly opsById = new Map<number, HistoryOp>();
  private readonly clientBusy = new Map<number, number>();
  private nextOpId = 1;
  private clientLeaderHint = new Map<number, NodeId>();
  private readonly livenessOps = new Map<number, OpOutcome['status'] | 'pending'>();
  /** Client operations: the node each was handed to, and when the system answered it. */
  private readonly handedTo = new Map<number, NodeId>();
  private readonly settledAt = new Map<number, number>();
  /** Virtual time the faults healed; Infinity during the fault phase. */
  private healedAt = Infinity;
  /** Clients keep invoking through the fault phase and the liveness writes. */
  private clientsOpen = true;
  /** LEADER_BOUND_MS or QUIESCED_LEADER_BOUND_MS, by the seed's profile. */
  private readonly leaderBoundMs: number;
  /** The bound on any client operation's outcome, after the heal or its invocation. */
  readonly outcomeBoundMs: number;
  private readonly progress: ProgressStats = {
    leaderMs: -1,
    lastPendingOutcomeMs: 0,
    pendingAtHeal: 0,
  };

  /** Window scenarios (swarm-weighted per seed) and the meter of the windows reached. */
  readonly meter: WindowMeter;
  readonly scenarios: WindowScenarios;
  /** Scenario clock stalls: a node's ticks come this many times further apart. */
  private readonly clockSlow = new Map<NodeId, number>();
  /** Scenario disk stalls: run when the node's campaign Ready starts its (held) fsync. */
  private readonly stallOnCampaign = new Map<NodeId, () => void>();
  private readonly heldPersist = new Map<NodeId, number>();
  private readonly lastReady = new Map<NodeId, Ready>();

  // Invariant state.
  private readonly leaderOfTerm = new Map<number, NodeId>();
  private readonly committed = new Map<number, number>();
  private readonly appliedAt = new Map<number, string>();

  constructor(private readonly opts: SimOptions) {
    this.rand = new SeededRand(opts.seed);
    this.traceLog = new TraceLog(opts.traceTail ?? 80);
    this.profile = { ...this.drawProfile(), ...opts.profile };
    this.leaderBoundMs =
      this.profile.quiesceAfterTicks > 0 ? QUIESCED_LEADER_BOUND_MS : LEADER_BOUND_MS;
    this.outcomeBoundMs = this.leaderBoundMs + OUTCOME_AFTER_LEADER_MS;
    this.net = new SimNetwork(this.rand.fork(), opts.calm ? CALM_NETWORK : this.profile.net);
    const scenarioRand = this.rand.fork();
    const drawn = drawScenarioMix(scenarioRand);
    const mix: ScenarioMix =
      opts.scenarios === 'off'
        ? { rate: 0, weights: { staleRead: 0, figure8: 0, preVote: 0 } }
        : { ...drawn, ...opts.scenarios };
    // Step (c) of Figure 8 needs an old-term entry sent without the new leader's no-op, which
    // only one entry per append message allows: seeds that weight it mostly use that.
    if (mix.weights.figure8 > 0 && opts.profile?.maxMsgBytes === undefined) {
      if (scenarioRand.chance(0.6)) this.profile.maxMsgBytes = 1;
    }
    this.meter = new WindowMeter(this.nodes);
    this.scenarios = new WindowScenarios(
      this.scenarioHost(),
      mix,
      scenarioRand,
      ELECTION_TIMEOUT_MS,
    );
  }

  /** Swarm testing: each seed weights the faults differently, some not at all. */
  private drawProfile(): FaultProfile {
    const r = this.rand;
    const maybe = (p: number, max: number): number => (r.chance(p) ? r.float() * max : 0);
    return {
      net: {
        dropP: maybe(0.7, 0.15),
        duplicateP: maybe(0.5, 0.1),
        delayMinMs: 1,
        delayMaxMs: 2 + r.int(20),
        longDelayP: maybe(0.5, 0.05),
        longDelayMs: 200,
      },
      crashP: maybe(0.7, 0.15),
      partitionP: maybe(0.7, 0.2),
      transferP: maybe(0.5, 0.1),
      confP: maybe(0.6, 0.15),
      tornP: r.float(),
      driftMax: 0.01 * r.float(),
      clients: 2 + r.int(3),
      maxMsgBytes: r.chance(0.5) ? 1 : 4096,
      faultEveryMs: 100,
      leaderFaultP: maybe(0.6, 0.3),
      quiesceAfterTicks: r.chance(0.5) ? 5 + r.int(20) : 0,
      newLeaderFaultP: maybe(0.4, 0.5),
      initialVoters: r.chance(0.5) ? 3 : 5,
    };
  }

  // -------------------------------------------------------------------------------------
  // Trace

  private trace(who: string, line: string, keep = true): void {
    this.traceLog.add(this.now, who, line, keep);
  }

  private fail(what: string): never {
    throw new InvariantViolation(what);
  }

  // -------------------------------------------------------------------------------------
  // Nodes

  private newNodeId(): NodeId {
    return `n${this.nextNodeNumber++}`;
  }

  private hooks(): NodeHooks {
    return {
      send: (from, m) => this.send(from, m),
      complete: (op, outcome) => this.complete(op, outcome),
      onQueuedOpLost: (op) =>
        this.complete(op, { status: 'unknown', reason: 'node crashed before handling it' }),
      persistDelayMs: () => 0.2 + this.rand.float() * 3,
      now: () => this.now,
      trace: (node, line) => this.trace(node, line),
      onReady: (node, rd) => {
        this.checkReady(node, rd);
        this.meter.ready(node, rd);
        this.lastReady.set(node.id, rd);
      },
      onApplied: (node, e) => this.checkApplied(node, e),
      onAdvanced: (node) => this.checkAdvanced(node),
      schedulePersisted: (node, incarnation, delay) => {
        const stalled = this.stallOnCampaign.get(node.id);
        if (stalled && this.lastReady.get(node.id)?.softState?.role === 'candidate') {
          // The scenario's fsync stall: this Ready's votes wait until releaseDisk.
          this.stallOnCampaign.delete(node.id);
          this.heldPersist.set(node.id, incarnation);
          this.trace(node.id, 'disk stalls');
          stalled();
          return;
        }
        this.q.push(this.now + delay, { kind: 'persisted', node: node.id, incarnation });
      },
    };
  }

  private addNode(initialVoters: readonly NodeId[] | undefined): SimNode {
    const id = this.newNodeId();
    const disk = initialVoters ? MemoryLogStorage.bootstrap(initialVoters) : new MemoryLogStorage();
    const node = new SimNode(
      {
        id,
        rand: this.rand.fork(),
        hooks: this.hooks(),
        electionTimeoutTicks: ELECTION_TICKS,
        heartbeatTicks: HEARTBEAT_TICKS,
        snapshotEveryEntries: 40,
        maxMsgBytes: this.profile.maxMsgBytes,
        quiesceAfterTicks: this.profile.quiesceAfterTicks,
        makeRaft: this.opts.makeRaft,
      },
      disk,
    );
    this.nodes.set(id, node);
    const drift = this.profile.driftMax;
    this.clockRate.set(id, 1 + (this.rand.float() * 2 - 1) * drift);
    this.scheduleTick(node, this.rand.float() * TICK_MS);
    return node;
  }

  private scheduleTick(node: SimNode, delay?: number): void {
    const rate = (this.clockRate.get(node.id) ?? 1) / (this.clockSlow.get(node.id) ?? 1);
    this.q.push(this.now + (delay ?? TICK_MS / rate), {
      kind: 'tick',
      node: node.id,
      incarnation: node.incarnation,
    });
  }

  /** Scenario hook: sees every message before the network does (it may cut links). */
  beforeSend: ((m: Message) => void) | undefined;
  /** Scenario hook: a node just became leader (before its first messages leave). */
  onLeader: ((node: SimNode) => void) | undefined;

  private send(from: SimNode, m: Message): void {
    this.beforeSend?.(m);
    this.scenarios.beforeSend(m);
    const delays = this.net.plan(m.from, m.to);
    this.trace(
      m.from,
      `send ${describeMessage(m)} ${delays.length === 0 ? 'LOST' : delays.map((d) => d.toFixed(2)).join('+')}`,
      !isChatter(m),
    );
    for (const d of delays)
      this.q.push(this.now + d, { kind: 'node', node: m.to, item: { kind: 'msg', m } });
    if (m.type === 'snap') {
      // The transport reports a snapshot's fate back to the sender's Raft.
      const ok = delays.length > 0;
      const at = this.now + (delays[0] ?? 5);
      this.q.push(at, { kind: 'node', node: from.id, item: { kind: 'report-snap', to: m.to, ok } });
    }
  }

  // -------------------------------------------------------------------------------------
  // Invariants

  /** Exposed for the checker-can-fail tests. */
  checkReady(node: SimNode, rd: Ready): void {
    const r = node.raft;
    if (rd.softState?.role === 'leader') {
      const prior = this.leaderOfTerm.get(r.term);
      if (prior !== undefined && prior !== node.id) {
        this.fail(`two leaders in term ${r.term}: ${prior} and ${node.id}`);
      }
      this.leaderOfTerm.set(r.term, node.id);
      this.trace(
        node.id,
        `became leader t${r.term} last=${r.log.lastIndex()} commit=${r.log.committed}`,
      );
      this.onLeader?.(node);
      this.meter.becameLeader(node);
      this.scenarios.onLeader(node);
      // A nemesis for fresh leaders: cut one off before its no-op spreads, leaving an
      // uncommitted tail of its own term behind (the material of Figure 8).
      if (
        this.phase === 'safety' &&
        !this.scenarios.busy &&
        this.rand.chance(this.profile.newLeaderFaultP)
      ) {
        this.q.push(this.now + this.rand.float() * 3, { kind: 'isolate', node: node.id });
      }
      // Leader completeness: every committed entry is in the new leader's log.
      const first = r.log.firstIndex();
      for (const [index, term] of this.committed) {
        if (index < first) continue;
        const have = r.log.term(index);
        if (have !== term) {
          this.fail(
            `leader ${node.id} of t${r.term} lacks committed entry ${index} (t${term}); has t${have}`,
          );
        }
      }
    }
    // Persist-before-send: what the messages claim must be durable once this Ready is written,
    // and nothing in them may rest on state the previous Readys did not persist.
    const hs = rd.hardState ?? node.disk.hardStateNow();
    for (const m of rd.messages) {
      if (m.term > hs.term && m.type !== 'pre-vote' && m.type !== 'pre-vote-resp') {
        this.fail(`${node.id} sends ${m.type} in t${m.term} but persists t${hs.term}`);
      }
      // (A grant in an earlier term than the persisted one is moot: that term is over for this
      // node. A batch can span terms after a long fsync stall.)
      if (m.type === 'vote-resp' && !m.reject && m.term === hs.term && hs.vote !== m.to) {
        this.fail(`${node.id} grants its vote to ${m.to} but persists vote ${hs.vote || 'none'}`);
      }
    }
  }

  checkApplied(node: SimNode, e: Entry): void {
    if (e.index <= node.lastApplied)
      this.fail(`${node.id} applies ${e.index} after ${node.lastApplied}`);
    if (e.index !== node.lastApplied + 1) {
      this.fail(`${node.id} applies ${e.index} with a gap after ${node.lastApplied}`);
    }
    const key = `${e.term}:${e.type}:${Buffer.from(e.data).toString('base64')}`;
    const prior = this.appliedAt.get(e.index);
    if (prior !== undefined && prior !== key) {
      this.fail(`${node.id} applied a different entry at ${e.index}: ${key} vs ${prior}`);
    }
    this.appliedAt.set(e.index, key);
    this.recordCommitted(node.id, e.index, e.term);
  }

  private recordCommitted(who: NodeId, index: number, term: number): void {
    const prior = this.committed.get(index);
    if (prior !== undefined && prior !== term) {
      this.fail(`${who} committed t${term} at ${index} where t${prior} was committed`);
    }
    this.committed.set(index, term);
  }

  private checkAdvanced(node: SimNode): void {
    const r = node.raft;
    if (r.log.committed < node.lastCommit) {
      this.fail(`${node.id} commit went back from ${node.lastCommit} to ${r.log.committed}`);
    }
    for (let i = Math.max(node.lastCommit + 1, r.log.firstIndex()); i <= r.log.committed; i++) {
      const t = r.log.term(i);
      if (t !== undefined) this.recordCommitted(node.id, i, t);
    }
    node.lastCommit = r.log.committed;
    if (r.log.applied < node.lastApplied) {
      this.fail(`${node.id} applied index went back from ${node.lastApplied} to ${r.log.applied}`);
    }
  }

  /** Log matching: logs that agree on (index, term) agree on every entry before it. */
  checkLogMatching(): void {
    const live = [...this.nodes.values()].filter((n) => n.up);
    for (let a = 0; a < live.length; a++) {
      for (let b = a + 1; b < live.length; b++) {
        const x = live[a]!.raft.log;
        const y = live[b]!.raft.log;
        const lo = Math.max(x.firstIndex(), y.firstIndex());
        const hi = Math.min(x.lastIndex(), y.lastIndex());
        let agreeFrom = -1;
        for (let i = hi; i >= lo; i--) {
          if (x.term(i) === y.term(i)) {
            agreeFrom = i;
            break;
          }
        }
        if (agreeFrom < lo) continue;
        const xs = x.slice(lo, agreeFrom + 1, Infinity);
        const ys = y.slice(lo, agreeFrom + 1, Infinity);
        if (!xs || !ys) continue;
        for (let k = 0; k < xs.length; k++) {
          const e = xs[k]!;
          const f = ys[k]!;
          if (e.term !== f.term || !sameBytes(e.data, f.data)) {
            this.fail(
              `log matching broken between ${live[a]!.id} and ${live[b]!.id} at ${e.index} (agree at ${agreeFrom})`,
            );
          }
        }
      }
    }
  }

  // -------------------------------------------------------------------------------------
  // Clients

  private clientStep(clientId: number): void {
    if (this.clientBusy.has(clientId)) return;
    const key = KEYS[this.rand.int(KEYS.length)]!;
    const opId = this.nextOpId++;
    const roll = this.rand.float();
    let input: HistoryOp['input'];
    let kind: 'read' | 'write' = 'write';
    if (roll < 0.35) {
      input = { op: 'get', key };
      kind = 'read';
    } else if (roll < 0.6) {
      input = { op: 'put', key, value: `v${opId}`, opId };
    } else if (roll < 0.8) {
      input = { op: 'append', key, value: `.${opId}`, opId };
    } else {
      const expect = this.rand.chance(0.5) ? null : `v${this.rand.int(opId) + 1}`;
      input = { op: 'cas', key, expect, value: `v${opId}`, opId };
    }
    const op: ClientOp = {
      opId,
      clientId,
      kind,
      key,
      data: kind === 'write' ? encodeCommand(input as KvCommand) : undefined,
    };
    this.recordInvoke(opId, clientId, key, input);
    this.clientBusy.set(clientId, opId);
    this.faults.clientOps++;
    const target = this.pickNodeForClient(clientId);
    this.handedTo.set(opId, target);
    this.trace(`c${clientId}`, `invoke #${opId} ${JSON.stringify(input)} -> ${target}`);
    this.q.push(this.now + 0.5, { kind: 'node', node: target, item: { kind: 'client', op } });
    this.q.push(this.now + CLIENT_TIMEOUT_MS, { kind: 'client-timeout', opId });
  }

  /** Appends an invocation to the history; its outcome is filled in by complete(). */
  private recordInvoke(
    opId: number,
    clientId: number,
    key: string,
    input: HistoryOp['input'],
  ): void {
    const h: HistoryOp = {
      clientId,
      key,
      input,
      output: undefined,
      call: this.now,
      ret: Infinity,
      status: 'pending',
    };
    this.history.push(h);
    this.opsById.set(opId, h);
  }

  private pickNodeForClient(clientId: number): NodeId {
    const hint = this.clientLeaderHint.get(clientId);
    if (hint && this.nodes.get(hint)?.up && !this.rand.chance(0.1)) return hint;
    const ids = [...this.nodes.keys()];
    return ids[this.rand.int(ids.length)]!;
  }

  private complete(op: ClientOp, outcome: OpOutcome): void {
    if (op.opId < 0) {
      this.livenessOps.set(op.opId, outcome.status);
      this.trace('sim', `liveness op ${op.opId} ${outcome.status}`);
      return;
    }
    const h = this.opsById.get(op.opId);
    if (h && !this.settledAt.has(op.opId)) {
      // The system's answer, even to a client that has already timed out: progress needs one.
      this.settledAt.set(op.opId, this.now);
      if (h.call < this.healedAt && this.now >= this.healedAt) {
        this.progress.lastPendingOutcomeMs = Math.max(
          this.progress.lastPendingOutcomeMs,
          this.now - this.healedAt,
        );
      }
      const due = this.outcomeDue(h);
      if (this.now > due) {
        this.fail(
          `progress: ${this.describeOp(op.opId)} answered ${outcome.status} at ${this.now.toFixed(1)} ms, after its bound ${due.toFixed(1)} ms (bound ${this.outcomeBoundMs} ms after the heal)`,
        );
      }
    }
    if (!h || h.status !== 'pending') return;
    this.clientBusy.delete(op.clientId);
    if (outcome.status === 'ok') {
      h.status = 'ok';
      h.output = outcome.output;
      h.ret = this.now;
      this.faults.clientOk++;
    } else if (outcome.status === 'fail') {
      h.status = 'fail';
      h.ret = this.now;
      if (outcome.leaderHint) this.clientLeaderHint.set(op.clientId, outcome.leaderHint);
      else this.clientLeaderHint.delete(op.clientId);
    } else {
      h.status = 'unknown';
      this.faults.clientUnknown++;
    }
    this.trace(
      `c${op.clientId}`,
      `complete #${op.opId} ${outcome.status} ${JSON.stringify(outcome.status === 'ok' ? outcome.output : outcome.reason)}`,
    );
    if (op.clientId < this.profile.clients) {
      this.q.push(this.now + 1 + this.rand.float() * 20, { kind: 'client', clientId: op.clientId });
    }
  }

  private clientTimeout(opId: number): void {
    const h = this.opsById.get(opId);
    if (!h || h.status !== 'pending') return;
    // Timed out: the operation may or may not take effect, at any point after its call.
    h.status = 'unknown';
    this.faults.clientUnknown++;
    this.clientBusy.delete(h.clientId);
    this.clientLeaderHint.delete(h.clientId);
    this.trace(`c${h.clientId}`, `timeout #${opId}`);
    this.q.push(this.now + 1, { kind: 'client', clientId: h.clientId });
  }

  // -------------------------------------------------------------------------------------
  // Faults

  leader(): SimNode | undefined {
    let best: SimNode | undefined;
    for (const n of this.nodes.values()) {
      if (n.up && n.raft.role === 'leader' && (!best || n.raft.term > best.raft.term)) best = n;
    }
    return best;
  }

  private members(): NodeId[] {
    const l = this.leader();
    const cs = l?.raft.confState;
    if (!cs) return [...this.nodes.keys()];
    return [...new Set([...cs.voters, ...cs.votersOutgoing, ...cs.learners, ...cs.learnersNext])];
  }

  private faultStep(): void {
    // A window scenario running (or starting now) has the cluster to itself.
    if (this.scenarios.roll()) return;
    const p = this.profile;
    const r = this.rand;
    const ids = [...this.nodes.values()].filter((n) => n.up).map((n) => n.id);
    if (r.chance(p.crashP) && ids.length > 0) {
      // Half the time aim at a node in the middle of an fsync: that is where torn writes live.
      const busy = ids.filter((id) => this.nodes.get(id)!.isBusy);
      const pool = busy.length > 0 && r.chance(0.5) ? busy : ids;
      const victim = this.nodes.get(pool[r.int(pool.length)]!)!;
      const torn = r.chance(p.tornP);
      this.meter.crashing(victim);
      const what = victim.crash(torn ? r : new SeededRand(0));
      this.faults.crashes++;
      if (what.startsWith('torn')) this.faults.tornWrites++;
      this.trace('sim', `crash ${victim.id} (${what})`);
      this.q.push(this.now + 50 + r.float() * 1500, { kind: 'restart', node: victim.id });
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
      const what = this.net.partition(shape, [...this.nodes.keys()]);
      this.faults.partitions++;
      this.trace('sim', `partition ${what}`);
      this.q.push(this.now + 100 + r.float() * 1500, { kind: 'heal-partition' });
    }
    const target = this.leader();
    if (target?.up && r.chance(p.leaderFaultP)) {
      // Jepsen's favourite: hit the leader itself, so leadership churns with uncommitted tails.
      if (r.chance(0.5)) {
        this.meter.crashing(target);
        const what = target.crash(r);
        this.faults.crashes++;
        this.trace('sim', `crash leader ${target.id} (${what})`);
        this.q.push(this.now + 20 + r.float() * 400, { kind: 'restart', node: target.id });
      } else {
        this.net.isolate(target.id, [...this.nodes.keys()]);
        this.faults.partitions++;
        this.trace('sim', `isolate leader ${target.id}`);
        this.q.push(this.now + 50 + r.float() * 400, { kind: 'heal-partition' });
      }
    }
    const lead = this.leader();
    if (lead && r.chance(p.transferP)) {
      const voters = lead.raft.confState.voters.filter((v) => v !== lead.id);
      if (voters.length > 0) {
        const to = voters[r.int(voters.length)]!;
        this.faults.transfers++;
        this.q.push(this.now, { kind: 'node', node: lead.id, item: { kind: 'transfer', to } });
      }
    }
    if (lead && r.chance(p.confP)) {
      const cc = this.planConfChange(lead);
      if (cc) {
        this.faults.confChanges++;
        this.q.push(this.now, { kind: 'node', node: lead.id, item: { kind: 'conf', cc } });
      }
    }
  }

  /** Picks a membership change that keeps 3 to 5 voters; new nodes get fresh ids. */
  private planConfChange(lead: SimNode): ConfChange | undefined {
    const cs = lead.raft.confState;
    const r = this.rand;
    if (isJoint(cs)) return cs.autoLeave ? undefined : { transition: 'explicit', changes: [] };
    const voters = cs.voters;
    const roll = r.float();
    if (cs.learners.length > 0 && roll < 0.5) {
      const learner = cs.learners[r.int(cs.learners.length)]!;
      if (voters.length >= 5) {
        // Replace a voter (possibly the leader) atomically: joint consensus.
        const out = voters[r.int(voters.length)]!;
        return {
          transition: r.chance(0.7) ? 'auto' : 'explicit',
          changes: [
            { type: 'add-voter', nodeId: learner },
            { type: 'remove-node', nodeId: out },
          ],
        };
      }
      return {
        transition: r.chance(0.5) ? 'simple' : 'auto',
        changes: [{ type: 'add-voter', nodeId: learner }],
      };
    }
    if (roll < 0.75 && cs.learners.length === 0 && this.nodes.size < 9) {
      const node = this.addNode(undefined);
      this.trace('sim', `new empty node ${node.id}`);
      return { transition: 'simple', changes: [{ type: 'add-learner', nodeId: node.id }] };
    }
    if (voters.length > 3) {
      const out = voters[r.int(voters.length)]!;
      return {
        transition: r.chance(0.5) ? 'simple' : 'auto',
        changes: [{ type: 'remove-node', nodeId: out }],
      };
    }
    return undefined;
  }

  // -------------------------------------------------------------------------------------
  // Main loop

  private dispatch(ev: SimEvent): void {
    switch (ev.kind) {
      case 'node': {
        const n = this.nodes.get(ev.node);
        if (!n || !n.up) {
          // Connection refused: the client hears at once that its request went nowhere.
          if (ev.item.kind === 'client')
            this.complete(ev.item.op, { status: 'fail', reason: `${ev.node} is down` });
          return;
        }
        if (ev.item.kind === 'msg') {
          this.faults.delivered++;
          this.trace(n.id, `recv ${describeMessage(ev.item.m)}`, !isChatter(ev.item.m));
          this.meter.delivered(n, ev.item.m);
        } else if (ev.item.kind === 'client' && ev.item.op.kind === 'read') {
          this.meter.readHandedTo(n, ev.item.op.key);
        }
        n.deliver(ev.item);
        if (ev.item.kind === 'msg' && ev.item.m.type === 'app-resp') this.meter.stepped(n);
        return;
      }
      case 'tick': {
        const n = this.nodes.get(ev.node);
        if (!n || !n.up || n.incarnation !== ev.incarnation) return;
        this.trace(n.id, 'tick', false);
        n.deliver({ kind: 'tick' });
        this.scheduleTick(n);
        return;
      }
      case 'persisted': {
        const n = this.nodes.get(ev.node);
        if (!n) return;
        n.persisted(ev.incarnation);
        this.meter.stepped(n);
        return;
      }
      case 'fault':
        if (this.phase !== 'safety') return;
        this.faultStep();
        this.q.push(this.now + this.profile.faultEveryMs, { kind: 'fault' });
        return;
      case 'isolate':
        if (this.phase !== 'safety') return;
        this.net.isolate(ev.node, [...this.nodes.keys()]);
        this.faults.partitions++;
        this.trace('sim', `isolate new leader ${ev.node}`);
        this.q.push(this.now + 30 + this.rand.float() * 300, { kind: 'heal-partition' });
        return;
      case 'heal-partition': {
        if (this.phase !== 'safety') return;
        const all = [...this.nodes.keys()];
        const cutOff = all.filter((id) => this.net.isIsolated(id, all));
        this.net.heal();
        this.meter.rejoined(cutOff.filter((id) => !this.net.isIsolated(id, all)));
        this.faults.heals++;
        this.trace('sim', 'heal partitions');
        return;
      }
      case 'scenario':
        if (this.phase !== 'safety') return;
        ev.run();
        return;
      case 'restart': {
        const n = this.nodes.get(ev.node);
        if (!n || n.up) return;
        n.restart();
        this.faults.restarts++;
        this.trace('sim', `restart ${n.id} (term ${n.raft.term}, commit ${n.raft.log.committed})`);
        this.scheduleTick(n, this.rand.float() * TICK_MS);
        if (this.phase === 'safety') this.meter.restarted();
        return;
      }
      case 'client':
        if (!this.clientsOpen) return;
        this.clientStep(ev.clientId);
        return;
      case 'client-timeout':
        this.clientTimeout(ev.opId);
        return;
    }
  }

  runUntil(endMs: number, checkEvery = 25): void {
    for (;;) {
      const at = this.q.peekTime();
      if (at === undefined || at > endMs) break;
      const ev = this.q.pop()!;
      this.now = ev.at;
      this.events++;
      this.dispatch(ev.event);
      if (this.events % checkEvery === 0) this.checkLogMatching();
    }
    this.now = endMs;
  }

  /** Scenario DSL: kill -9 a node now. */
  crashNode(id: NodeId): void {
    const n = this.nodes.get(id);
    if (!n?.up) return;
    this.meter.crashing(n);
    const what = n.crash(this.rand);
    this.faults.crashes++;
    this.trace('sim', `crash ${id} (${what}) [scenario]`);
  }

  /** Scenario DSL: restart a crashed node now. */
  restartNode(id: NodeId): void {
    this.q.push(this.now, { kind: 'restart', node: id });
  }

  /** Scenario DSL: a client write of key=value handed to node `id`. */
  write(id: NodeId, key: string, value: string): void {
    const opId = this.nextOpId++;
    const input: KvCommand = { op: 'put', key, value, opId };
    const op: ClientOp = { opId, clientId: 99, kind: 'write', key, data: encodeCommand(input) };
    this.recordInvoke(opId, 99, key, input);
    this.handedTo.set(opId, id);
    this.q.push(this.now, { kind: 'node', node: id, item: { kind: 'client', op } });
  }

  /** What the window scenarios may do (window-scenarios.ts). */
  private scenarioHost(): ScenarioHost {
    return {
      net: this.net,
      nodes: this.nodes,
      meter: this.meter,
      after: (ms, run) => this.q.push(this.now + ms, { kind: 'scenario', run }),
      leader: () => this.leader(),
      crash: (id, why) => {
        const n = this.nodes.get(id);
        if (!n?.up) return;
        this.meter.crashing(n);
        const what = n.crash(this.rand);
        this.faults.crashes++;
        this.trace('sim', `crash ${id} (${what}) [${why}]`);
      },
      restart: (id) => this.q.push(this.now, { kind: 'restart', node: id }),
      invoke: (node, input) => this.invokeOn(node, input),
      slowClock: (id, factor) => {
        if (factor === 1) this.clockSlow.delete(id);
        else this.clockSlow.set(id, factor);
      },
      stallCampaign: (id, stalled) => this.stallOnCampaign.set(id, stalled),
      releaseDisk: (id) => {
        this.stallOnCampaign.delete(id);
        const incarnation = this.heldPersist.get(id);
        if (incarnation === undefined) return;
        this.heldPersist.delete(id);
        this.trace(id, 'disk resumes');
        this.q.push(this.now + 0.2 + this.rand.float() * 3, {
          kind: 'persisted',
          node: id,
          incarnation,
        });
      },
      campaign: (id) =>
        this.q.push(this.now, {
          kind: 'node',
          node: id,
          item: { kind: 'app', run: () => this.nodes.get(id)?.node.campaign() },
        }),
      trace: (line) => this.trace('sim', line),
    };
  }

  /** A scenario client's operation, handed to `node` (no client timeout: it never waits). */
  private invokeOn(
    node: NodeId,
    makeInput: (opId: number) => KvCommand | { op: 'get'; key: string },
  ): void {
    const opId = this.nextOpId++;
    const input = makeInput(opId);
    const kind = input.op === 'get' ? 'read' : 'write';
    const clientId = kind === 'read' ? 100 : 101;
    const op: ClientOp = {
      opId,
      clientId,
      kind,
      key: input.key,
      data: input.op === 'get' ? undefined : encodeCommand(input),
    };
    this.recordInvoke(opId, clientId, input.key, input);
    this.handedTo.set(opId, node);
    this.faults.clientOps++;
    this.trace(`c${clientId}`, `invoke #${opId} ${JSON.stringify(input)} -> ${node}`);
    this.q.push(this.now + 0.5, { kind: 'node', node, item: { kind: 'client', op } });
  }

  traceTailNow(): string[] {
    return this.traceLog.tail();
  }

  get nowMs(): number {
    return this.now;
  }

  /** Creates the initial voters and schedules faults and clients (run() calls it). */
  start(): void {
    if (this.nodes.size > 0) return;
    const ids: NodeId[] = [];
    for (let i = 0; i < this.profile.initialVoters; i++) ids.push(`n${i + 1}`);
    for (let i = 0; i < ids.length; i++) this.addNode(ids);
    this.trace('sim', `seed ${this.opts.seed} profile ${JSON.stringify(this.profile)}`);
    this.trace('sim', `window scenarios ${JSON.stringify(this.scenarios.mix)}`);
    if (!this.opts.calm) this.q.push(200, { kind: 'fault' });
    for (let c = 0; c < this.profile.clients; c++)
      this.q.push(50 + c, { kind: 'client', clientId: c });
  }

  run(): SimResult {
    let violation: string | undefined;
    try {
      this.start();
      const safetyEnd = this.opts.safetyMs ?? 5000;
      this.runUntil(safetyEnd);
      this.checkLogMatching();
      this.liveness(safetyEnd);
      this.checkLogMatching();
    } catch (err) {
      if (!(err instanceof Error)) throw err;
      violation = `${err.name}: ${err.message}`;
      this.trace('sim', `VIOLATION ${violation}`);
    }
    Object.assign(this.faults, {
      dropped: this.net.dropped,
      duplicated: this.net.duplicated,
      snapshotsTaken: sum([...this.nodes.values()].map((n) => n.snapshotsTaken)),
      snapshotsInstalled: sum([...this.nodes.values()].map((n) => n.snapshotsInstalled)),
    });
    return {
      seed: this.opts.seed,
      ok: violation === undefined,
      violation,
      traceHash: this.traceLog.digest(),
      traceTail: this.traceLog.tail(),
      faults: this.faults,
      history: this.history,
      events: this.events,
      endMs: this.now,
      finalLeader: this.leader()?.id,
      progress: this.progress,
      mix: this.scenarios.mix,
      windows: this.meter.counts,
    };
  }

  /**
   * Heal everything, then require progress within bounds: a leader (leaderBoundMs), an outcome
   * for every client operation ever invoked (outcomeBoundMs), committed writes after the heal.
   */
  private liveness(start: number): void {
    this.scenarios.finish('the faults heal');
    this.phase = 'liveness';
    this.healedAt = start;
    this.progress.pendingAtHeal = [...this.opsById.keys()].filter(
      (id) => !this.settledAt.has(id),
    ).length;
    this.net.healAll();
    this.clockSlow.clear();
    this.stallOnCampaign.clear();
    for (const id of [...this.heldPersist.keys()]) this.scenarioHost().releaseDisk(id);
    this.net.profile = CALM_NETWORK;
    for (const n of this.nodes.values()) {
      if (!n.up) {
        n.restart();
        this.scheduleTick(n, this.rand.float() * TICK_MS);
      }
    }
    this.trace('sim', `liveness: healed, all nodes up, ${this.progress.pendingAtHeal} ops pending`);
    const budget = this.opts.livenessMs ?? 4000;
    const leaderBy = start + this.leaderBoundMs;
    let lead: SimNode | undefined;
    while (this.now < leaderBy) {
      this.runUntil(Math.min(this.now + 10, leaderBy));
      lead = this.stableLeader();
      if (lead) break;
    }
    if (!lead) {
      this.fail(
        `progress: no leader followed by every member ${this.leaderBoundMs} ms after healing (${this.describeMembers()})`,
      );
    }
    this.progress.leaderMs = this.now - start;
    this.trace('sim', `liveness: leader ${lead.id} t${lead.raft.term}`);
    // From now on the cluster must make progress: each write (idempotent, so a retry after an
    // unknown outcome is harmless) must be answered within outcomeBoundMs and commit within the
    // budget, retried at the current leader when it ends without success (e.g. the leader
    // removes itself by a conf change in flight).
    const count = 5;
    const end = start + Math.max(budget, this.leaderBoundMs + this.outcomeBoundMs);
    let retries = 0;
    for (let i = 0; i < count; i++) {
      const opId = -1 - i;
      const data = encodeCommand({ op: 'put', key: 'live', value: `l${i}`, opId });
      const op: ClientOp = { opId, clientId: -1, kind: 'write', key: 'live', data };
      for (;;) {
        if (this.now >= end)
          this.fail(
            `progress: liveness write ${i} not committed by ${end} ms (${retries} retries)`,
          );
        const target = this.leader() ?? lead;
        const sentAt = this.now;
        this.livenessOps.set(opId, 'pending');
        this.q.push(this.now, { kind: 'node', node: target.id, item: { kind: 'client', op } });
        while (this.livenessOps.get(opId) === 'pending' && this.now < sentAt + this.outcomeBoundMs)
          this.runUntil(this.now + 10);
        const status = this.livenessOps.get(opId);
        if (status === 'pending') {
          this.fail(
            `progress: liveness write ${i} (op ${opId}) handed to ${target.id} at ${sentAt.toFixed(1)} ms has no outcome after ${this.outcomeBoundMs} ms (${this.describeMembers()})`,
          );
        }
        if (status === 'ok') break;
        retries++;
        this.runUntil(this.now + 20);
      }
    }
    this.clientsOpen = false;
    this.awaitOutcomes();
    while (this.now < end) {
      const values = this.members().map((id) => this.nodes.get(id)?.kv.get('live'));
      if (values.every((v) => v === `l${count - 1}`)) return;
      this.runUntil(this.now + 50);
    }
    const ops = [...this.livenessOps.entries()].map(([id, s]) => `${id}=${s}`).join(' ');
    this.fail(
      `liveness: proposals not applied everywhere by ${end} ms (${ops}; ${this.describeMembers()})`,
    );
  }

  /** When the client operation invoked at `call` must have its outcome by. */
  private outcomeDue(h: HistoryOp): number {
    return Math.max(h.call, this.healedAt) + this.outcomeBoundMs;
  }

  /** Runs until every client operation has an outcome; one past its bound is a violation. */
  private awaitOutcomes(): void {
    for (;;) {
      let due = Infinity;
      let late: number | undefined;
      for (const [id, h] of this.opsById) {
        if (this.settledAt.has(id)) continue;
        const d = this.outcomeDue(h);
        if (d < due) {
          due = d;
          late = id;
        }
      }
      if (late === undefined) return;
      if (this.now >= due) {
        this.fail(
          `progress: ${this.describeOp(late)} has no outcome ${this.outcomeBoundMs} ms after ${due - this.outcomeBoundMs > this.healedAt ? 'its invocation' : 'the heal'} (${this.describeMembers()})`,
        );
      }
      this.runUntil(Math.min(due, this.now + 50));
    }
  }

  private describeOp(opId: number): string {
    const h = this.opsById.get(opId);
    if (!h) return `op #${opId}`;
    return `op #${opId} (client ${h.clientId} ${JSON.stringify(h.input)} invoked at ${h.call.toFixed(1)} ms on ${this.handedTo.get(opId) ?? '?'})`;
  }

  private describeMembers(): string {
    return this.members()
      .map((id) => {
        const n = this.nodes.get(id);
        const pr = this.leader()?.raft.progress.get(id);
        const r = n?.raft;
        return `${id}:${n?.up ? '' : 'down/'}${r?.role}/t${r?.term}/lead=${r?.lead}/applied=${r?.log.applied}/last=${r?.log.lastIndex()} pr=${pr?.state}/m${pr?.match}/n${pr?.next}/active=${pr?.recentActive}/paused=${pr?.isPaused()}`;
      })
      .join(' ');
  }

  private stableLeader(): SimNode | undefined {
    const lead = this.leader();
    // A transfer still in progress legitimately refuses proposals: wait for it to settle.
    if (!lead || lead.isBusy || lead.raft.leadTransferee !== '') return undefined;
    // All members must follow it in its term.
    for (const id of this.members()) {
      const n = this.nodes.get(id);
      if (!n || n.raft.term !== lead.raft.term || n.raft.lead !== lead.id) return undefined;
    }
    return lead;
  }
}

function sum(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a === b) return true;
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

function isChatter(m: Message): boolean {
  return m.type === 'heartbeat' || m.type === 'heartbeat-resp';
}

export function describeMessage(m: Message): string {
  let s = `${m.type} ${m.from}>${m.to} t${m.term}`;
  if (m.type === 'app' || m.type === 'app-resp' || m.type === 'vote' || m.type === 'pre-vote') {
    s += ` i${m.index} lt${m.logTerm}`;
  }
  if (m.entries.length > 0)
    s += ` e${m.entries[0]!.index}..${m.entries[m.entries.length - 1]!.index}`;
  if (m.commit > 0) s += ` c${m.commit}`;
  if (m.reject) s += ` REJECT hint${m.rejectHint}`;
  if (m.snapshot) s += ` snap@${m.snapshot.meta.index}`;
  if (m.context) s += ` ctx${m.context}`;
  return s;
}

export function runSim(opts: SimOptions): SimResult {
  return new ClusterSim(opts).run();
}
