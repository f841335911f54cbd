/**
 * The Raft state machine for one replica of one group: roles, terms, votes, replication,
 * commit, ReadIndex, leader lease, leadership transfer and membership. It does no I/O and reads
 * no clock: time is `tick()`, randomness an injected Rand, and everything it wants done comes
 * out through `msgs`, the log's unstable tail and the read states, gathered by RawNode.
 *
 * Leader lease and clock drift. Ticks are counted from each node's own monotonic clock. We
 * assume clock *rates* differ between nodes by a small bounded factor and messages are not
 * delayed for longer than `leaseSafetyTicks` worth of that error; wall-clock offsets do not
 * matter. Under that assumption, once a quorum acknowledged a heartbeat sent at leader tick S,
 * no other node can win an election before S + electionTimeoutTicks on any quorum member's
 * clock, because each member ignores vote requests for electionTimeoutTicks after hearing from
 * the leader (check-quorum), and a member that restarts ignores them for electionTimeoutTicks
 * after its start. The leader therefore holds its lease until tick S + electionTimeoutTicks -
 * leaseSafetyTicks. A leadership transfer voids the lease at once (the transferee campaigns
 * without waiting, with votes that ignore leases), and so does any TimeoutNow sent less than an
 * election timeout ago. Without check-quorum there is no lease.
 */
import { assert, assertionFailed } from '../base/assert.js';
import type { Rand } from '../base/rand.js';
import type { CompiledRaftConfig } from './config.js';
import {
  allMembers,
  applyConfChange,
  decodeConfChange,
  encodeConfChange,
  isJoint,
} from './conf-change.js';
import { RaftLog } from './log.js';
import type { LogStorage } from './log-storage.js';
import {
  EMPTY_CONF_STATE,
  entryBytes,
  message,
  NO_NODE,
  type ConfChange,
  type ConfState,
  type Entry,
  type HardState,
  type Message,
  type NodeId,
  type Snapshot,
} from './messages.js';
import { Progress } from './progress.js';
import { jointCommitted, jointVote, type VoteResult } from './quorum.js';
import type { ReadFailure, ReadState, Role } from './ready.js';

export type ProposalRejection =
  | 'not-leader'
  | 'transferring'
  | 'too-large'
  | 'queue-full'
  | 'conf-change-pending'
  | 'invalid-conf-change';

export type ProposeResult =
  | { readonly ok: true; readonly index: number; readonly term: number }
  | {
      readonly ok: false;
      readonly reason: ProposalRejection;
      readonly leaderHint: NodeId;
      readonly detail?: string;
    };

type CampaignKind = 'pre-election' | 'election' | 'transfer';

interface PendingRead {
  readonly requestId: number;
  readonly from: NodeId;
  readonly index: number;
  /** Heartbeat round that must be acknowledged by a quorum; 0 = not yet broadcast. */
  round: number;
}

const TRANSFER_CONTEXT = 1;

export interface RaftInit {
  readonly id: NodeId;
  readonly storage: LogStorage;
  readonly config: CompiledRaftConfig;
  readonly rand: Rand;
  /** Index the state machine has already applied (from its own durable state). */
  readonly applied?: number;
}

export class Raft {
  readonly id: NodeId;
  readonly config: CompiledRaftConfig;
  readonly log: RaftLog;
  private readonly rand: Rand;

  term = 0;
  vote: NodeId = NO_NODE;
  lead: NodeId = NO_NODE;
  role: Role = 'follower';

  confState: ConfState = EMPTY_CONF_STATE;
  private incoming = new Set<NodeId>();
  private outgoing = new Set<NodeId>();
  readonly progress = new Map<NodeId, Progress>();
  private readonly votes = new Map<NodeId, boolean>();

  msgs: Message[] = [];
  readStates: ReadState[] = [];

  /** Ticks since this replica started; the leader's lease clock. */
  ticks = 0;
  private electionElapsed = 0;
  private heartbeatElapsed = 0;
  private randomizedElectionTimeout = 0;
  /** A restarted node ignores (pre-)vote requests this long: see the lease note above. */
  private startupQuietTicks: number;

  leadTransferee: NodeId = NO_NODE;
  /**
   * Tick of the last TimeoutNow sent. Its target campaigns with votes that ignore leases, so
   * no heartbeat round sent before this tick + electionTimeoutTicks can back a lease, even if
   * the transfer was abandoned meanwhile.
   */
  private lastTimeoutNowTick = Number.NEGATIVE_INFINITY;
  /** Index of the latest conf change appended by this leader; one may be in flight at a time. */
  private pendingConfIndex = 0;
  private uncommittedBytes = 0;

  /**
   * Quiescence: an idle, caught-up group stops heartbeating and its followers stop their
   * election timers. Leader: ticks since the last activity. Followers wake on any message from
   * the leader, or when the runtime calls wakeUp (the leader's node looks dead).
   */
  quiesced = false;
  /** The campaign under way was started by a leadership transfer (timeout-now). */
  private campaignByTransfer = false;
  /** Pre-elections this pre-candidate has started in a row (outranks()). */
  private preElectionRound = 0;
  /**
   * This leader won a campaign started by a leadership transfer: its predecessor handed the
   * group over (the runtime drains before it transfers) rather than failing.
   */
  leadsByTransfer = false;
  /** setDueSoon(): the runtime says work is due soon, so the group must not stay quiet. */
  private dueSoon = false;
  private idleTicks = 0;
  /** Heartbeat round in progress when the commit index last moved. */
  private commitRound = 0;

  private heartbeatRound = 0;
  private readonly roundTicks = new Map<number, number>();
  private pendingReads: PendingRead[] = [];
  private readsAwaitingCommit: PendingRead[] = [];
  /**
   * Follower: ReadIndex requests sent to the leader and not yet answered, with the tick each was
   * sent at. The request or its answer can be lost (a dropped connection, a leader that stepped
   * down); without an end here the caller would wait forever.
   */
  private readonly forwardedReads = new Map<number, number>();

  constructor(init: RaftInit) {
    this.id = init.id;
    this.config = init.config;
    this.rand = init.rand;
    this.log = new RaftLog(init.storage, init.applied ?? 0);
    const { hardState, confState } = init.storage.initialState();
    const snap = init.storage.snapshot();
    this.setConfState(snap && snap.meta.index > 0 ? snap.meta.confState : confState);
    if (hardState.term > 0 || hardState.vote !== NO_NODE || hardState.commit > 0) {
      this.loadHardState(hardState);
    }
    this.startupQuietTicks = this.config.electionTimeoutTicks;
    this.becomeFollower(this.term, NO_NODE);
  }

