// The scheduler simulation inside `npm test`: a fixed list of seeds with swarm-drawn faults keeps
// every scheduler invariant (scheduler-sim.ts header); a seed replays to the same trace hash;
// the checkers are shown able to fail with deliberately broken dispatchers; and each row of
// the failure table (docs/ARCHITECTURE.md) has its own scripted scenario (scheduler-scenarios.ts).
import t from 'tap';
import {
  GroupDispatcher,
  termOfToken,
  type AttemptFinished,
  type DeliveryOrder,
  type DispatchStep,
  type Leadership,
  type UpstreamQuery,
} from '../../src/scheduler/dispatcher.js';
import type { SchedulerCommand } from '../../src/scheduler/commands.js';
import { SchedulerStateMachine, type ApplyResult } from '../../src/scheduler/state-machine.js';
import {
  deposedLeaderStillRunning,
  gracefulTransfers,
  leaderDiesAfterIntentBeforeSend,
  leaderDiesAfterSend,
  leaderDiesBeforeIntentCommits,
  wholeClusterDown,
} from './scheduler-scenarios.js';
import {
  LOOK_AHEAD_MS,
  MISFIRE_THRESHOLD_MS,
  runSchedulerSim,
  type SchedCounts,
  type SchedulerSimOptions,
} from './scheduler-sim.js';
import { planRetry } from '../../src/delivery/backoff.js';
import { SeededRand } from '../../src/base/rand.js';

const SEEDS = Array.from({ length: 200 }, (_, i) => 1 + i);

t.test(`${SEEDS.length} scheduler seeds with faults keep every invariant`, (t) => {
  const failures: string[] = [];
  const totals: Partial<Record<keyof SchedCounts, number>> = {};
  for (const seed of SEEDS) {
    const res = runSchedulerSim({ seed });
    for (const [k, v] of Object.entries(res.counts) as [keyof SchedCounts, number][])
      totals[k] = (totals[k] ?? 0) + v;
    if (!res.ok)
      failures.push(`seed ${seed}: ${res.violation}\n  ${res.traceTail.slice(-20).join('\n  ')}`);
  }
  t.same(
    failures,
    [],
    'no seed violates an invariant (replay: npm run sim -- --scheduler --seed S)',
  );
  const n = (k: keyof SchedCounts): number => totals[k] ?? 0;
  t.ok(n('sends') > 3000 && n('expectedSlots') > 5000, `work was done: ${JSON.stringify(totals)}`);
  t.ok(
    n('crashes') > 500 && n('partitions') > 300 && n('freezes') > 100,
    'crashes, partitions, pauses',
  );
  t.ok(n('crashesAfterSend') > 10 && n('crashesAfterIntent') > 10, 'crashes aimed mid-protocol');
  t.ok(n('gracefulTransfers') > 100 && n('fullStops') > 20, 'graceful transfers, full stops');
  t.ok(
    n('duplicates') > 20 && n('unknown') > 5,
    'at-least-once duplicates and UNKNOWN runs happen',
  );
  t.ok(n('missed') > 100 && n('skipped') > 100 && n('dead') > 100, 'MISSED, SKIPPED, DEAD runs');
  t.ok(
    n('updates') > 500 && n('superseded') > 20 && n('queuedRefused') > 10,
    'updates superseded planned runs, and held deliveries were refused at the send',
  );
  t.ok(
    n('audits') > 2000 && n('agreementChecks') > 2000,
    'replicas were compared with each other and with a full scan of their state',
  );
  t.ok(n('unfinishedInBound') > 0, 'the progress bound was close enough to matter');
  t.end();
});

