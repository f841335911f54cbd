/**
 * The failure table of docs/ARCHITECTURE.md, one scripted scenario per row, on the scheduler
 * simulator with a calm network (the seed still varies every delay, election timeout and clock).
 * Each scenario aims its fault with a hook (onPropose, onSend, webhookDelay) at the exact protocol
 * step the row names, and returns what the receiver and the replicas saw; scheduler-sim.test.ts
 * holds each to the row's "what the next leader does". The simulator's own invariants run
 * throughout.
 */
import type { NodeId } from '../../src/raft/messages.js';
import type { JobSpec, Run } from '../../src/scheduler/model.js';
import { spec } from '../unit/scheduler/fixtures.js';
import { SchedulerSim, type Receipt, type SentDelivery } from './scheduler-sim.js';

export const EVERY_SECOND = '* * * * * *';

export function jobSpec(over: Partial<JobSpec> = {}): JobSpec {
  return spec({ schedule: EVERY_SECOND, timezone: 'UTC', attemptDeadlineMs: 2000, ...over });
}

export interface ScenarioOutcome {
  readonly sim: SchedulerSim;
  readonly violation: string | undefined;
  /** The fire id the fault was aimed at. */
  readonly fireId: string | undefined;
  readonly victim: NodeId | undefined;
  readonly victimTerm: number;
  readonly faultAtMs: number;
  readonly receipts: readonly Receipt[];
  readonly sends: readonly SentDelivery[];
  readonly run: Run | undefined;
}

function calm(seed: number, voters = 3, resultHoldMs = 0): SchedulerSim {
  const sim = new SchedulerSim({
    seed,
    calm: true,
    traceTail: 300,
    profile: { voters },
    resultHoldMs,
  });
  sim.start();
  for (let i = 0; i < 300 && !sim.leader(); i++) sim.runUntil(sim.nowMs + 10);
  if (!sim.leader()) throw new Error('scenario: no leader');
  return sim;
}

/** Runs `body`, turning an invariant violation into the outcome instead of a throw. */
function scenario(
  seed: number,
  body: (sim: SchedulerSim, aim: (fireId: string, victim: NodeId, term: number) => void) => void,
  voters = 3,
  resultHoldMs = 0,
): ScenarioOutcome {
  const sim = calm(seed, voters, resultHoldMs);
  let fireId: string | undefined;
  let victim: NodeId | undefined;
  let victimTerm = 0;
  let faultAtMs = 0;
  let violation: string | undefined;
  try {
    body(sim, (f, v, term) => {
      fireId = f;
      victim = v;
      victimTerm = term;
      faultAtMs = sim.nowMs;
    });
    sim.checkFinal();
  } catch (err) {
    if (!(err instanceof Error)) throw err;
    violation = `${err.name}: ${err.message}\n  ${sim.traceTailNow().slice(-40).join('\n  ')}`;
  }
  const lead = sim.leader();
  return {
    sim,
    violation,
    fireId,
    victim,
    victimTerm,
    faultAtMs,
    receipts: sim.receipts.filter((r) => r.fireId === fireId),
    sends: [...sim.sent.values()].filter((s) => s.order.fireId === fireId),
    run: fireId !== undefined ? lead?.app.sm.runs.get(fireId) : undefined,
  };
}

/** Row 1: the leader dies before its intent commits. Expect: fired late, never skipped. */
export function leaderDiesBeforeIntentCommits(seed: number): ScenarioOutcome {
  return scenario(seed, (sim, aim) => {
    sim.createJob('j1', jobSpec());
    sim.runUntil(sim.nowMs + 2500);
    let armed = true;
    sim.onPropose = (n, c) => {
      if (!armed || c.op !== 'fire-intents') return;
      const intent = c.intents.find((i) => i.jobId === 'j1' && i.slots.length > 0);
      if (!intent) return;
      armed = false;
      aim(`j1:${intent.slots[0]!}`, n.id, n.raft.term);
      // Before the Ready holding the intent is synced: nothing leaves this node.
      sim.later(0, () => sim.crashNode(n.id, 'before its intent commits '));
      sim.later(400, () => sim.restartNode(n.id));
    };
    sim.runUntil(sim.nowMs + 5000);
  });
}

/** Row 2: dies after the intent committed, before the slot. Expect: next leader delivers. */
export function leaderDiesAfterIntentBeforeSend(seed: number): ScenarioOutcome {
  return scenario(seed, (sim, aim) => {
    sim.createJob('j1', jobSpec({ delivery: 'at_most_once' }));
    sim.runUntil(sim.nowMs + 2500);
    let armed = true;
    sim.onPropose = (n, c) => {
      if (!armed || c.op !== 'fire-intents') return;
      const intent = c.intents.find((i) => i.jobId === 'j1' && i.slots.length > 0);
      if (!intent) return;
      armed = false;
      aim(`j1:${intent.slots[0]!}`, n.id, n.raft.term);
      // The intent commits within a few ms; the slot is a look-ahead (500 ms) away.
      sim.later(60, () => sim.crashNode(n.id, 'after its intent, before the slot '));
      sim.later(500, () => sim.restartNode(n.id));
    };
    sim.runUntil(sim.nowMs + 5000);
  });
}

