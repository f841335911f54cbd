/**
 * The classic fault windows that random faults almost never line up, as weighted scenarios
 * inside the random run (swarm testing: each seed draws its own mix and rate), and a meter that
 * counts how often each window was actually reached. The meter measures the condition itself on
 * the cluster, for every event of the run, whoever caused it; "a scenario started" is counted
 * apart and proves nothing.
 *
 * - Stale read: a leader cut off from the majority keeps getting a client's reads while the
 *   majority elects a new leader and commits writes. Reached when a read is handed to a node that
 *   still believes it leads term T while the leader of a later term has applied a different
 *   value for the key: a read answered there without confirming leadership is stale, and the
 *   linearizability checker sees it.
 * - Figure 8 (Raft §5.4.2): (a) a leader crashes with an entry of its own term durable on fewer
 *   than a quorum of voters; (c) a later leader sees a quorum holding an entry of an earlier term
 *   that it has not committed, the point where counting replicas of an old-term entry commits
 *   it; (d) a later leader's log replaces such an entry, which loses it if it had been committed.
 * - Pre-vote in flux: a voter that granted a candidate's pre-vote refuses the real vote of the
 *   same term because its log moved past the candidate's meanwhile, the point where a broken
 *   up-to-date check on the real vote (pre-vote intact) elects a leader that lacks a committed
 *   entry; a node cut off for a while rejoining during an election; a node restarting during
 *   an election.
 */
import type { SeededRand } from '../../src/base/rand.js';
import { isJoint } from '../../src/raft/conf-change.js';
import { NO_NODE, type ConfState, type Message, type NodeId } from '../../src/raft/messages.js';
import { jointCommitted } from '../../src/raft/quorum.js';
import type { Ready } from '../../src/raft/ready.js';
import type { KvCommand } from './kv.js';
import type { SimNetwork } from './sim-network.js';
import type { SimNode } from './sim-node.js';

export type WindowKind = 'staleRead' | 'figure8' | 'preVote';
export const WINDOW_KINDS: readonly WindowKind[] = ['staleRead', 'figure8', 'preVote'];

/** A seed's scenario mix: how often one starts, and the weight of each kind (0 = never). */
export interface ScenarioMix {
  /** Probability, at each fault roll with none running, that a scenario starts. */
  rate: number;
  weights: Record<WindowKind, number>;
}

export function drawScenarioMix(r: SeededRand): ScenarioMix {
  const weight = (): number => (r.chance(0.7) ? 0.1 + r.float() : 0);
  return {
    rate: r.chance(0.85) ? 0.15 + 0.45 * r.float() : 0,
    weights: { staleRead: weight(), figure8: weight(), preVote: weight() },
  };
}

export interface WindowCounts {
  /** Scenarios started, by kind (the attempts, not the hits). */
  staleReadScenarios: number;
  figure8Scenarios: number;
  preVoteScenarios: number;
  /** Reads handed to a deposed leader unaware of it, while the new leader's value differs. */
  staleReadWindow: number;
  /** (a) Leader crashes with an own-term entry durable on fewer than a quorum of voters. */
  fig8MinorityTail: number;
  /** (c) A leader's quorum-held, uncommitted entry is of an earlier term. */
  fig8OldTermQuorum: number;
  /** (d) A new leader's log replaces an entry that had been on a quorum as in (c). */
  fig8Overwrite: number;
  /** Real votes refused only on the log check by a voter that granted that pre-vote. */
  voteInFlux: number;
  /** A node cut off from every other rejoins while some voter is campaigning. */
  rejoinDuringElection: number;
  /** A node restarts while some voter is campaigning. */
  restartDuringElection: number;
}

export function zeroWindowCounts(): WindowCounts {
  return {
    staleReadScenarios: 0,
    figure8Scenarios: 0,
    preVoteScenarios: 0,
    staleReadWindow: 0,
    fig8MinorityTail: 0,
    fig8OldTermQuorum: 0,
    fig8Overwrite: 0,
    voteInFlux: 0,
    rejoinDuringElection: 0,
    restartDuringElection: 0,
  };
}