// Leaders holding attempt results back while their sends are unanswered (resultHoldMs, as the
// runtime does during a spike): a failure loses the held results, and the invariants must hold
// all the same (duplicates only across a failure, at-most-once never twice).
t.test('60 seeds with results held back keep every invariant', (t) => {
  const failures: string[] = [];
  let duplicates = 0;
  let unknown = 0;
  for (let seed = 1001; seed <= 1060; seed++) {
    const res = runSchedulerSim({ seed, resultHoldMs: 250 });
    duplicates += res.counts.duplicates;
    unknown += res.counts.unknown;
    if (!res.ok)
      failures.push(`seed ${seed}: ${res.violation}\n  ${res.traceTail.slice(-20).join('\n  ')}`);
  }
  t.same(failures, [], 'replay: npm run sim -- --scheduler --seed S --result-hold-ms 250');
  t.ok(
    duplicates > 0 && unknown > 0,
    `failures happened: ${duplicates} duplicates, ${unknown} UNKNOWN`,
  );
  t.end();
});

t.test('the same seed gives a byte-identical trace', (t) => {
  const a = runSchedulerSim({ seed: 4242 });
  const b = runSchedulerSim({ seed: 4242 });
  const c = runSchedulerSim({ seed: 4243 });
  t.ok(a.ok, a.violation ?? '');
  t.equal(a.traceHash, b.traceHash, 'replay matches');
  t.equal(a.events, b.events);
  t.same(a.counts, b.counts);
  t.not(a.traceHash, c.traceHash, 'another seed differs');
  t.end();
});

// ---------------------------------------------------------------------------------------
// The checkers can fail

function dispatcherOptions(startMs: number): ConstructorParameters<typeof GroupDispatcher>[1] {
  const rand = new SeededRand(1);
  return {
    startMs,
    lookAheadMs: LOOK_AHEAD_MS,
    misfireThresholdMs: MISFIRE_THRESHOLD_MS,
    retryAt: (job, attempt, slot, now, retryAfter) =>
      planRetry(job.retry, attempt, slot, now, retryAfter, rand),
  };
}

/** Believes it always holds the lease: a deposed leader keeps delivering. */
class NoLeaseDispatcher extends GroupDispatcher {
  override step(nowMs: number, leadership: Leadership | undefined): DispatchStep {
    return super.step(nowMs, leadership && { ...leadership, leaseValid: true });
  }
}

/** A new leader that never marks its predecessor's unanswered at-most-once sends UNKNOWN. */
class NoRecoveryDispatcher extends GroupDispatcher {
  override step(nowMs: number, leadership: Leadership | undefined): DispatchStep {
    const out = super.step(nowMs, leadership);
    return { ...out, proposals: out.proposals.filter((c) => c.op !== 'mark-unknown') };
  }
}

/**
 * A new leader that takes every leadership for a drained hand-over, so it never records the
 * sends its predecessor may have made: its own send repeats their attempt numbers.
 */
class TrustsPredecessorDispatcher extends GroupDispatcher {
  override step(nowMs: number, leadership: Leadership | undefined): DispatchStep {
    return super.step(nowMs, leadership && { ...leadership, handedOver: true });
  }
}

/** A follower that keeps no wheel up to date (only a restore or a new dispatcher rebuilds). */
class FollowerSkipsIndexDispatcher extends GroupDispatcher {
  override afterApply(): void {
    if (this.leaderTerm === undefined) this.sm.takeTouched();
    else super.afterApply();
  }
}

/** A restore that loses each job's highest fencing token. */
class TokenLosingStateMachine extends SchedulerStateMachine {
  override restore(data: Uint8Array): void {
    super.restore(data);
    for (const id of [...this.jobs.keys()]) this.jobs.setLastToken(id, 0);
  }
}

/** Treats every failed attempt as provably undelivered: at-most-once runs are re-sent. */
class RetriesAtMostOnceDispatcher extends GroupDispatcher {
  override attemptDone(o: DeliveryOrder, f: AttemptFinished, nowMs: number): void {
    super.attemptDone(o, { ...f, isProvablyUndelivered: true }, nowMs);
  }
}

/** Takes every upstream for succeeded at once: dependent runs go before their upstreams. */
class IgnoresUpstreamsDispatcher extends GroupDispatcher {
  override upstreamAnswered(
    q: UpstreamQuery,
    _answers: Parameters<GroupDispatcher['upstreamAnswered']>[1],
    nowMs: number,
  ): void {
    super.upstreamAnswered(
      q,
      q.jobs.map((job) => ({ job, outcome: 'succeeded' as const })),
      nowMs,
    );
  }
}