  private loadHardState(hs: HardState): void {
    if (!(hs.commit >= this.log.committed && hs.commit <= this.log.lastIndex()))
      assertionFailed(
        `hard state commit ${hs.commit} out of [${this.log.committed}, ${this.log.lastIndex()}]`,
      );
    this.term = hs.term;
    this.vote = hs.vote;
    this.log.committed = hs.commit;
  }

  hardState(): HardState {
    return { term: this.term, vote: this.vote, commit: this.log.committed };
  }

  // ---------------------------------------------------------------------------------------
  // Configuration

  private setConfState(cs: ConfState): void {
    this.confState = cs;
    this.incoming = new Set(cs.voters);
    this.outgoing = new Set(cs.votersOutgoing);
    const members = allMembers(cs);
    for (const id of [...this.progress.keys()]) {
      if (!members.has(id)) this.progress.delete(id);
    }
    const learners = new Set([...cs.learners, ...cs.learnersNext]);
    for (const id of members) {
      const existing = this.progress.get(id);
      const isLearner = learners.has(id) && !this.incoming.has(id) && !this.outgoing.has(id);
      if (existing) {
        existing.isLearner = isLearner;
      } else {
        const pr = this.newProgress(isLearner);
        this.progress.set(id, pr);
      }
    }
  }

  private newProgress(isLearner: boolean): Progress {
    const pr = new Progress(
      this.log.lastIndex() + 1,
      this.config.maxInflightMsgs,
      this.config.maxInflightBytes,
      isLearner,
    );
    return pr;
  }

  isVoter(id: NodeId): boolean {
    return this.incoming.has(id) || this.outgoing.has(id);
  }

  /** Voters may campaign; learners and removed or not-yet-configured nodes may not. */
  private isPromotable(): boolean {
    return this.isVoter(this.id);
  }

  private voteResult(): VoteResult {
    return jointVote(this.incoming, this.outgoing, this.votes);
  }

  // ---------------------------------------------------------------------------------------
  // Role transitions

  private reset(term: number): void {
    if (this.term !== term) {
      // What is queued from an earlier term speaks for a state this replica has just left: a
      // leader's appends and heartbeats, a vote, an acknowledgement of entries that a message of
      // the new term may overwrite before this Ready is persisted. It would leave after that
      // persist, so a receiver still in the old term could count an acknowledgement of an entry
      // the sender no longer holds. Dropped, as a network may drop it; the new term's own
      // messages follow.
      if (this.msgs.length > 0) this.msgs = this.msgs.filter((m) => m.term >= term);
      this.term = term;
      this.vote = NO_NODE;
    }
    if (this.role === 'leader') this.failPendingReads('leadership-lost');
    this.failForwardedReads('leadership-lost');
    this.lead = NO_NODE;
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    this.randomizedElectionTimeout =
      this.config.electionTimeoutTicks + this.rand.int(this.config.electionJitterTicks);
    this.leadTransferee = NO_NODE;
    this.lastTimeoutNowTick = Number.NEGATIVE_INFINITY;
    this.votes.clear();
    this.pendingConfIndex = 0;
    this.uncommittedBytes = 0;
    this.heartbeatRound = 0;
    this.roundTicks.clear();
    this.quiesced = false;
    this.idleTicks = 0;
    this.commitRound = 0;
    const last = this.log.lastIndex();
    for (const [id, pr] of this.progress) {
      const fresh = this.newProgress(pr.isLearner);
      fresh.next = last + 1;
      if (id === this.id) fresh.match = this.log.lastStableIndex();
      this.progress.set(id, fresh);
    }
  }

  becomeFollower(term: number, lead: NodeId): void {
    this.reset(term);
    this.role = 'follower';
    this.lead = lead;
  }

  private becomePreCandidate(): void {
    assert(this.role !== 'leader', 'a leader cannot become pre-candidate');
    // Pre-vote changes neither term nor vote: a failed pre-election leaves no trace.
    this.votes.clear();
    this.role = 'pre-candidate';
    this.lead = NO_NODE;
  }

  private becomeCandidate(): void {
    assert(this.role !== 'leader', 'a leader cannot become candidate');
    this.reset(this.term + 1);
    this.vote = this.id;
    this.role = 'candidate';
  }

  private becomeLeader(): void {
    if (this.role !== 'candidate')
      assertionFailed(`only a candidate becomes leader (was ${this.role})`);
    this.reset(this.term);
    this.role = 'leader';
    this.lead = this.id;
    this.leadsByTransfer = this.campaignByTransfer;
    // A conf change may sit uncommitted in our log; be conservative and treat it as pending.
    this.pendingConfIndex = this.log.lastIndex();
    // The no-op of the new term (Raft §8): committing it commits every earlier entry and lets
    // ReadIndex and the lease start.
    this.appendEntries([{ term: this.term, index: 0, type: 'normal', data: new Uint8Array() }]);
  }

  // ---------------------------------------------------------------------------------------
  // Ticks

  /**
   * Advances time by `n` ticks. After a stall (GC, SIGSTOP) the runtime passes every elapsed
   * tick at once: the lease clock must never fall behind real time, but one catch-up should
   * cost one heartbeat, not `n`.
   */
  tick(n = 1): void {
    if (!(Number.isSafeInteger(n) && n >= 1))
      assertionFailed(`tick count must be a positive integer, got ${n}`);
    if (n > 1) {
      const skipped = n - 1;
      this.ticks += skipped;
      this.startupQuietTicks = Math.max(0, this.startupQuietTicks - skipped);
      this.electionElapsed += skipped;
      this.heartbeatElapsed += skipped;
    }
    this.ticks++;
    if (this.startupQuietTicks > 0) this.startupQuietTicks--;
    if (this.forwardedReads.size > 0) this.expireForwardedReads();
    if (this.role === 'leader') this.tickHeartbeat();
    else this.tickElection();
  }

  /** Ticks between a quiesced leader's beacons. */
  private get beaconTicks(): number {
    return this.config.electionTimeoutTicks * 3;
  }