/** The hit counters (what the tests and the CLI report as "windows reached"). */
export const WINDOW_HITS = [
  'staleReadWindow',
  'fig8MinorityTail',
  'fig8OldTermQuorum',
  'fig8Overwrite',
  'voteInFlux',
  'rejoinDuringElection',
  'restartDuringElection',
] as const satisfies readonly (keyof WindowCounts)[];

// ---------------------------------------------------------------------------------------------
// The meter

function quorumOf(n: number): number {
  return Math.floor(n / 2) + 1;
}

/** Measures the windows on the live cluster; ClusterSim calls it at the points named below. */
export class WindowMeter {
  readonly counts: WindowCounts = zeroWindowCounts();
  /** (index → term) of entries seen on a quorum while a later term's leader had not committed them. */
  private readonly oldTermQuorum = new Map<number, number>();
  private readonly oldTermQuorumSeen = new Set<string>();
  /** `voter>candidate@term` for granted pre-votes. */
  private readonly preVoteGrants = new Set<string>();
  /** `voter<candidate@term` → the candidate's last index and term, from its vote request. */
  private readonly voteRequests = new Map<string, { index: number; logTerm: number }>();

  constructor(private readonly nodes: ReadonlyMap<NodeId, SimNode>) {}

  private electionInProgress(): boolean {
    for (const n of this.nodes.values()) {
      if (n.up && (n.raft.role === 'candidate' || n.raft.role === 'pre-candidate')) return true;
    }
    return false;
  }

  /** A client read is about to be handed to `n`. */
  readHandedTo(n: SimNode, key: string): void {
    if (!n.up || n.raft.role !== 'leader') return;
    for (const y of this.nodes.values()) {
      if (y === n || !y.up || y.raft.role !== 'leader' || y.raft.term <= n.raft.term) continue;
      if (y.kv.get(key) !== n.kv.get(key)) {
        this.counts.staleReadWindow++;
        return;
      }
    }
  }

  /** `n` is about to crash (Figure 8 (a) if it leads with a minority-held tail of its term). */
  crashing(n: SimNode): void {
    const r = n.raft;
    if (!n.up || r.role !== 'leader' || isJoint(r.confState)) return;
    const voters = r.confState.voters;
    const q = quorumOf(voters.length);
    for (let i = r.log.committed + 1; i <= n.disk.lastIndex(); i++) {
      if (n.disk.term(i) !== r.term) continue;
      let holders = 0;
      for (const v of voters) if (this.nodes.get(v)?.disk.term(i) === r.term) holders++;
      if (holders < q) {
        this.counts.fig8MinorityTail++;
        return;
      }
    }
  }

  /**
   * After a leader's view of its followers' logs may have moved (an append response, or its own
   * fsync): (c) an uncommitted quorum-held entry of an earlier term.
   */
  stepped(n: SimNode): void {
    const r = n.raft;
    if (!n.up || r.role !== 'leader') return;
    const [incoming, outgoing] = this.voterSets(r.confState);
    const index = jointCommitted(incoming, outgoing, (id) => r.progress.get(id)?.match ?? 0);
    if (index <= r.log.committed || !Number.isFinite(index)) return;
    const term = r.log.term(index);
    if (term === undefined || term >= r.term) return;
    const key = `${r.term}:${index}`;
    if (this.oldTermQuorumSeen.has(key)) return;
    this.oldTermQuorumSeen.add(key);
    this.oldTermQuorum.set(index, term);
    this.counts.fig8OldTermQuorum++;
  }

  /** Voter sets per configuration object (it is replaced, never changed, on a change). */
  private readonly voterSetCache = new WeakMap<ConfState, [Set<NodeId>, Set<NodeId>]>();

  private voterSets(cs: ConfState): [Set<NodeId>, Set<NodeId>] {
    let sets = this.voterSetCache.get(cs);
    if (!sets) {
      sets = [new Set(cs.voters), new Set(cs.votersOutgoing)];
      this.voterSetCache.set(cs, sets);
    }
    return sets;
  }

  /** `n` just became leader: (d) does its log replace an entry seen as in (c)? */
  becameLeader(n: SimNode): void {
    const log = n.raft.log;
    for (const [index, term] of this.oldTermQuorum) {
      const have = log.term(index);
      if (have === undefined) continue;
      this.oldTermQuorum.delete(index);
      if (have !== term) this.counts.fig8Overwrite++;
    }
  }

