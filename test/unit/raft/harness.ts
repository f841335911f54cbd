/**
 * A synchronous in-memory network of RawNodes for unit and scenario tests (etcd's `network`
 * harness): messages are delivered in rounds until none are left, with links that can be cut,
 * nodes that can be isolated, and message types that can be dropped. Storage is
 * MemoryLogStorage, persisted at each Ready exactly as the runtime would.
 */
import { SeededRand } from '../../../src/base/rand.js';
import type { RaftOptions } from '../../../src/raft/config.js';
import { MemoryLogStorage } from '../../../src/raft/log-storage.js';
import type { Entry, Message, MessageType, NodeId, Snapshot } from '../../../src/raft/messages.js';
import type { Raft, RaftInit } from '../../../src/raft/raft.js';
import { RawNode } from '../../../src/raft/raw-node.js';
import type { ReadState } from '../../../src/raft/ready.js';

export interface HarnessNode {
  id: NodeId;
  node: RawNode;
  storage: MemoryLogStorage;
  applied: Entry[];
  readStates: ReadState[];
  /** The last snapshot this node installed from a Ready (undefined if none). */
  installed: Snapshot | undefined;
}

export interface HarnessOptions {
  voters: NodeId[];
  learners?: NodeId[];
  /** Nodes that exist but start with an empty configuration (e.g. to be added later). */
  extra?: NodeId[];
  options?: RaftOptions;
  seed?: number;
  makeRaft?: (init: RaftInit) => Raft;
}

export class Network {
  readonly nodes = new Map<NodeId, HarnessNode>();
  private readonly cuts = new Set<string>();
  private readonly isolated = new Set<NodeId>();
  private readonly droppedTypes = new Set<MessageType>();
  private readonly blockers: ((m: Message) => boolean)[] = [];
  /** Messages waiting for delivery (inspectable and editable by tests). */
  queue: Message[] = [];
  /** Every message ever sent, in order. */
  readonly sent: Message[] = [];
  private readonly rand: SeededRand;
  private readonly opts: HarnessOptions;

  constructor(opts: HarnessOptions) {
    this.opts = opts;
    this.rand = new SeededRand(opts.seed ?? 1);
    for (const id of [...opts.voters, ...(opts.learners ?? [])]) {
      this.addNode(id, MemoryLogStorage.bootstrap(opts.voters, opts.learners ?? []));
    }
    // Apply the bootstrap configuration everywhere before the test starts.
    this.processReadies();
    for (const id of opts.extra ?? []) this.addNode(id, new MemoryLogStorage());
  }

  addNode(id: NodeId, storage: MemoryLogStorage): HarnessNode {
    const node = new RawNode({
      id,
      storage,
      rand: this.rand.fork(),
      options: { electionTimeoutTicks: 10, heartbeatTicks: 1, ...this.opts.options },
      ...(this.opts.makeRaft ? { makeRaft: this.opts.makeRaft } : {}),
    });
    const h: HarnessNode = {
      id,
      node,
      storage,
      applied: [],
      readStates: [],
      installed: undefined,
    };
    this.nodes.set(id, h);
    return h;
  }

  /** Simulates a crash and restart: only what was persisted survives. */
  restart(id: NodeId): HarnessNode {
    const old = this.get(id);
    const storage = old.storage.clone();
    this.queue = this.queue.filter((m) => m.to !== id && m.from !== id);
    const h = this.addNode(id, storage);
    // The applied state machine is rebuilt from the log in these tests: replay committed.
    h.applied = old.applied.filter((e) => e.index <= storage.hardStateNow().commit);
    h.installed = old.installed;
    return h;
  }

  get(id: NodeId): HarnessNode {
    const h = this.nodes.get(id);
    if (!h) throw new Error(`no node ${id}`);
    return h;
  }

  raft(id: NodeId): Raft {
    return this.get(id).node.raft;
  }

  cut(a: NodeId, b: NodeId): void {
    this.cuts.add(`${a}>${b}`);
    this.cuts.add(`${b}>${a}`);
  }

  cutOneWay(from: NodeId, to: NodeId): void {
    this.cuts.add(`${from}>${to}`);
  }

  isolate(id: NodeId): void {
    this.isolated.add(id);
  }

  drop(type: MessageType): void {
    this.droppedTypes.add(type);
  }

  /** Drops every message for which `pred` is true (evaluated at delivery time). */
  blockIf(pred: (m: Message) => boolean): void {
    this.blockers.push(pred);
  }

  heal(): void {
    this.cuts.clear();
    this.isolated.clear();
    this.droppedTypes.clear();
    this.blockers.length = 0;
  }

  private blocked(m: Message): boolean {
    return (
      this.isolated.has(m.from) ||
      this.isolated.has(m.to) ||
      this.cuts.has(`${m.from}>${m.to}`) ||
      this.droppedTypes.has(m.type) ||
      this.blockers.some((pred) => pred(m))
    );
  }