  /** Ticks a quiesced follower waits without a beacon before it campaigns. */
  private get quiescedTimeoutTicks(): number {
    return this.beaconTicks * 3;
  }

  private tickElection(): void {
    this.electionElapsed++;
    // hup() would refuse (see there): the timer stays expired, and the first tick after the
    // apply caught up campaigns, rather than a whole election timeout later.
    if (this.applyBehindCommit) return;
    if (this.quiesced) {
      // Three beacons missed: the leader is gone or cut off. Wake up and run an election.
      if (this.electionElapsed >= this.quiescedTimeoutTicks + this.randomizedElectionTimeout) {
        this.quiesced = false;
        this.electionElapsed = 0;
        this.hup('pre-election');
      }
      return;
    }
    if (this.isPromotable() && this.electionElapsed >= this.randomizedElectionTimeout) {
      this.electionElapsed = 0;
      this.hup('pre-election');
    }
  }

  private tickHeartbeat(): void {
    if (this.quiesced) {
      // No check-quorum while quiet (and no lease either: no heartbeat round is acknowledged).
      if (++this.heartbeatElapsed >= this.beaconTicks) {
        this.heartbeatElapsed = 0;
        this.sendQuiesce();
      }
      return;
    }
    if (this.config.quiesceAfterTicks > 0 && ++this.idleTicks >= this.config.quiesceAfterTicks) {
      if (this.maybeQuiesce()) return;
    }
    this.heartbeatElapsed++;
    this.electionElapsed++;
    if (this.electionElapsed >= this.config.electionTimeoutTicks) {
      this.electionElapsed = 0;
      if (this.config.checkQuorum) {
        if (!this.isQuorumActive()) {
          this.becomeFollower(this.term, NO_NODE);
          return;
        }
        for (const [id, pr] of this.progress) if (id !== this.id) pr.recentActive = false;
      }
      // A transfer that did not finish within an election timeout is abandoned.
      if (this.leadTransferee !== NO_NODE) this.leadTransferee = NO_NODE;
    }
    if (this.heartbeatElapsed >= this.config.heartbeatTicks) {
      this.heartbeatElapsed = 0;
      this.bcastHeartbeat();
    }
  }

  private isQuorumActive(): boolean {
    const active = new Map<NodeId, boolean>();
    for (const [id, pr] of this.progress) active.set(id, id === this.id || pr.recentActive);
    return this.voteResult_(active) === 'won';
  }

  private voteResult_(votes: ReadonlyMap<NodeId, boolean>): VoteResult {
    return jointVote(this.incoming, this.outgoing, votes);
  }

  // ---------------------------------------------------------------------------------------
  // Elections

  /**
   * Starts an election unless this node may not: a leader, a learner, a node with an unapplied
   * configuration change, or (unless the leader handed it the group) a node that has not applied
   * all it knows to be committed.
   */
  hup(kind: CampaignKind): void {
    if (this.role === 'leader') return;
    if (!this.isPromotable()) return;
    // Finding out whether the unapplied entries hold a configuration change reads them all, and
    // a node replaying a long log after a restart would read them twice (once more to apply
    // them). It waits instead: applying is local and always finishes, a node still applying
    // could not act as leader yet anyway, and waiting is always safe. A transfer is not delayed:
    // the leader hands the group only to a follower whose log matches its own.
    if (kind !== 'transfer' && this.applyBehindCommit) return;
    if (this.hasUnappliedConfChange()) return;
    this.campaign(this.config.preVote || kind !== 'pre-election' ? kind : 'election');
  }

  /** Entries known to be committed are still to be applied. */
  private get applyBehindCommit(): boolean {
    return this.log.committed > this.log.applied;
  }

  private hasUnappliedConfChange(): boolean {
    if (!this.applyBehindCommit) return false;
    const ents = this.log.slice(this.log.applied + 1, this.log.committed + 1, Infinity);
    return ents?.some((e) => e.type === 'conf-change') ?? false;
  }

  private campaign(kind: CampaignKind): void {
    this.campaignByTransfer = kind === 'transfer';
    this.preElectionRound =
      kind === 'pre-election' && this.role === 'pre-candidate' ? this.preElectionRound + 1 : 1;
    let voteTerm: number;
    let type: 'pre-vote' | 'vote';
    if (kind === 'pre-election') {
      this.becomePreCandidate();
      voteTerm = this.term + 1;
      type = 'pre-vote';
    } else {
      this.becomeCandidate();
      voteTerm = this.term;
      type = 'vote';
    }
    this.votes.set(this.id, true);
    const result = this.voteResult();
    if (result === 'won') {
      if (kind === 'pre-election') this.campaign('election');
      else this.becomeLeader();
      return;
    }
    const voters = new Set([...this.incoming, ...this.outgoing]);
    for (const id of voters) {
      if (id === this.id) continue;
      this.send(
        message({
          type,
          from: this.id,
          to: id,
          term: voteTerm,
          index: this.log.lastIndex(),
          logTerm: this.log.lastTerm(),
          context: kind === 'transfer' ? TRANSFER_CONTEXT : 0,
        }),
      );
    }
  }

  private handleVoteRequest(m: Message): void {
    const canVote =
      this.vote === m.from ||
      (this.vote === NO_NODE && this.lead === NO_NODE) ||
      (m.type === 'pre-vote' && m.term > this.term);
    const respType = m.type === 'vote' ? 'vote-resp' : 'pre-vote-resp';
    if (canVote && this.log.isUpToDate(m.index, m.logTerm) && !this.outranks(m)) {
      // A granted pre-vote answers with the candidate's future term so it is not ignored.
      this.send(message({ type: respType, from: this.id, to: m.from, term: m.term }));
      if (m.type === 'vote') {
        this.electionElapsed = 0;
        this.vote = m.from;
      }
    } else {
      this.send(
        message({ type: respType, from: this.id, to: m.from, term: this.term, reject: true }),
      );
    }
  }