  /** A message is delivered to `n` (remembers what vote requests claimed). */
  delivered(n: SimNode, m: Message): void {
    if (m.type === 'vote') {
      this.voteRequests.set(`${n.id}<${m.from}@${m.term}`, { index: m.index, logTerm: m.logTerm });
    }
  }

  /** `n` produced a Ready: pre-vote grants, and real votes refused on the log check alone. */
  ready(n: SimNode, rd: Ready): void {
    for (const m of rd.messages) {
      if (m.type === 'pre-vote-resp' && !m.reject) {
        this.preVoteGrants.add(`${n.id}>${m.to}@${m.term}`);
      } else if (m.type === 'vote-resp' && m.reject) {
        const r = n.raft;
        const req = this.voteRequests.get(`${n.id}<${m.to}@${m.term}`);
        if (
          req !== undefined &&
          r.term === m.term &&
          r.vote === NO_NODE &&
          r.lead === NO_NODE &&
          this.preVoteGrants.has(`${n.id}>${m.to}@${m.term}`) &&
          !r.log.isUpToDate(req.index, req.logTerm)
        ) {
          this.counts.voteInFlux++;
        }
      }
    }
  }

  /** Nodes cut off from every other just got their links back. */
  rejoined(ids: readonly NodeId[]): void {
    if (ids.length > 0 && this.electionInProgress()) this.counts.rejoinDuringElection++;
  }

  /** `n` just restarted. */
  restarted(): void {
    if (this.electionInProgress()) this.counts.restartDuringElection++;
  }
}

// ---------------------------------------------------------------------------------------------
// The scenarios

/** What a scenario may do to the cluster; ClusterSim implements it. */
export interface ScenarioHost {
  readonly net: SimNetwork;
  readonly nodes: ReadonlyMap<NodeId, SimNode>;
  readonly meter: WindowMeter;
  /** Runs `run` after `ms` virtual ms. */
  after(ms: number, run: () => void): void;
  leader(): SimNode | undefined;
  crash(id: NodeId, why: string): void;
  /** Restarts a crashed node now. */
  restart(id: NodeId): void;
  /** A scenario client hands an operation to `node`; `input` gets the new op id. */
  invoke(node: NodeId, input: (opId: number) => KvCommand | { op: 'get'; key: string }): void;
  /** Makes `id`'s tick clock run `factor` times slower (1 restores it). */
  slowClock(id: NodeId, factor: number): void;
  /**
   * The next Ready in which `id` becomes candidate waits on its disk until releaseDisk (an fsync
   * stall): its vote requests go out only then. `stalled` runs when the stall begins.
   */
  stallCampaign(id: NodeId, stalled: () => void): void;
  releaseDisk(id: NodeId): void;
  /** `id` starts an election now (RawNode.campaign, pre-vote included). */
  campaign(id: NodeId): void;
  trace(line: string): void;
}

interface Scenario {
  readonly kind: WindowKind;
  onLeader?(n: SimNode): void;
  beforeSend?(m: Message): void;
}

const KEYS = ['a', 'b', 'c'];
/** Longest a scenario may run before it is ended, whatever step it is at. */
const SCENARIO_MAX_MS = 3000;

export class WindowScenarios {
  private active: Scenario | undefined;
  /** Bumped when a scenario ends, so its pending steps do nothing. */
  private generation = 0;
  private readonly crashed = new Set<NodeId>();
  private readonly slowed = new Set<NodeId>();
  /** Nodes with a disk stall set up or in progress. */
  private readonly stalled = new Set<NodeId>();

  constructor(
    private readonly host: ScenarioHost,
    readonly mix: ScenarioMix,
    private readonly rand: SeededRand,
    private readonly electionMs: number,
  ) {}

  get busy(): boolean {
    return this.active !== undefined;
  }

  get hasAny(): boolean {
    return this.mix.rate > 0 && WINDOW_KINDS.some((k) => this.mix.weights[k] > 0);
  }

  onLeader(n: SimNode): void {
    this.active?.onLeader?.(n);
  }