/** Takes a completion whatever its token names: a deposed attempt's completion finishes runs. */
class AnyTokenStateMachine extends SchedulerStateMachine {
  override applyCommand(c: SchedulerCommand): ApplyResult {
    if (c.op === 'complete-run' && c.ifCompleteByMs === undefined) {
      const last = this.runs.get(c.fireId)?.attempts.at(-1);
      if (last !== undefined) return super.applyCommand({ ...c, token: last.token });
    }
    return super.applyCommand(c);
  }
}

function firstFailure(
  make: ((sm: SchedulerStateMachine, startMs: number) => GroupDispatcher) | undefined,
  seeds: number,
  options: Omit<SchedulerSimOptions, 'seed'> = {},
): { seed: number; violation: string } | undefined {
  for (let seed = 1; seed <= seeds; seed++) {
    const res = runSchedulerSim({ seed, ...options, ...(make && { makeDispatcher: make }) });
    if (!res.ok) return { seed, violation: res.violation ?? '' };
  }
  return undefined;
}

t.test('checker: a dispatcher that ignores the lease is caught', (t) => {
  const found = firstFailure((sm, s) => new NoLeaseDispatcher(sm, dispatcherOptions(s)), 40);
  t.ok(found, `caught at seed ${found?.seed}: ${found?.violation}`);
  t.end();
});

t.test('checker: re-sending an at-most-once run after a possible delivery is caught', (t) => {
  const found = firstFailure(
    (sm, s) => new RetriesAtMostOnceDispatcher(sm, dispatcherOptions(s)),
    40,
  );
  t.ok(found, `caught at seed ${found?.seed}: ${found?.violation}`);
  t.match(found?.violation ?? '', /at-most-once .* received twice/);
  t.end();
});

t.test('checker: a new leader that never resolves orphaned sends fails the progress check', (t) => {
  const found = firstFailure((sm, s) => new NoRecoveryDispatcher(sm, dispatcherOptions(s)), 40);
  t.ok(found, `caught at seed ${found?.seed}: ${found?.violation}`);
  t.match(found?.violation ?? '', /progress: .* still DISPATCHED/);
  t.end();
});

t.test('checker: a new leader re-sending under its predecessor’s attempt number is caught', (t) => {
  const found = firstFailure(
    (sm, s) => new TrustsPredecessorDispatcher(sm, dispatcherOptions(s)),
    40,
  );
  t.ok(found, `caught at seed ${found?.seed}: ${found?.violation}`);
  t.match(found?.violation ?? '', /as attempt \d+ a second time/);
  t.end();
});

t.test('checker: a follower whose wheels drift from its state is caught by the audit', (t) => {
  const found = firstFailure(
    (sm, s) => new FollowerSkipsIndexDispatcher(sm, dispatcherOptions(s)),
    40,
  );
  t.ok(found, `caught at seed ${found?.seed}: ${found?.violation}`);
  t.match(found?.violation ?? '', /derived state differs from a full scan/);
  t.end();
});

t.test('checker: a restore that loses a field is caught by replica agreement', (t) => {
  const found = firstFailure(undefined, 40, {
    makeStateMachine: (limits) => new TokenLosingStateMachine(limits),
  });
  t.ok(found, `caught at seed ${found?.seed}: ${found?.violation}`);
  // The lost token shows where the replicas first differ: the job's highest token, or the token
  // a later attempt was issued from it, whichever the run reaches first.
  t.match(found?.violation ?? '', /replicas disagree .*(lastTokens?|attempts\.\d+\.token)/);
  t.end();
});

t.test('checker: a dispatcher that sends dependent runs before their upstreams is caught', (t) => {
  const found = firstFailure(
    (sm, s) => new IgnoresUpstreamsDispatcher(sm, dispatcherOptions(s)),
    60,
  );
  t.ok(found, `caught at seed ${found?.seed}: ${found?.violation}`);
  t.match(found?.violation ?? '', /sends .* on upstream run|before the receiver accepted upstream/);
  t.end();
});

