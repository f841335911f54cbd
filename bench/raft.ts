/**
 * `npm run bench:raft`: figures for the pure Raft core, printed with the machine's context and
 * never asserted. (1) Proposals per second through a 3-replica group over an instant in-memory
 * network, one proposal per Ready cycle and in batches. (2) CPU cost of ticking 1,000 idle groups
 * hosted on one node (heartbeats generated and handled).
 */
import os from 'node:os';
import { SeededRand } from '../src/base/rand.js';
import { MemoryLogStorage } from '../src/raft/log-storage.js';
import type { Message } from '../src/raft/messages.js';
import { RawNode } from '../src/raft/raw-node.js';

interface Replica {
  node: RawNode;
  storage: MemoryLogStorage;
}

function makeGroup(ids: string[], rand: SeededRand, quiesceAfterTicks = 0): Map<string, Replica> {
  const g = new Map<string, Replica>();
  for (const id of ids) {
    const storage = MemoryLogStorage.bootstrap(ids);
    g.set(id, {
      node: new RawNode({
        id,
        storage,
        rand: rand.fork(),
        options: { maxInflightMsgs: 1024, quiesceAfterTicks },
      }),
      storage,
    });
  }
  return g;
}

/** One pass: every replica's Ready is persisted (in memory), its messages delivered at once. */
function pump(g: Map<string, Replica>): number {
  let moved = 0;
  const outbox: Message[] = [];
  for (const r of g.values()) {
    while (r.node.hasReady()) {
      const rd = r.node.ready();
      r.storage.append(rd.entries);
      if (rd.hardState) r.storage.setHardState(rd.hardState);
      for (const m of rd.messages) outbox.push(m);
      moved += rd.committedEntries.length;
      r.node.advance();
    }
  }
  for (const m of outbox) g.get(m.to)?.node.step(m);
  return outbox.length + moved;
}

function countingSettle(g: Map<string, Replica>): number {
  let n = 0;
  for (;;) {
    const moved = pump(g);
    if (moved === 0) return n;
    n += moved;
  }
}

function settle(g: Map<string, Replica>): void {
  while (pump(g) > 0) {
    /* until quiet */
  }
}

function elect(g: Map<string, Replica>): RawNode {
  const first = g.values().next().value!.node;
  settle(g);
  // Fresh replicas ignore votes for one election timeout (the lease rule for restarts).
  for (let i = 0; i < 10; i++) for (const r of g.values()) r.node.tick();
  settle(g);
  first.campaign();
  settle(g);
  const leader = [...g.values()].find((r) => r.node.raft.role === 'leader');
  if (!leader) throw new Error('no leader elected');
  return leader.node;
}

function proposalsPerSecond(batch: number, total: number): number {
  const g = makeGroup(['n1', 'n2', 'n3'], new SeededRand(1));
  const leader = elect(g);
  const payload = new Uint8Array(100);
  const start = performance.now();
  for (let sent = 0; sent < total; sent += batch) {
    const datas = Array.from({ length: batch }, () => payload);
    const r = leader.propose(...datas);
    if (!r.ok) throw new Error(`proposal refused: ${r.reason}`);
    settle(g);
    // Compact now and then so the in-memory log does not dominate the measurement.
    for (const rep of g.values()) {
      const applied = rep.node.raft.log.applied;
      if (applied - rep.storage.firstIndex() > 10_000) rep.storage.compact(applied - 1_000);
    }
  }
  const secs = (performance.now() - start) / 1000;
  return total / secs;
}

function idleTickCost(
  groups: number,
  ticks: number,
  quiesceAfterTicks = 0,
): { usPerGroupTick: number; msgs: number } {
  const rand = new SeededRand(2);
  const local: Replica[] = [];
  const all: Map<string, Replica>[] = [];
  for (let i = 0; i < groups; i++) {
    const g = makeGroup(['n1', 'n2', 'n3'], rand, quiesceAfterTicks);
    const leader = elect(g);
    all.push(g);
    local.push(g.get(leader.raft.id)!);
  }
  let msgs = 0;
  // Let quiescing groups settle into quiescence before measuring.
  for (let t = 0; t < quiesceAfterTicks * 2; t++) {
    for (let i = 0; i < groups; i++) {
      local[i]!.node.tick();
      countingSettle(all[i]!);
    }
  }
  const cpu0 = process.cpuUsage();
  for (let t = 0; t < ticks; t++) {
    for (let i = 0; i < groups; i++) {
      local[i]!.node.tick();
      // Heartbeats go out and their responses come back, so leaders keep their quorum.
      msgs += countingSettle(all[i]!);
    }
  }
  const leading = local.filter((r) => r.node.raft.role === 'leader').length;
  if (leading !== groups) throw new Error(`only ${leading}/${groups} groups kept their leader`);
  const cpu = process.cpuUsage(cpu0);
  return { usPerGroupTick: (cpu.user + cpu.system) / (groups * ticks), msgs };
}

const cpu = os.cpus()[0];
console.log(
  `machine: ${os.cpus().length} × ${cpu?.model ?? 'unknown cpu'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}`,
);
console.log('network: instant, in memory; storage: MemoryLogStorage (no fsync) — the core alone');
const unbatched = proposalsPerSecond(1, 50_000);
const batched = proposalsPerSecond(100, 500_000);
console.log(
  `proposals/s, 3 replicas, 100-byte entries, 1 per Ready cycle:   ${unbatched.toFixed(0)}`,
);
console.log(
  `proposals/s, 3 replicas, 100-byte entries, 100 per Ready cycle: ${batched.toFixed(0)}`,
);
const idle = idleTickCost(1000, 100);
console.log(
  `idle ticking, 1,000 groups led by this node, heartbeat every tick: ${idle.usPerGroupTick.toFixed(2)} µs CPU per group-tick ` +
    `(${((idle.usPerGroupTick * 1000) / 1000).toFixed(2)} ms per tick round; ${idle.msgs} messages, ` +
    'follower replicas stepped in the same process), quiescing off',
);
const quiet = idleTickCost(1000, 100, 5);
console.log(
  `idle ticking, same 1,000 groups quiesced (quiesceAfterTicks 5): ${quiet.usPerGroupTick.toFixed(2)} µs CPU per group-tick ` +
    `(${quiet.msgs} messages in 100 ticks: one beacon round per 30 ticks)`,
);