  beforeSend(m: Message): void {
    this.active?.beforeSend?.(m);
  }

  /** At a fault roll: perhaps starts a scenario. True while one runs (random faults pause). */
  roll(): boolean {
    if (this.active) return true;
    if (!this.hasAny || !this.rand.chance(this.mix.rate)) return false;
    const lead = this.host.leader();
    if (!lead || !this.quiet(lead)) return false;
    const kind = this.pickKind();
    const started =
      kind === 'staleRead'
        ? this.staleRead(lead)
        : kind === 'figure8'
          ? this.figure8(lead)
          : this.preVote(lead);
    if (!started) return false;
    this.active = started;
    this.host.meter.counts[`${kind}Scenarios`]++;
    const gen = this.generation;
    this.host.after(SCENARIO_MAX_MS, () => {
      if (gen === this.generation) this.finish('time limit');
    });
    return true;
  }

  /** Ends the running scenario: links back, clocks and disks normal, its crashed nodes up. */
  finish(why: string): void {
    if (!this.active) return;
    this.host.trace(`window ${this.active.kind} ends (${why})`);
    this.active = undefined;
    this.generation++;
    this.host.net.releaseAll();
    for (const id of this.slowed) this.host.slowClock(id, 1);
    this.slowed.clear();
    for (const id of this.stalled) this.host.releaseDisk(id);
    this.stalled.clear();
    for (const id of this.crashed) if (this.host.nodes.get(id)?.up === false) this.host.restart(id);
    this.crashed.clear();
  }

  /** A clean start: every voter up, no random partition, no transfer or joint config. */
  private quiet(lead: SimNode): boolean {
    const r = lead.raft;
    if (r.leadTransferee !== NO_NODE || isJoint(r.confState)) return false;
    if (r.confState.voters.length < 3 || !r.confState.voters.includes(lead.id)) return false;
    if (this.host.net.partitioned) return false;
    if (r.log.term(r.log.committed) !== r.term) return false;
    return r.confState.voters.every((v) => this.host.nodes.get(v)?.up === true);
  }

  private pickKind(): WindowKind {
    const w = this.mix.weights;
    let x = this.rand.float() * WINDOW_KINDS.reduce((s, k) => s + w[k], 0);
    for (const k of WINDOW_KINDS) {
      x -= w[k];
      if (x < 0) return k;
    }
    return 'preVote';
  }

  /** Runs `run` after `ms` unless this scenario has ended by then. */
  private step(ms: number, run: () => void): void {
    const gen = this.generation;
    this.host.after(ms, () => {
      if (gen === this.generation) run();
    });
  }

  private crash(id: NodeId, why: string): void {
    this.crashed.add(id);
    this.host.crash(id, why);
  }

  private restart(id: NodeId): void {
    this.crashed.delete(id);
    this.host.restart(id);
  }

  private all(): NodeId[] {
    return [...this.host.nodes.keys()];
  }

  private shuffled<T>(xs: readonly T[]): T[] {
    const a = xs.slice();
    for (let i = a.length - 1; i > 0; i--) {
      const j = this.rand.int(i + 1);
      [a[i], a[j]] = [a[j]!, a[i]!];
    }
    return a;
  }

  // -------------------------------------------------------------------------------------------
  // Stale read

  /**
   * The leader is cut off (its ticker perhaps starved, so it believes in its leadership longer;
   * the ReadIndex protocol must not depend on time), a reader keeps handing it reads of one key,
   * and a writer writes that key at whichever later-term leader the majority elects.
   */
  private staleRead(lead: SimNode): Scenario {
    const r = this.rand;
    const h = this.host;
    const key = KEYS[r.int(KEYS.length)]!;
    const term = lead.raft.term;
    h.net.holdIsolate(lead.id, this.all());
    const slow = r.chance(0.6) ? 1.5 + 3 * r.float() : 1;
    if (slow > 1) {
      this.slowed.add(lead.id);
      h.slowClock(lead.id, slow);
    }
    h.trace(
      `window stale-read: isolate leader ${lead.id} t${term}, reads of ${key} go to it, clock x${slow.toFixed(2)} slower`,
    );
    const readEvery = 6 + 14 * r.float();
    const writeEvery = 15 + 25 * r.float();
    const read = (): void => {
      if (lead.up) h.invoke(lead.id, () => ({ op: 'get', key }));
      this.step(readEvery * (0.5 + r.float()), read);
    };
    const write = (): void => {
      const y = h.leader();
      if (y && y !== lead && y.raft.term > term) {
        h.invoke(y.id, (opId) => ({ op: 'put', key, value: `s${opId}`, opId }));
      }
      this.step(writeEvery * (0.5 + r.float()), write);
    };
    this.step(1, read);
    this.step(writeEvery, write);
    this.step(2 * this.electionMs + 10 * this.electionMs * r.float(), () => this.finish('done'));
    return { kind: 'staleRead' };
  }