t.test("checker: a completion taken with a deposed attempt's token is caught", (t) => {
  const found = firstFailure(undefined, 80, {
    makeStateMachine: (limits) => new AnyTokenStateMachine(limits),
  });
  t.ok(found, `caught at seed ${found?.seed}: ${found?.violation}`);
  t.match(
    found?.violation ?? '',
    /a completion with token \d+ was taken after the receiver saw token/,
  );
  t.end();
});

// ---------------------------------------------------------------------------------------
// The failure table (docs/ARCHITECTURE.md), one row each

const SCENARIO_SEEDS = [1, 2, 3, 4, 5, 6];

t.test('row 1: leader dies before the intent commits: fires late, never skips', (t) => {
  for (const seed of SCENARIO_SEEDS) {
    const o = leaderDiesBeforeIntentCommits(seed);
    t.equal(o.violation, undefined, `seed ${seed}: invariants hold`);
    t.ok(o.fireId, `seed ${seed}: the fault was aimed`);
    t.equal(o.run?.status, 'SUCCEEDED', `seed ${seed}: the slot still fired`);
    const accepted = o.receipts.filter((r) => r.status === 200);
    t.equal(accepted.length, 1, `seed ${seed}: delivered once`);
    t.ok(accepted[0] && termOfToken(accepted[0].token) > o.victimTerm, 'by a later term');
    const slot = Number(o.fireId!.split(':')[1]);
    const sentAt = o.sends.at(-1)!.atMs;
    // Late by about one election (virtual ms and wall ms differ by the clock offset only).
    t.ok(
      sentAt - o.faultAtMs < 2000,
      `seed ${seed}: late by ${(sentAt - o.faultAtMs).toFixed(0)} ms, not skipped`,
    );
    t.ok(slot > 0);
  }
  t.end();
});

t.test('row 2: leader dies after the intent, before sending: next leader delivers', (t) => {
  for (const seed of SCENARIO_SEEDS) {
    const o = leaderDiesAfterIntentBeforeSend(seed);
    t.equal(o.violation, undefined, `seed ${seed}: invariants hold`);
    t.equal(o.run?.status, 'SUCCEEDED', `seed ${seed}: fired`);
    t.equal(o.receipts.length, 1, `seed ${seed}: one delivery`);
    const r = o.receipts[0]!;
    t.not(r.from, o.victim, `seed ${seed}: sent by the next leader`);
    t.ok(termOfToken(r.token) > o.victimTerm, `seed ${seed}: with a token of its own term`);
  }
  t.end();
});

t.test(
  'row 3: dies after sending (at-least-once): re-delivered, same fire id, higher token',
  (t) => {
    for (const seed of SCENARIO_SEEDS) {
      const o = leaderDiesAfterSend(seed, 'at_least_once');
      t.equal(o.violation, undefined, `seed ${seed}: invariants hold`);
      const accepted = o.receipts.filter((r) => r.status === 200);
      t.equal(accepted.length, 2, `seed ${seed}: delivered twice (a detectable duplicate)`);
      t.equal(accepted[0]?.from, o.victim, 'first by the dead leader');
      t.ok(accepted[1]!.token > accepted[0]!.token, 'the second with a higher token');
      t.ok(termOfToken(accepted[1]!.token) > o.victimTerm, 'from a later term');
      t.equal(o.run?.status, 'SUCCEEDED');
    }
    t.end();
  },
);

t.test('row 4: dies after sending (at-most-once): run UNKNOWN, never re-sent', (t) => {
  for (const seed of SCENARIO_SEEDS) {
    const o = leaderDiesAfterSend(seed, 'at_most_once');
    t.equal(o.violation, undefined, `seed ${seed}: invariants hold`);
    t.equal(o.receipts.length, 1, `seed ${seed}: received once`);
    t.equal(o.sends.length, 1, `seed ${seed}: sent once`);
    t.equal(o.run?.status, 'UNKNOWN', `seed ${seed}: marked UNKNOWN`);
    t.match(o.run?.reason ?? '', /lost with its leader/);
  }
  t.end();
});

