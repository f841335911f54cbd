/**
 * A synchronous in-memory network of RawNodes for unit and scenario tests (etcd's `network`
 * harness): messages are delivered in rounds until none are left, with links that can be cut,
 * nodes that can be isolated, and message types that can be dropped. Storage is
 * MemoryLogStorage, persisted at each Ready exactly as the runtime would.
 */
import { SeededRand } from '../../../src/base/rand.js';
import type { RaftOptions } from '../../../src/raft/config.js';
import { MemoryLogStorage } from '../../../src/raft/log-storage.js';
import type { Entry, Message, MessageType, NodeId } from '../../../src/raft/messages.js';
import type { Raft, RaftInit } from '../../../src/raft/raft.js';
import { RawNode } from '../../../src/raft/raw-node.js';
import type { ReadState } from '../../../src/raft/ready.js';

export interface HarnessNode {
  id: NodeId;
  node: RawNode;
  storage: MemoryLogStorage;
  applied: Entry[];
  readStates: ReadState[];
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
    const h: HarnessNode = { id, node, storage, applied: [], readStates: [] };
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

  heal(): void {
    this.cuts.clear();
    this.isolated.clear();
    this.droppedTypes.clear();
  }

  private blocked(m: Message): boolean {
    return (
      this.isolated.has(m.from) ||
      this.isolated.has(m.to) ||
      this.cuts.has(`${m.from}>${m.to}`) ||
      this.droppedTypes.has(m.type)
    );
  }

  /** Handles every pending Ready once: persist, collect messages, apply, advance. */
  processReadies(): void {
    for (const h of this.nodes.values()) {
      while (h.node.hasReady()) {
        const rd = h.node.ready();
        if (rd.snapshot) {
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
}