  // -------------------------------------------------------------------------------------------
  // Figure 8

  /**
   * The paper's Figure 8, randomized: (a) L1 appends X in its term t1 with its links to all but
   * a minority S cut, then crashes; (b) with S cut off, L2 wins t2 among nodes without X, is cut
   * off as it wins (its no-op stays home) and crashes; (c) L1 returns; if an X holder wins t3 it
   * may send X (an old-term entry, without its own no-op) to one more node, so that a quorum
   * holds X, and then it goes quiet and crashes; (d) with every holder of t3 entries cut off, L2
   * returns and can win with votes of nodes whose last entry is X, and replaces X. Needs one
   * entry per append message for (c) (a seed with large messages sends X with the t3 no-op).
   */
  private figure8(l1: SimNode): Scenario | undefined {
    const r = this.rand;
    const h = this.host;
    const all = this.all();
    const voters = l1.raft.confState.voters;
    const q = quorumOf(voters.length);
    // S must stay a minority with L1, the others must still elect L2 without S, and once L2 is
    // gone they must not be a quorum (so that in (c) only an X holder can win).
    const sSize = Math.min(q - 2, voters.length - 1 - q);
    if (sSize < 0 || voters.length - 2 - sSize >= q) return undefined;
    const followers = this.shuffled(voters.filter((v) => v !== l1.id));
    const s = followers.slice(0, sSize);
    const t1 = l1.raft.term;
    for (const o of all) if (o !== l1.id && !s.includes(o)) h.net.hold(l1.id, o);
    h.invoke(l1.id, (opId) => ({
      op: 'put',
      key: KEYS[r.int(KEYS.length)]!,
      value: `x${opId}`,
      opId,
    }));
    h.trace(`window figure8: (a) ${l1.id} t${t1} writes X reaching only [${s.join(',')}]`);
    let phase: 'a' | 'b' | 'c' | 'c-send' | 'd' = 'a';
    let l2: SimNode | undefined;
    let l3: SimNode | undefined;
    let t2 = 0;
    let t3 = 0;
    let passTo: NodeId | undefined;

    this.step(4 + 30 * r.float(), () => {
      this.crash(l1.id, 'figure8 (a)');
      h.net.release(l1.id);
      for (const x of s) h.net.holdIsolate(x, all);
      phase = 'b';
      h.trace(`window figure8: (b) ${l1.id} down, [${s.join(',')}] cut off`);
    });

    const enterD = (): void => {
      if (!l3 || !l2) return;
      this.crash(l3.id, 'figure8 (c)');
      h.net.releaseAll();
      // Whoever holds entries newer than L2's log would beat it: keep them out of (d).
      for (const n of h.nodes.values()) {
        if (n.up && n !== l2 && n.raft.log.lastTerm() > t2) h.net.holdIsolate(n.id, all);
      }
      phase = 'd';
      h.trace(`window figure8: (d) ${l3.id} down, ${l2.id} returns`);
      this.step(r.float() * 20, () => this.restart(l2!.id));
      this.step(15 * this.electionMs, () => this.finish('no leader in (d)'));
    };

    return {
      kind: 'figure8',
      onLeader: (n) => {
        if (phase === 'b' && n.raft.term > t1 && n !== l1 && !s.includes(n.id)) {
          l2 = n;
          t2 = n.raft.term;
          const cut = (): void => h.net.holdIsolate(n.id, all);
          if (r.chance(0.75)) cut();
          else this.step(3 * r.float(), cut);
          this.step(5 + 30 * r.float(), () => {
            this.crash(n.id, 'figure8 (b)');
            h.net.releaseAll();
            phase = 'c';
            h.trace(`window figure8: (c) ${n.id} down, ${l1.id} returns`);
            this.step(40 * r.float(), () => this.restart(l1.id));
          });
        } else if (phase === 'c' && n.raft.term > t2) {
          if (n !== l1 && !s.includes(n.id)) {
            this.finish(`(c) won by ${n.id}, which has no X`);
            return;
          }
          l3 = n;
          t3 = n.raft.term;
          phase = 'c-send';
          this.step(15 * this.electionMs, () => {
            if (phase === 'c-send') this.finish('(c) sent no old-term entry alone');
          });
        } else if (phase === 'd' && n.raft.term > t3) {
          this.step(20 + 100 * r.float(), () => this.finish('done'));
        }
      },
      beforeSend: (m) => {
        if (phase !== 'c-send' || !l3 || m.from !== l3.id) return;
        if (passTo !== undefined) {
          h.net.hold(l3.id, passTo);
          return;
        }
        const committed = l3.raft.log.committed;
        const oldOnly =
          m.type === 'app' &&
          m.entries.length > 0 &&
          m.entries.every((e) => e.term < t3 && e.index > committed);
        if (!oldOnly) return;
        // Let this copy through, then nothing more from L3 to anyone; L3 still hears the answer
        // (a quorum now holds the old-term entry) before it goes down.
        for (const o of all) if (o !== m.to) h.net.hold(l3.id, o);
        const to = m.to;
        passTo = to;
        const last = m.entries[m.entries.length - 1]!.index;
        let waited = 0;
        const awaitAck = (): void => {
          if ((l3!.raft.progress.get(to)?.match ?? 0) >= last || waited++ > 60) {
            this.step(2 + 8 * r.float(), enterD);
          } else {
            this.step(1, awaitAck);
          }
        };
        this.step(1, awaitAck);
      },
    };
  }

