/**
 * RawNode: the synchronous API the runtime drives (etcd's RawNode shape). Inputs are tick(),
 * step(), propose*(), readIndex(), transferLeader(); output is one Ready at a time, acknowledged
 * with advance(). See ready.ts for the order in which a Ready must be handled.
 */
import { assert, assertionFailed } from '../base/assert.js';
import type { Rand } from '../base/rand.js';
import { compileRaftOptions, type CompiledRaftConfig, type RaftOptions } from './config.js';
import type { LogStorage } from './log-storage.js';
import type { ConfChange, ConfState, HardState, Message, NodeId } from './messages.js';
import { Raft, type ProposeResult, type RaftInit } from './raft.js';
import type { Ready, Role, SoftState } from './ready.js';

export interface RawNodeInit {
  readonly id: NodeId;
  readonly storage: LogStorage;
  readonly rand: Rand;
  readonly options?: RaftOptions;
  readonly config?: CompiledRaftConfig;
  readonly applied?: number;
  /** Test seam: build the Raft (e.g. a subclass with a deliberately broken rule). */
  readonly makeRaft?: (init: RaftInit) => Raft;
}

export interface RaftStatus {
  readonly id: NodeId;
  readonly role: Role;
  readonly term: number;
  readonly vote: NodeId;
  readonly lead: NodeId;
  readonly commit: number;
  readonly applied: number;
  readonly lastIndex: number;
  readonly firstIndex: number;
  readonly confState: ConfState;
  readonly leadTransferee: NodeId;
  readonly leaseValid: boolean;
  /** Leader only: each peer's acknowledged index and replication state. */
  readonly progress: ReadonlyMap<NodeId, { match: number; next: number; state: string }>;
}

export class RawNode {
  readonly raft: Raft;
  private prevSoft: SoftState;
  private prevHard: HardState;
  private inFlight: Ready | undefined = undefined;

  constructor(init: RawNodeInit) {
    const config = init.config ?? compileRaftOptions(init.options);
    const raftInit: RaftInit = {
      id: init.id,
      storage: init.storage,
      config,
      rand: init.rand,
      ...(init.applied === undefined ? {} : { applied: init.applied }),
    };
    this.raft = init.makeRaft ? init.makeRaft(raftInit) : new Raft(raftInit);
    this.prevSoft = { lead: this.raft.lead, role: this.raft.role };
    this.prevHard = init.storage.initialState().hardState;
  }

  private assertIdle(what: string): void {
    if (this.inFlight !== undefined) assertionFailed(`${what} between ready() and advance()`);
  }

  /** Advances `n` ticks (all elapsed ticks after a stall; see Raft.tick). */
  tick(n = 1): void {
    this.assertIdle('tick');
    this.raft.tick(n);
  }

  step(m: Message): void {
    this.assertIdle('step');
    this.raft.step(m);
  }

  /** Proposes one or more entries as a batch; all land at consecutive indexes or none. */
  propose(...datas: Uint8Array[]): ProposeResult {
    this.assertIdle('propose');
    return this.raft.propose(datas);
  }

  /** propose() with the entries as one array (no spread of a long argument list). */
  proposeAll(datas: readonly Uint8Array[]): ProposeResult {
    this.assertIdle('propose');
    return this.raft.propose(datas);
  }

  proposeConfChange(cc: ConfChange): ProposeResult {
    this.assertIdle('proposeConfChange');
    return this.raft.proposeConfChange(cc);
  }

  /** Asks for a linearizable read point; the answer arrives as a ReadState in a later Ready. */
  readIndex(requestId: number): void {
    this.assertIdle('readIndex');
    this.raft.readIndex(requestId);
  }

  transferLeader(to: NodeId): ProposeResult | undefined {
    this.assertIdle('transferLeader');
    return this.raft.transferLeader(to);
  }

  /** Starts an election now (tests and operator tools); pre-vote still applies. */
  campaign(): void {
    this.assertIdle('campaign');
    this.raft.hup('pre-election');
  }

  reportUnreachable(to: NodeId): void {
    this.assertIdle('reportUnreachable');
    this.raft.reportUnreachable(to);
  }