  /** Handles every pending Ready once: persist, collect messages, apply, advance. */
  processReadies(): void {
    for (const h of this.nodes.values()) {
      while (h.node.hasReady()) {
        const rd = h.node.ready();
        if (rd.snapshot) {
          h.installed = rd.snapshot;
          h.storage.applySnapshot(rd.snapshot);
          h.applied = h.applied.filter((e) => e.index <= rd.snapshot!.meta.index);
        }
        h.storage.append(rd.entries);
        if (rd.hardState) h.storage.setHardState(rd.hardState);
        for (const m of rd.messages) {
          this.sent.push(m);
          this.queue.push(m);
        }
        for (const e of rd.committedEntries) h.applied.push(e);
        for (const s of rd.readStates) h.readStates.push(s);
        h.node.advance();
      }
    }
  }

  /** Delivers one round of queued messages; returns how many were delivered. */
  deliverRound(filter?: (m: Message) => boolean): number {
    const batch = this.queue;
    this.queue = [];
    let n = 0;
    for (const m of batch) {
      if (filter && !filter(m)) {
        this.queue.push(m);
        continue;
      }
      if (this.blocked(m)) continue;
      const target = this.nodes.get(m.to);
      if (!target) continue;
      target.node.step(m);
      n++;
    }
    return n;
  }

  /** Runs Ready processing and delivery until nothing moves. */
  stabilize(maxRounds = 1000): void {
    for (let i = 0; i < maxRounds; i++) {
      this.processReadies();
      if (this.queue.length === 0) return;
      this.deliverRound();
    }
    throw new Error('network did not stabilize');
  }

  tick(id: NodeId, n = 1): void {
    for (let i = 0; i < n; i++) this.get(id).node.tick();
  }

  tickAll(n = 1): void {
    for (let i = 0; i < n; i++) {
      for (const h of this.nodes.values()) h.node.tick();
      this.stabilize();
    }
  }

  /** Makes `id` campaign and settles the network; returns the leader afterwards. */
  elect(id: NodeId): NodeId {
    this.get(id).node.campaign();
    this.stabilize();
    return this.leader() ?? '';
  }

  leader(): NodeId | undefined {
    let lead: NodeId | undefined;
    let term = -1;
    for (const h of this.nodes.values()) {
      const r = h.node.raft;
      if (r.role === 'leader' && r.term > term) {
        lead = h.id;
        term = r.term;
      }
    }
    return lead;
  }

  propose(id: NodeId, text: string) {
    return this.get(id).node.propose(new TextEncoder().encode(text));
  }

  /** Application payloads applied on a node, in order (no-ops and conf changes left out). */
  appliedTexts(id: NodeId): string[] {
    return this.get(id)
      .applied.filter((e) => e.type === 'normal' && e.data.byteLength > 0)
      .map((e) => new TextDecoder().decode(e.data));
  }

  /**
   * Starts a fresh group led by `id`: every node ticks through its startup quiet period (during
   * which it ignores vote requests) with nothing delivered, so nobody wins by chance; then `id`
   * campaigns until it leads. Messages sent while ticking are discarded.
   */
  startWithLeader(id: NodeId): void {
    const et = this.raft(id).config.electionTimeoutTicks;
    for (const h of this.nodes.values()) for (let i = 0; i < et; i++) h.node.tick();
    this.processReadies();
    this.queue = [];
    for (let attempt = 0; attempt < 5 && this.raft(id).role !== 'leader'; attempt++) {
      this.get(id).node.campaign();
      this.stabilize();
    }
    if (this.raft(id).role !== 'leader') throw new Error(`${id} did not become leader`);
  }

  /**
   * Like stabilize, but stops as soon as `pred` holds after a round of Ready processing (before
   * the next delivery). Returns whether `pred` held.
   */
  runUntil(pred: () => boolean, maxRounds = 1000): boolean {
    for (let i = 0; i < maxRounds; i++) {
      this.processReadies();
      if (pred()) return true;
      if (this.queue.length === 0) return false;
      this.deliverRound();
    }
    throw new Error('network did not stabilize');
  }

  /**
   * Snapshots node `id`'s state machine at `index` (which it must have applied) into its
   * MemoryLogStorage and compacts the log there. The data is the JSON list of applied texts (on
   * top of any snapshot it installed before), so stateTexts() can rebuild it.
   */
  snapshotAt(id: NodeId, index: number): Snapshot {
    const h = this.get(id);
    const texts = this.stateTexts(id, index);
    const data = new TextEncoder().encode(JSON.stringify(texts));
    return h.storage.createSnapshot(index, h.node.raft.confState, data);
  }

  /**
   * The application state of node `id` up to `upTo` (default: all it applied): the texts in the
   * last snapshot it installed, followed by the texts it applied after that snapshot.
   */
  stateTexts(id: NodeId, upTo = Number.POSITIVE_INFINITY): string[] {
    const h = this.get(id);
    const base = h.installed
      ? (JSON.parse(new TextDecoder().decode(h.installed.data)) as string[])
      : [];
    const after = h.installed ? h.installed.meta.index : 0;
    const rest = h.applied
      .filter((e) => e.index > after && e.index <= upTo && e.type === 'normal')
      .filter((e) => e.data.byteLength > 0)
      .map((e) => new TextDecoder().decode(e.data));
    return [...base, ...rest];
  }

  /** The terms of node `id`'s log from its first index to its last, as [index, term] pairs. */
  logTerms(id: NodeId): [number, number][] {
    const log = this.raft(id).log;
    const out: [number, number][] = [];
    for (let i = log.firstIndex(); i <= log.lastIndex(); i++) out.push([i, log.term(i) ?? -1]);
    return out;
  }
}