  // -------------------------------------------------------------------------------------------
  // Pre-vote in flux

  private preVote(lead: SimNode): Scenario | undefined {
    const roll = this.rand.float();
    if (roll < 0.5) return this.voteInFlux(lead);
    if (roll < 0.75) return this.rejoinDuringElection(lead);
    return this.restartsDuringElection(lead);
  }

  /**
   * A pre-vote whose answer goes stale before the real vote. Leader L, candidate C, voters Z (C
   * and Z a bare quorum), the others O. Z is cut off from L until its lease lapses; C, briefly
   * deaf to L, campaigns, and Z grants its pre-vote; C's disk stalls on the Ready that makes it
   * candidate, so its vote requests wait. Meanwhile Z rejoins L and L commits entries C lacks;
   * then L and O are cut off, so Z cannot elect among itself. When C's disk returns, Z's lease
   * from L has lapsed and only the up-to-date check on the real vote stands between C and a
   * leadership without those committed entries. C's ticker is starved as well (its clock runs
   * several times slower), or the ticks it catches up on after the stall would start its next
   * election before the answers to its votes arrive.
   */
  private voteInFlux(lead: SimNode): Scenario | undefined {
    const r = this.rand;
    const h = this.host;
    const all = this.all();
    const voters = lead.raft.confState.voters;
    if (voters.length % 2 === 0) return this.rejoinDuringElection(lead);
    const q = quorumOf(voters.length);
    const followers = this.shuffled(voters.filter((v) => v !== lead.id));
    const c = h.nodes.get(followers[0]!)!;
    const z = followers.slice(1, q);
    const others = followers.slice(q);
    for (const x of z) {
      h.net.hold(lead.id, x);
      h.net.hold(x, lead.id);
    }
    const slow = 3 + 3 * r.float();
    this.slowed.add(c.id);
    h.slowClock(c.id, slow);
    h.trace(
      `window pre-vote: vote in flux, leader ${lead.id}, candidate ${c.id} (clock x${slow.toFixed(2)} slower), voters [${z.join(',')}]`,
    );
    let stalled = false;
    const stallStarted = (): void => {
      stalled = true;
      // Z and L meet again; C hears L again too, but only once its disk returns (after its votes).
      h.net.releaseAll();
      h.invoke(lead.id, (opId) => ({
        op: 'put',
        key: KEYS[r.int(KEYS.length)]!,
        value: `f${opId}`,
        opId,
      }));
      h.trace(
        `window pre-vote: ${c.id} candidate t${c.raft.term}, disk stalled; [${z.join(',')}] rejoin ${lead.id}`,
      );
      const cLast = c.raft.log.lastIndex();
      let waited = 0;
      const poll = (): void => {
        if (lead.raft.role !== 'leader' || waited > 300) {
          this.finish('leader lost before it committed past the candidate');
          return;
        }
        if (lead.raft.log.committed <= cLast) {
          waited++;
          this.step(1, poll);
          return;
        }
        for (const x of [lead.id, ...others]) h.net.holdIsolate(x, all);
        h.trace(
          `window pre-vote: ${lead.id} committed ${lead.raft.log.committed} > ${cLast}; it and [${others.join(',')}] cut off`,
        );
        this.step(this.electionMs * (1.1 + 0.9 * r.float()), () => {
          h.releaseDisk(c.id);
          this.stalled.delete(c.id);
        });
        this.step(4 * this.electionMs, () => this.finish('done'));
      };
      poll();
    };
    this.step(this.electionMs * (1.2 + 0.8 * r.float()), () => {
      h.net.hold(lead.id, c.id);
      this.stalled.add(c.id);
      h.stallCampaign(c.id, stallStarted);
      // A lost pre-vote or answer would leave C waiting for its (slow) election timeout: ask
      // again a few times, as an operator's campaign command would.
      let tries = 0;
      const campaign = (): void => {
        if (stalled) return;
        if (++tries > 4) {
          this.finish('the candidate did not pass pre-vote');
          return;
        }
        h.campaign(c.id);
        this.step(this.electionMs / 4, campaign);
      };
      campaign();
    });
    return { kind: 'preVote' };
  }