  reportSnapshot(to: NodeId, ok: boolean): void {
    this.assertIdle('reportSnapshot');
    this.raft.reportSnapshot(to, ok);
  }

  /** The leader of this group looks dead (runtime liveness): leave quiescence and campaign. */
  wakeUp(): void {
    this.assertIdle('wakeUp');
    this.raft.wakeUp();
  }

  /** Raft.setDueSoon: work is due soon by applied state, so the group must not stay quiet. */
  setDueSoon(on: boolean): void {
    this.assertIdle('setDueSoon');
    this.raft.setDueSoon(on);
  }

  isQuiesced(): boolean {
    return this.raft.quiesced;
  }

  isLeaseValid(): boolean {
    return this.raft.isLeaseValid();
  }

  /** Ticks the lease still holds for (0 without one), counted on this node's tick clock. */
  leaseRemainingTicks(): number {
    const end = this.raft.leaseExpiresAtTick();
    return end === undefined ? 0 : Math.max(0, end - this.raft.ticks);
  }

  hasReady(): boolean {
    if (this.inFlight) return false;
    const r = this.raft;
    this.raft.flushReadRound();
    return (
      r.msgs.length > 0 ||
      r.readStates.length > 0 ||
      r.log.unstableEntries.length > 0 ||
      r.log.unstableSnapshot !== undefined ||
      r.log.hasNextCommittedEntries() ||
      r.lead !== this.prevSoft.lead ||
      r.role !== this.prevSoft.role ||
      !sameHardState(r.hardState(), this.prevHard)
    );
  }

  ready(): Ready {
    this.assertIdle('ready');
    const r = this.raft;
    r.flushReadRound();
    const soft: SoftState = { lead: r.lead, role: r.role };
    const hard = r.hardState();
    const hardChanged = !sameHardState(hard, this.prevHard);
    const entries = r.log.unstableEntries.slice();
    const rd: Ready = {
      softState:
        soft.lead !== this.prevSoft.lead || soft.role !== this.prevSoft.role ? soft : undefined,
      hardState: hardChanged ? hard : undefined,
      entries,
      snapshot: r.log.unstableSnapshot,
      committedEntries: r.log.nextCommittedEntries(r.config.maxCommittedBytesPerReady),
      messages: r.msgs,
      readStates: r.readStates,
      mustSync:
        entries.length > 0 ||
        r.log.unstableSnapshot !== undefined ||
        hard.term !== this.prevHard.term ||
        hard.vote !== this.prevHard.vote,
    };
    r.msgs = [];
    r.readStates = [];
    const last = rd.committedEntries[rd.committedEntries.length - 1];
    if (last) r.log.applying = last.index;
    this.inFlight = rd;
    return rd;
  }

  /** The runtime has handled the last Ready completely (persisted, sent, applied). */
  advance(): void {
    const rd = this.inFlight;
    assert(rd !== undefined, 'advance() without a ready()');
    this.inFlight = undefined;
    const r = this.raft;
    if (rd.softState) this.prevSoft = rd.softState;
    if (rd.hardState) this.prevHard = rd.hardState;
    const lastEntry = rd.entries[rd.entries.length - 1];
    r.log.stableTo(lastEntry ? lastEntry.index : 0, rd.snapshot?.meta.index);
    for (const e of rd.committedEntries) {
      if (e.type === 'conf-change') r.applyConfChangeEntry(e);
      r.log.appliedTo(e.index);
    }
    r.onPersisted(r.log.lastStableIndex());
    r.maybeAutoLeave();
  }

  status(): RaftStatus {
    const r = this.raft;
    const progress = new Map<NodeId, { match: number; next: number; state: string }>();
    if (r.role === 'leader') {
      for (const [id, pr] of r.progress)
        progress.set(id, { match: pr.match, next: pr.next, state: pr.state });
    }
    return {
      id: r.id,
      role: r.role,
      term: r.term,
      vote: r.vote,
      lead: r.lead,
      commit: r.log.committed,
      applied: r.log.applied,
      lastIndex: r.log.lastIndex(),
      firstIndex: r.log.firstIndex(),
      confState: r.confState,
      leadTransferee: r.leadTransferee,
      leaseValid: r.isLeaseValid(),
      progress,
    };
  }
}

function sameHardState(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}