  /**
   * Two followers whose timers run out together would both win their pre-votes (each grants
   * the other), both become candidates, vote for themselves and split the vote: another
   * election timeout lost, and under load (slow messages widen "together") one split after
   * another. So a pre-candidate grants another's pre-vote only if that one ranks above it: a
   * more up-to-date log, or as up to date and a greater id. Of several pre-candidates the top
   * one then wins and the others follow it. Pre-vote changes no state, so this only decides
   * who campaigns. Only in a pre-candidate's first round: one that could not win it (its own
   * messages do not get through, say) grants as a follower would from then on, so it never
   * holds the others back for more than one election timeout.
   */
  private outranks(m: Message): boolean {
    if (m.type !== 'pre-vote' || this.role !== 'pre-candidate' || this.preElectionRound > 1)
      return false;
    const ourTerm = this.log.lastTerm();
    if (m.logTerm !== ourTerm) return ourTerm > m.logTerm;
    const ourIndex = this.log.lastIndex();
    if (m.index !== ourIndex) return ourIndex > m.index;
    return this.id > m.from;
  }

  // ---------------------------------------------------------------------------------------
  // Step: term handling in one place, then per role

  step(m: Message): void {
    if (m.to !== this.id) assertionFailed(`message for ${m.to} stepped into ${this.id}`);
    if (m.term > this.term) {
      if (m.type === 'vote' || m.type === 'pre-vote') {
        const force = m.context === TRANSFER_CONTEXT;
        const inLease =
          this.config.checkQuorum &&
          this.lead !== NO_NODE &&
          this.electionElapsed <
            (this.quiesced ? this.quiescedTimeoutTicks : this.config.electionTimeoutTicks);
        // Heard from a live leader recently (or just restarted): a disruptive candidate is
        // ignored, which is what makes the leader lease sound.
        if (!force && (inLease || this.startupQuietTicks > 0)) return;
      }
      if (m.type === 'pre-vote' || (m.type === 'pre-vote-resp' && !m.reject)) {
        // Pre-vote traffic never changes our term.
      } else if (
        m.type === 'app' ||
        m.type === 'heartbeat' ||
        m.type === 'snap' ||
        m.type === 'quiesce'
      ) {
        this.becomeFollower(m.term, m.from);
      } else {
        this.becomeFollower(m.term, NO_NODE);
      }
    } else if (m.term < this.term) {
      if (
        (this.config.checkQuorum || this.config.preVote) &&
        (m.type === 'heartbeat' || m.type === 'app')
      ) {
        // A stale leader learns our term from this and steps down; without it a partitioned
        // pre-voting node could never win back its peers.
        this.send(message({ type: 'app-resp', from: this.id, to: m.from, term: this.term }));
      } else if (m.type === 'pre-vote') {
        this.send(
          message({
            type: 'pre-vote-resp',
            from: this.id,
            to: m.from,
            term: this.term,
            reject: true,
          }),
        );
      }
      return;
    }

    if (m.type === 'vote' || m.type === 'pre-vote') {
      this.handleVoteRequest(m);
      return;
    }
    switch (this.role) {
      case 'leader':
        this.stepLeader(m);
        break;
      case 'candidate':
      case 'pre-candidate':
        this.stepCandidate(m);
        break;
      case 'follower':
        this.stepFollower(m);
        break;
    }
  }

  private stepLeader(m: Message): void {
    // While quiesced no heartbeat is outstanding, so a heartbeat response is a follower asking
    // to be caught up (see handleQuiesce): that wakes the group too.
    if (m.type !== 'heartbeat-resp' || this.quiesced) this.noteActivity();
    if (m.type === 'read-index') {
      this.handleReadRequest(m.context, m.from);
      return;
    }
    const pr = this.progress.get(m.from);
    if (!pr) return; // A message from a node no longer in the configuration.
    switch (m.type) {
      case 'app-resp':
        this.handleAppendResponse(m, pr);
        break;
      case 'heartbeat-resp':
        this.handleHeartbeatResponse(m, pr);
        break;
      case 'app':
      case 'heartbeat':
      case 'snap':
        assertionFailed(`leader ${this.id} got ${m.type} from ${m.from} in its own term ${m.term}`);
        break;
      default:
        // Late vote responses, read-index-resp, timeout-now: nothing to do for a leader.
        break;
    }
  }

  private stepCandidate(m: Message): void {
    switch (m.type) {
      case 'app':
        this.becomeFollower(m.term, m.from);
        this.handleAppend(m);
        break;
      case 'heartbeat':
        this.becomeFollower(m.term, m.from);
        this.handleHeartbeat(m);
        break;
      case 'snap':
        this.becomeFollower(m.term, m.from);
        this.handleSnapshot(m);
        break;
      case 'quiesce':
        this.becomeFollower(m.term, m.from);
        this.handleQuiesce(m);
        break;
      case 'pre-vote-resp':
      case 'vote-resp': {
        const expected = this.role === 'pre-candidate' ? 'pre-vote-resp' : 'vote-resp';
        if (m.type !== expected) return;
        this.votes.set(m.from, !m.reject);
        const result = this.voteResult();
        if (result === 'won') {
          if (this.role === 'pre-candidate') this.campaign('election');
          else this.becomeLeader();
        } else if (result === 'lost') {
          this.becomeFollower(this.term, NO_NODE);
        }
        break;
      }
      default:
        break;
    }
  }

  private stepFollower(m: Message): void {
    if (m.type === 'quiesce') {
      this.handleQuiesce(m);
      return;
    }
    if (m.from === this.lead) this.quiesced = false;
    switch (m.type) {
      case 'app':
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleAppend(m);
        break;
      case 'heartbeat':
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleHeartbeat(m);
        break;
      case 'snap':
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleSnapshot(m);
        break;
      case 'timeout-now':
        // The leader asked us to take over: campaign now, skipping pre-vote and leases.
        this.hup('transfer');
        break;
      case 'read-index-resp':
        // An answer to a request already given up on (expired, or failed by a reset): dropped.
        if (!this.forwardedReads.delete(m.context)) break;
        this.readStates.push(
          m.reject
            ? { requestId: m.context, ok: false, reason: 'leadership-lost' }
            : { requestId: m.context, ok: true, index: m.index },
        );
        break;
      default:
        break;
    }
  }

  // ---------------------------------------------------------------------------------------
  // Follower: append, heartbeat, snapshot

  private handleAppend(m: Message): void {
    const reply = (fields: Partial<Message>): void =>
      this.send(
        message({ type: 'app-resp', from: this.id, to: m.from, term: this.term, ...fields }),
      );
    if (m.index < this.log.committed) {
      reply({ index: this.log.committed });
      return;
    }
    const lastNew = this.log.maybeAppend(m.index, m.logTerm, m.commit, m.entries);
    if (lastNew !== undefined) {
      reply({ index: lastNew });
      return;
    }
    // Reject with a hint that lets the leader skip a whole term of mismatches at once.
    const hint = this.log.findConflictByTerm(Math.min(m.index, this.log.lastIndex()), m.logTerm);
    reply({ index: m.index, reject: true, rejectHint: hint.index, logTerm: hint.term });
  }