  /** A follower cut off for a while (pre-vote keeps its term) rejoins during an election. */
  private rejoinDuringElection(lead: SimNode): Scenario | undefined {
    const r = this.rand;
    const h = this.host;
    const all = this.all();
    const followers = lead.raft.confState.voters.filter((v) => v !== lead.id);
    const x = followers[r.int(followers.length)]!;
    h.net.holdIsolate(x, all);
    h.trace(`window pre-vote: ${x} cut off, to rejoin during an election`);
    this.step(this.electionMs * (2 + 6 * r.float()), () => {
      const l = h.leader();
      if (!l || l.id === x) {
        this.finish('no leader to depose');
        return;
      }
      if (r.chance(0.5)) this.crash(l.id, 'pre-vote: depose the leader');
      else h.net.holdIsolate(l.id, all);
      const rejoin = this.electionMs * (0.9 + 1.6 * r.float());
      this.step(rejoin, () => {
        h.net.release(x);
        h.meter.rejoined([x]);
        h.trace(`window pre-vote: ${x} rejoins`);
      });
      this.step(rejoin + this.electionMs * (1 + 3 * r.float()), () => this.finish('done'));
    });
    return { kind: 'preVote' };
  }

  /** The leader goes, and followers restart while the others elect. */
  private restartsDuringElection(lead: SimNode): Scenario | undefined {
    const r = this.rand;
    const h = this.host;
    const followers = lead.raft.confState.voters.filter((v) => v !== lead.id);
    this.crash(lead.id, 'pre-vote: elections while nodes restart');
    const restarts = 1 + r.int(2);
    for (let i = 0; i < restarts; i++) {
      this.step(this.electionMs * (0.8 + 1.5 * r.float()), () => {
        const id = followers[r.int(followers.length)]!;
        if (!h.nodes.get(id)?.up) return;
        this.crash(id, 'pre-vote: restart during the election');
        this.step(30 * r.float(), () => this.restart(id));
      });
    }
    this.step(this.electionMs * (3 + 2 * r.float()), () => this.finish('done'));
    return { kind: 'preVote' };
  }
}