/** Row 3 and 4: dies right after a send, before its result commits. */
export function leaderDiesAfterSend(seed: number, delivery: JobSpec['delivery']): ScenarioOutcome {
  return scenario(seed, (sim, aim) => {
    sim.createJob('j1', jobSpec({ delivery }));
    sim.runUntil(sim.nowMs + 2500);
    let armed = true;
    sim.onSend = (s) => {
      if (!armed || s.order.jobId !== 'j1') return;
      armed = false;
      const n = sim.nodes.get(s.node)!;
      aim(s.order.fireId, n.id, n.raft.term);
      sim.later(0, () => sim.crashNode(n.id, 'after sending, before the result commits '));
      sim.later(500, () => sim.restartNode(n.id));
    };
    sim.runUntil(sim.nowMs + 5000);
  });
}

/**
 * Row 5: a deposed leader still running. Its request is slow on the wire and it is cut off
 * from the group right after sending; the next leader re-delivers; the old request arrives
 * last with a lower term and the receiver rejects it.
 */
export function deposedLeaderStillRunning(seed: number): ScenarioOutcome & {
  readonly sendsByVictimAfter: number;
} {
  let sendsByVictimAfter = 0;
  const out = scenario(seed, (sim, aim) => {
    sim.createJob('j1', jobSpec());
    sim.createJob('j2', jobSpec({ schedule: 'every 300ms' }));
    sim.runUntil(sim.nowMs + 2500);
    let armed = true;
    let slowId = -1;
    let victim: NodeId | undefined;
    let cutAt = 0;
    sim.webhookDelay = (s) => (s.id === slowId ? 1500 : undefined);
    sim.onSend = (s) => {
      if (victim !== undefined && s.node === victim && sim.nowMs > cutAt) sendsByVictimAfter++;
      if (!armed || s.order.jobId !== 'j1') return;
      armed = false;
      slowId = s.id;
      victim = s.node;
      cutAt = sim.nowMs;
      aim(s.order.fireId, s.node, sim.nodes.get(s.node)!.raft.term);
      sim.later(0, () => sim.isolate(s.node));
      sim.later(3000, () => sim.heal());
    };
    sim.runUntil(sim.nowMs + 6000);
  });
  return { ...out, sendsByVictimAfter };
}

/** Row 6: graceful transfers under load. Expect: no fire id received twice. */
export function gracefulTransfers(seed: number, transfers = 6, resultHoldMs = 0): ScenarioOutcome {
  return scenario(
    seed,
    (sim) => {
      sim.createJob('a1', jobSpec());
      sim.createJob('a2', jobSpec({ schedule: 'every 700ms' }));
      sim.createJob('m1', jobSpec({ delivery: 'at_most_once' }));
      sim.createJob('m2', jobSpec({ delivery: 'at_most_once', schedule: 'every 450ms' }));
      sim.runUntil(sim.nowMs + 1500);
      for (let i = 0; i < transfers; i++) {
        sim.gracefulTransfer();
        sim.runUntil(sim.nowMs + 1000 + sim.rand.int(700));
      }
      sim.runUntil(sim.nowMs + 2000);
    },
    5,
    resultHoldMs,
  );
}

export interface OutageJob {
  readonly jobId: string;
  readonly policy: string;
  /** Slots that came due while the cluster was down or before the first plan after it. */
  readonly late: readonly Run[];
  readonly onTime: readonly Run[];
  readonly plannedAtMs: number;
}

/** Row 7: the whole cluster down across several slots, one job per misfire policy. */
export function wholeClusterDown(
  seed: number,
  downMs = 10_000,
): { outcome: ScenarioOutcome; jobs: OutageJob[] } {
  let stopWall = 0;
  const outcome = scenario(seed, (sim) => {
    const window = 60_000;
    sim.createJob(
      'fa',
      jobSpec({ misfire: { policy: 'fire_all', fireAllCap: 2, catchUpWindowMs: window } }),
    );
    sim.createJob(
      'fo',
      jobSpec({ misfire: { policy: 'fire_once', fireAllCap: 1, catchUpWindowMs: window } }),
    );
    sim.createJob(
      'sk',
      jobSpec({ misfire: { policy: 'skip', fireAllCap: 1, catchUpWindowMs: window } }),
    );
    sim.createJob(
      'cw',
      jobSpec({ misfire: { policy: 'fire_all', fireAllCap: 100, catchUpWindowMs: 4000 } }),
    );
    sim.runUntil(sim.nowMs + 2000);
    stopWall = Math.max(...[...sim.nodes.keys()].map((id) => sim.wall(id)));
    sim.stopAll();
    sim.runUntil(sim.nowMs + downMs);
    sim.startAll();
    sim.runUntil(sim.nowMs + 4000);
  });
  const runs = outcome.sim.leader()?.app.sm.runs ?? new Map<string, Run>();
  const jobs: OutageJob[] = [];
  for (const [jobId, policy] of [
    ['fa', 'fire_all'],
    ['fo', 'fire_once'],
    ['sk', 'skip'],
    ['cw', 'fire_all (4 s catch-up window)'],
  ] as const) {
    const mine = [...runs.values()]
      .filter((r) => r.jobId === jobId && r.slotMs > stopWall)
      .sort((a, b) => a.slotMs - b.slotMs);
    // The first intent after the outage decided every slot up to its time at once.
    const missed = mine.filter((r) => r.status === 'MISSED');
    const plannedAtMs = Math.max(...missed.map((r) => r.createdAtMs), 0);
    const decided = mine.filter((r) => r.createdAtMs === plannedAtMs && r.slotMs <= plannedAtMs);
    const late = decided.filter((r) => r.slotMs < plannedAtMs - 1000);
    const onTime = decided.filter((r) => r.slotMs >= plannedAtMs - 1000);
    jobs.push({ jobId, policy, late, onTime, plannedAtMs });
  }
  return { outcome, jobs };
}