  private handleHeartbeat(m: Message): void {
    this.log.commitTo(Math.min(m.commit, this.log.lastIndex()));
    this.send(
      message({
        type: 'heartbeat-resp',
        from: this.id,
        to: m.from,
        term: this.term,
        context: m.context,
      }),
    );
  }

  private handleSnapshot(m: Message): void {
    const snap = m.snapshot;
    assert(snap !== undefined, 'snap message without a snapshot');
    const installed = this.restore(snap);
    this.send(
      message({
        type: 'app-resp',
        from: this.id,
        to: m.from,
        term: this.term,
        index: installed ? this.log.lastIndex() : this.log.committed,
      }),
    );
  }

  /** Installs a snapshot unless our log already has it; returns whether it was installed. */
  private restore(snap: Snapshot): boolean {
    const { index, term } = snap.meta;
    if (index <= this.log.committed) return false;
    if (this.log.matchTerm(index, term)) {
      // Our log already holds the snapshot point: just learn that it is committed.
      this.log.commitTo(index);
      return false;
    }
    this.log.restore(snap);
    this.setConfState(snap.meta.confState);
    const self = this.progress.get(this.id);
    if (self) self.match = 0;
    return true;
  }

  // ---------------------------------------------------------------------------------------
  // Leader: replication

  private appendEntries(entries: Entry[]): number {
    let index = this.log.lastIndex();
    const term = this.term;
    return this.appendStamped(
      entries.map((e) => ({ term, index: ++index, type: e.type, data: e.data })),
    );
  }

  /** Appends entries already stamped with this term and the next indexes; returns the last. */
  private appendStamped(stamped: Entry[]): number {
    for (const e of stamped) this.uncommittedBytes += entryBytes(e);
    const last = this.log.append(stamped);
    // Our own acknowledgement waits for persistence (advance); followers can be sent now.
    this.bcastAppend();
    return last;
  }

  private bcastAppend(): void {
    for (const id of this.progress.keys()) if (id !== this.id) this.sendAppend(id, true);
  }

  /** Sends the next append (or a snapshot) to `to` if its progress allows. */
  private sendAppend(to: NodeId, sendIfEmpty: boolean): boolean {
    const pr = this.progress.get(to);
    if (!pr || pr.isPaused()) return false;
    const prevIndex = pr.next - 1;
    const prevTerm = this.log.term(prevIndex);
    const lastIndex = this.log.lastIndex();
    const ents =
      prevTerm === undefined
        ? undefined
        : this.log.slice(pr.next, lastIndex + 1, this.config.maxMsgBytes);
    if (prevTerm === undefined || ents === undefined) return this.sendSnapshot(to, pr);
    if (ents.length === 0 && !sendIfEmpty) return false;
    this.send(
      message({
        type: 'app',
        from: this.id,
        to,
        term: this.term,
        index: prevIndex,
        logTerm: prevTerm,
        entries: ents,
        commit: this.log.committed,
      }),
    );
    if (pr.state === 'replicate' && ents.length > 0) {
      const last = ents[ents.length - 1]!.index;
      pr.next = last + 1;
      let bytes = 0;
      for (const e of ents) bytes += entryBytes(e);
      pr.inflights.add(last, bytes);
      pr.msgAppFlowPaused = pr.inflights.isFull();
    } else if (pr.state === 'probe') {
      pr.msgAppFlowPaused = true;
    }
    return true;
  }

  private sendSnapshot(to: NodeId, pr: Progress): boolean {
    // A peer we have not heard from lately is probably down: don't ship it a snapshot blind.
    if (!pr.recentActive) return false;
    const snap = this.log.storage.snapshot();
    if (snap === undefined || snap.meta.index === 0) return false;
    this.send(message({ type: 'snap', from: this.id, to, term: this.term, snapshot: snap }));
    pr.becomeSnapshot(snap.meta.index);
    return true;
  }

  private handleAppendResponse(m: Message, pr: Progress): void {
    pr.recentActive = true;
    if (m.reject) {
      let next = m.rejectHint;
      if (m.logTerm > 0) next = this.log.findConflictByTerm(m.rejectHint, m.logTerm).index;
      if (pr.maybeDecrTo(m.index, next)) {
        if (pr.state === 'replicate') pr.becomeProbe();
        this.sendAppend(m.from, true);
      }
      return;
    }
    const wasPaused = pr.isPaused();
    if (!(pr.maybeUpdate(m.index) || (pr.match === m.index && pr.state === 'probe'))) return;
    if (pr.state === 'probe') {
      pr.becomeReplicate();
    } else if (
      pr.state === 'snapshot' &&
      (pr.match >= pr.pendingSnapshot || pr.match + 1 >= this.log.firstIndex())
    ) {
      pr.becomeProbe();
      pr.becomeReplicate();
    } else if (pr.state === 'replicate') {
      pr.inflights.freeLE(m.index);
    }
    if (this.maybeCommit()) {
      this.bcastAppend();
    } else if (wasPaused) {
      this.sendAppend(m.from, true);
    }
    // Fill the pipeline as far as the inflight window allows.
    while (this.sendAppend(m.from, false)) {
      /* keep sending */
    }
    if (m.from === this.leadTransferee && pr.match === this.log.lastIndex()) {
      this.sendTimeoutNow(m.from);
    }
  }

  /**
   * Whether a quorum-replicated index may be committed. Raft §5.4.2 (Figure 8): only an entry
   * of the leader's own term is committed by counting replicas. Tests override this method to
   * show that the simulator catches the bug of dropping the term check.
   */
  protected isCommittable(index: number): boolean {
    return this.log.term(index) === this.term;
  }

  private maybeCommit(): boolean {
    const index = jointCommitted(this.incoming, this.outgoing, this.matchOf);
    if (index <= this.log.committed || !this.isCommittable(index)) return false;
    const before = this.log.committed;
    const firstInTerm = this.log.term(before) !== this.term;
    this.log.commitTo(index);
    this.commitRound = this.heartbeatRound;
    this.releaseUncommitted(before, index);
    this.releaseReadsAwaitingCommit();
    // The no-op of this term just committed: start a heartbeat round now rather than at the
    // next heartbeat tick. Its acknowledgement starts the lease (what a new leader waits for
    // before it delivers anything) and answers the reads that waited for this commit.
    if (firstInTerm) this.bcastHeartbeat();
    return true;
  }

