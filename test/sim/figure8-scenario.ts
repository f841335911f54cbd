/**
 * The Raft paper's Figure 8, scripted on the simulator (five nodes, one entry per append):
 * (a) leader L1 appends X in its term t1 and replicates it to one follower F only, then dies;
 * (b) L2 wins t2 without F, appends its no-op at X's index but never sends it, and dies;
 * (c) L1 or F (both hold X of t1) wins t3 and copies X to a third node; with the correct rule
 *     it must NOT count that as committing X, since X is not from t3; its own no-op is kept
 *     from leaving; then it dies;
 * (d) with the other holder of that no-op cut off, L2 returns; its last entry (term t2)
 *     beats X's (t1), so it wins with the remaining votes and overwrites X.
 * With the correct rule nothing committed is lost. With the bug, X was "committed" in (c) and
 * is lost in (d): the simulator's invariants must catch that. Timing varies with the seed.
 */
import type { NodeId } from '../../src/raft/messages.js';
import type { Raft, RaftInit } from '../../src/raft/raft.js';
import { ClusterSim, InvariantViolation } from './cluster-sim.js';

export interface Figure8Outcome {
  readonly violation: string | undefined;
  /** Whether step (c)'s leader counted X as committed (only the buggy rule does). */
  readonly oldTermCommitted: boolean;
  readonly trace: readonly string[];
}

export function runFigure8(seed: number, makeRaft?: (init: RaftInit) => Raft): Figure8Outcome {
  const sim = new ClusterSim({
    seed,
    calm: true,
    traceTail: 5000,
    profile: {
      initialVoters: 5,
      clients: 0,
      maxMsgBytes: 1,
      quiesceAfterTicks: 0,
      newLeaderFaultP: 0,
    },
    ...(makeRaft ? { makeRaft } : {}),
  });
  let oldTermCommitted = false;
  const runFor = (ms: number, until?: () => boolean): void => {
    const end = sim.nowMs + ms;
    while (sim.nowMs < end) {
      sim.runUntil(sim.nowMs + 1);
      if (until?.()) return;
    }
  };
  try {
    sim.start();
    runFor(1500, () => sim.leader() !== undefined);
    runFor(200);
    const all: NodeId[] = [...sim.nodes.keys()];
    const l1 = sim.leader()!.id;
    const [f, ...rest] = all.filter((id) => id !== l1) as [NodeId, ...NodeId[]];
    const xIndex = sim.nodes.get(l1)!.raft.log.lastIndex() + 1;
    const t1 = sim.nodes.get(l1)!.raft.term;

    // (a) X reaches F only.
    for (const o of rest) sim.net.cut(l1, o);
    sim.write(l1, 'k', 'x');
    runFor(60);
    sim.crashNode(l1);
    sim.net.heal();

    // (b) L2 wins without F and never sends its no-op.
    sim.net.isolate(f, all);
    let l2: NodeId | undefined;
    sim.onLeader = (n) => {
      if (l2 === undefined) {
        l2 = n.id;
        sim.net.isolate(n.id, all);
      }
    };
    runFor(3000, () => l2 !== undefined);
    if (l2 === undefined) throw new Error('scenario: no leader in step (b)');
    runFor(10);
    sim.crashNode(l2);
    sim.net.heal();

    // (c) L1 or F leads t3; X goes to one more node, then the leader's links go quiet.
    sim.restartNode(l1);
    let l3: NodeId | undefined;
    let pendingCut: NodeId | undefined;
    sim.onLeader = (n) => {
      if (l3 === undefined && (n.id === l1 || n.id === f)) l3 = n.id;
    };
    sim.beforeSend = (m) => {
      if (l3 === undefined || m.from !== l3) return;
      if (pendingCut !== undefined) sim.net.cut(l3, pendingCut);
      const carriesX =
        m.type === 'app' && m.entries.some((e) => e.index === xIndex && e.term === t1);
      if (carriesX && pendingCut === undefined) {
        // Let this copy of X through, then cut everything else this leader sends.
        for (const o of all) if (o !== m.to) sim.net.cut(l3, o);
        pendingCut = m.to;
      }
    };
    runFor(4000, () => pendingCut !== undefined);
    runFor(100, () => (sim.nodes.get(l3 ?? l1)?.raft.log.committed ?? 0) >= xIndex);
    oldTermCommitted = (sim.nodes.get(l3 ?? l1)?.raft.log.committed ?? 0) >= xIndex;
    runFor(10);
    sim.beforeSend = undefined;
    sim.onLeader = undefined;

    // (d) The (c) leader dies and the other holder of its no-op is cut off (the paper's S1 is
    // down here too); L2 returns and can win with the votes of nodes whose last entry is X.
    if (l3) sim.crashNode(l3);
    sim.net.heal();
    const otherHolder = l3 === l1 ? f : l1;
    sim.net.isolate(otherHolder, all);
    sim.restartNode(l2);
    runFor(3000);
    sim.checkLogMatching();
    return { violation: undefined, oldTermCommitted, trace: [] };
  } catch (err) {
    if (!(err instanceof InvariantViolation)) throw err;
    return { violation: err.message, oldTermCommitted, trace: sim.traceTailNow() };
  }
}