t.test('row 5: deposed leader still running: no send past its lease; late request fenced', (t) => {
  for (const seed of SCENARIO_SEEDS) {
    const o = deposedLeaderStillRunning(seed);
    t.equal(o.violation, undefined, `seed ${seed}: invariants hold`);
    t.equal(o.sendsByVictimAfter, 0, `seed ${seed}: the cut-off leader sent nothing after`);
    const fenced = o.receipts.filter((r) => r.status === 409);
    t.equal(fenced.length, 1, `seed ${seed}: its in-flight request was rejected`);
    t.equal(fenced[0]?.from, o.victim, 'the rejected one is the deposed leader’s');
    const accepted = o.receipts.filter((r) => r.status === 200);
    t.equal(accepted.length, 1, 'the new leader’s delivery was accepted');
    t.ok(termOfToken(accepted[0]!.token) > termOfToken(fenced[0]!.token), 'with a higher term');
  }
  t.end();
});

t.test('row 6: graceful transfers (drain, then hand over): zero duplicates', (t) => {
  // Also with results held back: the drain proposes them before the hand-over.
  const cases = SCENARIO_SEEDS.flatMap((s): [number, number][] => [
    [s, 0],
    [s, 250],
  ]);
  for (const [seed, holdMs] of cases) {
    const o = gracefulTransfers(seed, 6, holdMs);
    t.equal(o.violation, undefined, `seed ${seed}: invariants hold`);
    const c = o.sim.counts;
    t.ok(c.gracefulTransfers >= 5, `seed ${seed}: ${c.gracefulTransfers} hand-overs`);
    t.equal(c.duplicates, 0, `seed ${seed}: no duplicate`);
    const perFire = new Map<string, number>();
    for (const r of o.sim.receipts) perFire.set(r.fireId, (perFire.get(r.fireId) ?? 0) + 1);
    t.same(
      [...perFire.values()].filter((n) => n > 1),
      [],
      'each fire id received once',
    );
    t.ok(c.sends > 40, `seed ${seed}: ${c.sends} deliveries across the hand-overs`);
    t.equal(c.fencingRejections, 0);
  }
  t.end();
});

t.test('row 7: whole cluster down: each misfire policy, every slot recorded', (t) => {
  for (const seed of SCENARIO_SEEDS) {
    const { outcome, jobs } = wholeClusterDown(seed);
    t.equal(
      outcome.violation,
      undefined,
      `seed ${seed}: invariants hold (every due slot has a run)`,
    );
    for (const j of jobs) {
      const fired = j.late.filter((r) => r.status !== 'MISSED');
      const missed = j.late.filter((r) => r.status === 'MISSED');
      const reasons = [...new Set(missed.map((r) => r.reason))];
      t.ok(j.late.length >= 8, `seed ${seed} ${j.policy}: ${j.late.length} late slots`);
      t.ok(
        j.onTime.every((r) => r.status !== 'MISSED'),
        'on-time slots fire',
      );
      switch (j.jobId) {
        case 'fa':
          t.equal(fired.length, 2, 'fire_all: the cap of late slots fire');
          t.same(
            fired.map((r) => r.slotMs),
            j.late.slice(-2).map((r) => r.slotMs),
            'the latest ones',
          );
          t.same(reasons, ['fire_all_cap']);
          break;
        case 'fo':
          t.equal(fired.length, j.onTime.length > 0 ? 0 : 1, 'fire_once: one run for all');
          t.same(reasons, ['coalesced']);
          break;
        case 'sk':
          t.equal(fired.length, 0, 'skip: none of the late slots fire');
          t.same(reasons, ['skip_policy']);
          break;
        case 'cw': {
          const outside = missed.filter((r) => r.reason === 'outside_catch_up_window');
          t.ok(outside.length > 0, 'slots beyond the catch-up window are MISSED');
          t.ok(
            outside.every((r) => j.plannedAtMs - r.slotMs > 4000) &&
              fired.every((r) => j.plannedAtMs - r.slotMs <= 4000),
            'exactly those older than the window',
          );
          break;
        }
      }
    }
  }
  t.end();
});