  private releaseUncommitted(from: number, to: number): void {
    const ents = this.log.slice(from + 1, to + 1, Infinity);
    if (ents === undefined) {
      this.uncommittedBytes = 0;
      return;
    }
    for (const e of ents) this.uncommittedBytes -= entryBytes(e);
    if (this.uncommittedBytes < 0) this.uncommittedBytes = 0;
  }

  private bcastHeartbeat(): void {
    this.heartbeatRound++;
    this.roundTicks.set(this.heartbeatRound, this.ticks);
    // A round older than an election timeout can no longer back a lease: keep the map small
    // even while no quorum answers.
    for (const [round, tick] of this.roundTicks) {
      if (tick + this.config.electionTimeoutTicks >= this.ticks) break;
      this.roundTicks.delete(round);
    }
    const self = this.progress.get(this.id);
    if (self) self.ackedRound = this.heartbeatRound;
    for (const m of this.heartbeats(this.heartbeatRound)) this.send(m);
  }

  /** A heartbeat of `round` (0: none) for every follower. */
  private heartbeats(round: number): Message[] {
    const out: Message[] = [];
    for (const [id, pr] of this.progress) {
      if (id === this.id) continue;
      out.push(
        message({
          type: 'heartbeat',
          from: this.id,
          to: id,
          term: this.term,
          // Never tell a follower to commit past what it is known to hold.
          commit: Math.min(pr.match, this.log.committed),
          context: round,
        }),
      );
    }
    return out;
  }

  /**
   * Heartbeats for every follower that change nothing here: no round (context 0, so their
   * acknowledgements back no lease and release no read) and nothing queued in `msgs`. For a
   * runtime whose loop is held between ready() and advance() (a slow disk write): the followers
   * keep hearing from their leader, which is all a heartbeat is for, while this state stays as
   * the Ready left it. Empty unless an awake leader. The commit each one carries is, as in every
   * heartbeat, at most what that follower is known to hold.
   */
  heartbeatsWithoutRound(): Message[] {
    if (this.role !== 'leader' || this.quiesced) return [];
    return this.heartbeats(0);
  }

  private handleHeartbeatResponse(m: Message, pr: Progress): void {
    pr.recentActive = true;
    pr.msgAppFlowPaused = false;
    if (pr.match < this.log.lastIndex()) this.sendAppend(m.from, true);
    if (m.context > pr.ackedRound && m.context <= this.heartbeatRound) {
      pr.ackedRound = m.context;
      this.releaseReads();
    }
  }

  private sendTimeoutNow(to: NodeId): void {
    this.lastTimeoutNowTick = this.ticks;
    this.send(message({ type: 'timeout-now', from: this.id, to, term: this.term }));
  }

  // ---------------------------------------------------------------------------------------
  // Leader lease and ReadIndex

  /** The newest heartbeat round a quorum has acknowledged in this term (0: none). */
  private quorumAckedRound(): number {
    return jointCommitted(this.incoming, this.outgoing, this.ackedRoundOf);
  }

  // Made once: the quorum checks run at every acknowledgement and every lease check.
  private readonly matchOf = (id: NodeId): number => this.progress.get(id)?.match ?? 0;
  private readonly ackedRoundOf = (id: NodeId): number =>
    id === this.id ? this.heartbeatRound : (this.progress.get(id)?.ackedRound ?? 0);

  /** Whether no other node can be leader now, by the drift assumption in the header. */
  isLeaseValid(): boolean {
    // Without check-quorum, voters do not ignore candidates while a leader is alive, so
    // nothing stops another election: there is no lease.
    if (!this.config.checkQuorum) return false;
    if (this.role !== 'leader' || this.leadTransferee !== NO_NODE) return false;
    const round = this.quorumAckedRound();
    if (round === 0 || !Number.isFinite(round)) return false;
    const sentAt = this.roundTicks.get(round);
    if (sentAt === undefined) return false;
    if (sentAt < this.lastTimeoutNowTick + this.config.electionTimeoutTicks) return false;
    const leaseTicks = this.config.electionTimeoutTicks - this.config.leaseSafetyTicks;
    return this.ticks < sentAt + leaseTicks;
  }

  /** Tick at which the current lease ends, or undefined without a lease. */
  leaseExpiresAtTick(): number | undefined {
    if (!this.isLeaseValid()) return undefined;
    const sentAt = this.roundTicks.get(this.quorumAckedRound())!;
    return sentAt + this.config.electionTimeoutTicks - this.config.leaseSafetyTicks;
  }

  private committedEntryInCurrentTerm(): boolean {
    return this.log.term(this.log.committed) === this.term;
  }

  readIndex(requestId: number): void {
    this.noteActivity();
    if (this.role === 'leader') {
      this.handleReadRequest(requestId, this.id);
    } else if (this.lead !== NO_NODE && this.role === 'follower') {
      this.forwardedReads.set(requestId, this.ticks);
      this.send(
        message({
          type: 'read-index',
          from: this.id,
          to: this.lead,
          term: this.term,
          context: requestId,
        }),
      );
    } else {
      this.readStates.push({ requestId, ok: false, reason: 'not-leader' });
    }
  }

  private handleReadRequest(requestId: number, from: NodeId): void {
    if (this.pendingReads.length + this.readsAwaitingCommit.length >= this.config.maxPendingReads) {
      this.answerRead({ requestId, from, index: 0, round: 0 }, 'too-many-reads');
      return;
    }
    const read: PendingRead = { requestId, from, index: this.log.committed, round: 0 };
    if (!this.committedEntryInCurrentTerm()) {
      // Until our no-op commits we do not know the commit index of the group (Raft §8).
      this.readsAwaitingCommit.push(read);
      return;
    }
    this.admitRead(read);
  }

  private admitRead(read: PendingRead): void {
    if (this.incoming.size + this.outgoing.size <= 1 && this.isVoter(this.id)) {
      this.answerRead(read, undefined);
    } else if (this.config.readOnly === 'lease' && this.isLeaseValid()) {
      this.answerRead(read, undefined);
    } else {
      this.pendingReads.push(read);
    }
  }

  private releaseReadsAwaitingCommit(): void {
    if (this.readsAwaitingCommit.length === 0 || !this.committedEntryInCurrentTerm()) return;
    const waiting = this.readsAwaitingCommit;
    this.readsAwaitingCommit = [];
    for (const read of waiting) this.admitRead({ ...read, index: this.log.committed });
  }

  /**
   * Gives reads that arrived since the last broadcast their own heartbeat round. Called once per
   * Ready so that a burst of reads costs one round, not one each.
   */
  flushReadRound(): void {
    if (this.role !== 'leader') return;
    if (!this.pendingReads.some((r) => r.round === 0)) return;
    this.bcastHeartbeat();
    for (const r of this.pendingReads) if (r.round === 0) r.round = this.heartbeatRound;
  }

  private releaseReads(): void {
    const acked = this.quorumAckedRound();
    let n = 0;
    while (n < this.pendingReads.length) {
      const r = this.pendingReads[n]!;
      if (r.round === 0 || r.round > acked) break;
      this.answerRead(r, undefined);
      n++;
    }
    if (n > 0) this.pendingReads = this.pendingReads.slice(n);
    // Rounds older than the quorum-acknowledged one can no longer matter.
    for (const round of this.roundTicks.keys()) {
      if (round < acked) this.roundTicks.delete(round);
      else break;
    }
  }

  private answerRead(read: PendingRead, failure: ReadFailure | undefined): void {
    if (read.from === this.id) {
      this.readStates.push(
        failure
          ? { requestId: read.requestId, ok: false, reason: failure }
          : { requestId: read.requestId, ok: true, index: read.index },
      );
    } else {
      this.send(
        message({
          type: 'read-index-resp',
          from: this.id,
          to: read.from,
          term: this.term,
          index: read.index,
          context: read.requestId,
          reject: failure !== undefined,
        }),
      );
    }
  }

  private failForwardedReads(reason: ReadFailure): void {
    if (this.forwardedReads.size === 0) return;
    for (const requestId of this.forwardedReads.keys())
      this.readStates.push({ requestId, ok: false, reason });
    this.forwardedReads.clear();
  }

  /**
   * A forwarded read unanswered for two election timeouts has been lost: a leader confirms a
   * read within one heartbeat round, and one that cannot reach a quorum for that long steps
   * down. The caller may retry.
   */
  private expireForwardedReads(): void {
    const oldest = this.ticks - 2 * this.config.electionTimeoutTicks;
    for (const [requestId, sentAt] of this.forwardedReads) {
      if (sentAt > oldest) break; // in the order sent, so the rest are younger
      this.forwardedReads.delete(requestId);
      this.readStates.push({ requestId, ok: false, reason: 'timeout' });
    }
  }

  private failPendingReads(reason: ReadFailure): void {
    const all = [...this.readsAwaitingCommit, ...this.pendingReads];
    this.readsAwaitingCommit = [];
    this.pendingReads = [];
    for (const r of all) this.answerRead(r, reason);
  }

  // ---------------------------------------------------------------------------------------
  // Proposals, transfer, membership

  propose(datas: readonly Uint8Array[]): ProposeResult {
    this.noteActivity();
    const refused = this.checkProposal();
    if (refused) return refused;
    let bytes = 0;
    for (const d of datas) {
      if (d.length > this.config.maxEntryBytes) {
        return this.reject('too-large', `entry of ${d.length} bytes > maxEntryBytes`);
      }
      bytes += d.length + 16;
    }
    if (
      this.uncommittedBytes > 0 &&
      this.uncommittedBytes + bytes > this.config.maxUncommittedBytes
    ) {
      return this.reject(
        'queue-full',
        `uncommitted bytes would pass ${this.config.maxUncommittedBytes}`,
      );
    }
    let index = this.log.lastIndex();
    const term = this.term;
    const last = this.appendStamped(
      datas.map((data) => ({ term, index: ++index, type: 'normal' as const, data })),
    );
    return { ok: true, index: last - datas.length + 1, term: this.term };
  }

  proposeConfChange(cc: ConfChange): ProposeResult {
    this.noteActivity();
    const refused = this.checkProposal();
    if (refused) return refused;
    if (this.pendingConfIndex > this.log.applied) {
      return this.reject(
        'conf-change-pending',
        `conf change at ${this.pendingConfIndex} not applied yet`,
      );
    }
    const next = applyConfChange(this.confState, cc);
    if (!next.ok) return this.reject('invalid-conf-change', next.reason);
    return this.appendConfChange(cc);
  }

  private appendConfChange(cc: ConfChange): ProposeResult {
    const index = this.appendEntries([
      { term: 0, index: 0, type: 'conf-change', data: encodeConfChange(cc) },
    ]);
    this.pendingConfIndex = index;
    return { ok: true, index, term: this.term };
  }

  private checkProposal(): ProposeResult | undefined {
    if (this.role !== 'leader') return this.reject('not-leader');
    if (this.leadTransferee !== NO_NODE) return this.reject('transferring');
    return undefined;
  }

  private reject(reason: ProposalRejection, detail?: string): ProposeResult {
    return detail === undefined
      ? { ok: false, reason, leaderHint: this.lead }
      : { ok: false, reason, leaderHint: this.lead, detail };
  }

  /** Starts a leadership transfer to `to`. Returns a rejection when it cannot start. */
  transferLeader(to: NodeId): ProposeResult | undefined {
    this.noteActivity();
    if (this.role !== 'leader') return this.reject('not-leader');
    if (to === this.id) return undefined;
    const pr = this.progress.get(to);
    if (!pr || !this.isVoter(to)) return this.reject('invalid-conf-change', `${to} is not a voter`);
    if (this.leadTransferee === to) return undefined;
    this.leadTransferee = to;
    // The transfer has one election timeout to finish (see tickHeartbeat).
    this.electionElapsed = 0;
    if (pr.match === this.log.lastIndex()) this.sendTimeoutNow(to);
    else this.sendAppend(to, true);
    return undefined;
  }

  /** Applies a committed conf-change entry (called by RawNode in advance, in log order). */
  applyConfChangeEntry(e: Entry): void {
    const cc = decodeConfChange(e.data);
    const next = applyConfChange(this.confState, cc);
    // Invariant: a committed change was valid against the config it follows on every replica.
    if (!next.ok)
      assertionFailed(`committed conf change at ${e.index} invalid: ${next.ok ? '' : next.reason}`);
    this.setConfState(next.confState);
    if (this.role !== 'leader') return;
    if (!this.isVoter(this.id)) {
      // Removed from the group (or demoted): stop leading so the remaining voters elect.
      this.becomeFollower(this.term, NO_NODE);
      return;
    }
    if (this.leadTransferee !== NO_NODE && !this.isVoter(this.leadTransferee)) {
      this.leadTransferee = NO_NODE;
    }
    // The quorum changed: something may commit now, and new members need appends.
    this.maybeCommit();
    this.bcastAppend();
  }

  /**
   * A leader whose applied configuration is joint with autoLeave proposes the leave step once
   * every conf change it knows of is applied. Checked after each apply, so a leader elected in
   * the middle of a joint configuration also finishes it.
   */
  maybeAutoLeave(): void {
    if (this.role !== 'leader' || this.leadTransferee !== NO_NODE) return;
    if (!isJoint(this.confState) || !this.confState.autoLeave) return;
    if (this.pendingConfIndex > this.log.applied) return;
    this.appendConfChange({ transition: 'auto', changes: [] });
  }

  /** The runtime persisted entries up to `index`: the leader counts its own copy now. */
  onPersisted(index: number): void {
    if (this.role !== 'leader') return;
    const self = this.progress.get(this.id);
    if (!self) return;
    if (self.maybeUpdate(index) && this.maybeCommit()) this.bcastAppend();
  }

  // ---------------------------------------------------------------------------------------
  // Quiescence

  /** Leader: something happened; leave quiescence and restart the idle count. */
  private noteActivity(): void {
    this.idleTicks = 0;
    if (!this.quiesced || this.role !== 'leader') return;
    this.quiesced = false;
    // A fresh check-quorum window: nobody could have been heard from while quiet.
    this.electionElapsed = 0;
    for (const pr of this.progress.values()) pr.recentActive = true;
    this.bcastHeartbeat();
  }

  /**
   * Quiesces when the group is idle and provably caught up: everything is committed, every
   * member holds the whole log, and every member acknowledged a heartbeat round sent after the
   * last commit (so it knows the commit index). Returns whether it quiesced.
   */
  private maybeQuiesce(): boolean {
    if (this.dueSoon) return false;
    const last = this.log.lastIndex();
    if (this.leadTransferee !== NO_NODE || isJoint(this.confState)) return false;
    if (this.pendingReads.length > 0 || this.readsAwaitingCommit.length > 0) return false;
    if (this.log.committed !== last || this.uncommittedBytes > 0) return false;
    for (const [id, pr] of this.progress) {
      if (id === this.id) continue;
      if (pr.match !== last || pr.ackedRound <= this.commitRound) return false;
    }
    this.quiesced = true;
    this.heartbeatElapsed = 0;
    this.sendQuiesce();
    return true;
  }

  /** The quiesce beacon: where the group stands, so followers can check they are caught up. */
  private sendQuiesce(): void {
    const last = this.log.lastIndex();
    const lastTerm = this.log.lastTerm();
    for (const id of this.progress.keys()) {
      if (id === this.id) continue;
      this.send(
        message({
          type: 'quiesce',
          from: this.id,
          to: id,
          term: this.term,
          index: last,
          logTerm: lastTerm,
          commit: this.log.committed,
        }),
      );
    }
  }

  /** Follower: quiesce only if our log and commit are exactly the leader's. */
  private handleQuiesce(m: Message): void {
    if (m.from !== this.lead) this.lead = m.from;
    if (
      !this.dueSoon &&
      this.log.lastIndex() === m.index &&
      this.log.matchTerm(m.index, m.logTerm) &&
      this.log.committed === m.commit
    ) {
      this.quiesced = true;
      this.electionElapsed = 0;
      return;
    }
    // Behind (e.g. restarted and lost its commit index, or missed entries), or work is due soon
    // by our applied state: ask the leader to wake up (and catch us up). A heartbeat response
    // is what a quiesced leader wakes on.
    this.quiesced = false;
    this.electionElapsed = 0;
    this.send(message({ type: 'heartbeat-resp', from: this.id, to: m.from, term: this.term }));
  }

  /**
   * Runtime hint, from the replica's applied state, that the group must be able to act soon
   * (a slot is due to be planned, or a run to be sent). While set, the group does not stay
   * quiet: a leader does not quiesce, and a quiesced one wakes; a quiesced follower wakes with
   * a fresh election timer and asks its leader to wake (a heartbeat response). A live leader
   * answers with heartbeats; a dead or cut-off one is replaced within an election timeout,
   * before the slot rather than up to 3 beacons after it.
   */
  setDueSoon(on: boolean): void {
    this.dueSoon = on;
    if (!on || !this.quiesced) return;
    if (this.role === 'leader') {
      this.noteActivity();
      return;
    }
    this.quiesced = false;
    this.electionElapsed = 0;
    if (this.lead !== NO_NODE)
      this.send(message({ type: 'heartbeat-resp', from: this.id, to: this.lead, term: this.term }));
  }

  /**
   * Runtime hint that the leader's node looks dead. A quiesced follower leaves quiescence with
   * its election timer already run down, so it campaigns on the next tick (pre-vote still asks
   * the others, who only agree if they have not heard from a leader either).
   */
  wakeUp(): void {
    if (this.role === 'leader') {
      this.noteActivity();
      return;
    }
    if (!this.quiesced) return;
    this.quiesced = false;
    this.electionElapsed = this.randomizedElectionTimeout;
  }

  // ---------------------------------------------------------------------------------------
  // Out

  private send(m: Message): void {
    this.msgs.push(m);
  }

  reportUnreachable(to: NodeId): void {
    const pr = this.progress.get(to);
    if (this.role === 'leader' && pr && pr.state === 'replicate') pr.becomeProbe();
  }

  reportSnapshot(to: NodeId, ok: boolean): void {
    const pr = this.progress.get(to);
    if (this.role !== 'leader' || !pr || pr.state !== 'snapshot') return;
    if (!ok) pr.pendingSnapshot = 0;
    // Wait for the follower's append response (or the next heartbeat) before sending more.
    pr.becomeProbe();
    pr.msgAppFlowPaused = true;
  }
}
