/**
 * The hand-out simulator: one node's path from the groups' wheels to the socket, in virtual time,
 * with the code the runtime runs — a GroupDispatcher per group over its SchedulerStateMachine,
 * the node's pace and admission (src/delivery/hand-out-pace.ts) and its FairQueue — and
 * simulated receivers: healthy ones, and noisy tenants' endpoints that never answer, answer
 * after 5 s, refuse connections or reset them. The node has one CPU: a group's hand-out and an
 * attempt's start each cost CPU time, so a hand-out step that pushes work nobody can start
 * delays everything after it, as it would on a real node. Raft is left out (proposals commit
 * after a fixed delay on the one replica): what is checked here is the node's order of work.
 *
 * Invariant (docs/ARCHITECTURE.md, The runtime and delivery): a quiet tenant's P0 run leaves
 * within `boundMs` of its slot whatever the noisy tenants' endpoints do, and no noisy run is
 * recorded MISSED for having waited behind its own endpoint (delayed, never dropped).
 */
import { SeededRand } from '../../src/base/rand.js';
import { FairQueue, type FairItem } from '../../src/delivery/fair-queue.js';
import {
  handOutBudget,
  handOutGateOf,
  DELIVERY_QUEUE_TARGET,
} from '../../src/delivery/hand-out-pace.js';
import { TenantFireRate } from '../../src/delivery/tenant-fire-rate.js';
import type { SchedulerCommand } from '../../src/scheduler/commands.js';
import {
  GroupDispatcher,
  type AttemptFinished,
  type DeliveryOrder,
} from '../../src/scheduler/dispatcher.js';
import { ADMIT_ALL, type HandOutAdmission } from '../../src/scheduler/hand-out-queue.js';
import type { JobSpec } from '../../src/scheduler/model.js';
import { SchedulerStateMachine } from '../../src/scheduler/state-machine.js';
import { EventQueue } from './event-queue.js';

/** How a noisy tenant's endpoint behaves (`ok`: healthy; the tenant is noisy by its volume). */
export type NoisyReceiver = 'hang' | 'slow' | 'refuse' | 'reset' | 'ok';

export interface HandOutSimOptions {
  readonly seed: number;
  /**
   * The noisy tenants' floods: one tenant per entry, `jobs` one-offs due together; a tenant with
   * `firesPerSecond` is held to that rate at the hand-out (src/delivery/tenant-fire-rate.ts).
   */
  readonly floods: readonly {
    readonly receiver: NoisyReceiver;
    readonly jobs: number;
    readonly firesPerSecond?: number;
  }[];
  /** Groups on the node. @default 4 */
  readonly groups?: number;
  /** A quiet P0 run must leave within this much of its slot. @default 100 */
  readonly boundMs?: number;
  /**
   * Test seam: the pace of an older runtime, to show that the simulator catches a hand-out
   * that lets a dead endpoint block everybody (`queued`: budget counted on every queued attempt,
   * every run admitted). @default 'startable'
   */
  readonly pace?: 'startable' | 'queued';
}

export interface HandOutSimResult {
  readonly ok: boolean;
  readonly violations: readonly string[];
  /** Lag of each quiet P0 run (send − slot), in slot order. */
  readonly quietLagsMs: readonly number[];
  readonly counts: {
    handedOut: number;
    started: number;
    noisySent: number;
    noisyMissed: number;
    quietSent: number;
    peakQueued: number;
    /** Noisy runs handed out after waiting for their tenant's fire rate. */
    throttled: number;
  };
}

/** The node's delivery settings, as `tickraft serve` defaults them. */
const ORIGIN_INFLIGHT = 64;
const TENANT_INFLIGHT = 4096;
const QUEUED_MAX = 200_000;
/** CPU per hand-out and per start (the runtime measures about 35 µs per run on a busy node). */
const HAND_OUT_CPU_MS = 0.035;
const START_CPU_MS = 0.035;
/** Starts per loop turn (delivery-runner.ts STARTS_PER_TURN). */
const STARTS_PER_TURN = 128;
/** Between steps when the node is idle, and a proposal's commit. */
const STEP_MS = 2;
const COMMIT_MS = 3;
const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
/** The floods' slot; quiet P0 slots fall before, with and after it. */
const FLOOD_AT = T0 + 4_000;
const QUIET_OFFSETS_MS = [-1000, -5, 0, 5, 10, 250, 1000, 2000, 3000, 5000, 8000];
const END = FLOOD_AT + 12_000;

interface Item extends FairItem {
  readonly order: DeliveryOrder;
  readonly group: number;
}

type Event =
  | { readonly kind: 'commit'; readonly group: number; readonly cmds: readonly SchedulerCommand[] }
  | { readonly kind: 'answer'; readonly item: Item; readonly finished: AttemptFinished };

export function runHandOutSim(opts: HandOutSimOptions): HandOutSimResult {
  const r = new SeededRand(opts.seed);
  const boundMs = opts.boundMs ?? 100;
  const groupCount = opts.groups ?? 4;
  const violations: string[] = [];
  const counts = {
    handedOut: 0,
    started: 0,
    noisySent: 0,
    noisyMissed: 0,
    quietSent: 0,
    peakQueued: 0,
    throttled: 0,
  };
  const quietLags = new Map<string, number>();
  const queue = new FairQueue<Item>({
    queuedMax: QUEUED_MAX,
    tenantInflightMax: TENANT_INFLIGHT,
    originInflightMax: ORIGIN_INFLIGHT,
  });
  const events = new EventQueue<Event>();
  const groups = Array.from({ length: groupCount }, () => {
    const sm = new SchedulerStateMachine();
    const d = new GroupDispatcher(sm, {
      startMs: T0,
      lookAheadMs: 3000,
      misfireThresholdMs: 5000,
      originOf: (url) => new URL(url).origin,
      retryAt: (job, attempt, _slot, now) =>
        attempt >= job.retry.maxAttempts ? undefined : now + 1000 * attempt,
    });
    return { sm, d };
  });

  // The jobs: each noisy tenant's flood, and the quiet tenant's P0 one-offs, spread over the
  // groups as the ring would spread them (here: at random).
  let created = 0;
  const create = (tenant: string, job: string, slotMs: number, over: Partial<JobSpec>): void => {
    const g = groups[r.int(groupCount)]!;
    g.sm.applyCommand({
      op: 'create-job',
      atMs: T0,
      jobId: `${tenant}/${job}`,
      spec: jobSpec(tenant, job, slotMs, over),
      nextFireAtMs: slotMs,
      requestId: undefined,
    });
    g.d.afterApply();
    created++;
  };
  const tenantOf = (i: number): string => `noisy-${i}-${opts.floods[i]!.receiver}`;
  opts.floods.forEach((flood, i) => {
    const tenant = tenantOf(i);
    for (let j = 0; j < flood.jobs; j++)
      create(tenant, `flood-${j}`, FLOOD_AT, {
        misfire: { policy: 'skip', fireAllCap: 10, catchUpWindowMs: 3600_000 },
        target: { url: `http://127.0.0.2:${9000 + i}/${flood.receiver}`, headers: {} },
        priority: r.int(4),
      });
  });
  QUIET_OFFSETS_MS.forEach((offset, i) => {
    for (let k = 0; k < 3; k++)
      create('quiet', `p0-${i}-${k}`, FLOOD_AT + offset, {
        target: { url: 'http://127.0.0.3:8080/ok', headers: {} },
        priority: 0,
      });
  });
  void created;

  // The runtime's gate: room in the queue, then the tenant's fire rate.
  const rates = new Map(
    opts.floods.flatMap((f, i) =>
      f.firesPerSecond === undefined ? [] : [[tenantOf(i), f.firesPerSecond] as const],
    ),
  );
  const fireRate = new TenantFireRate(
    (tenant) => rates.get(tenant) ?? Infinity,
    () => counts.throttled++,
  );
  const gate = handOutGateOf(queue, fireRate);
  const admits: HandOutAdmission = opts.pace === 'queued' ? ADMIT_ALL : gate.admits;
  /** Hand-outs of each rate-limited tenant, by virtual second. */
  const perSecond = new Map<string, Map<number, number>>();
  const budgetOf = (): number =>
    opts.pace === 'queued'
      ? Math.max(0, DELIVERY_QUEUE_TARGET - queue.queuedCount)
      : handOutBudget(queue);
  const leadership = { term: 1, leaseValid: true, caughtUp: true };

  const answer = (item: Item, nowMs: number): void => {
    const url = item.order.job.target.url;
    const kind = url.endsWith('/hang')
      ? 'hang'
      : url.endsWith('/slow')
        ? 'slow'
        : url.endsWith('/refuse')
          ? 'refuse'
          : url.endsWith('/reset')
            ? 'reset'
            : 'ok';
    const deadline = item.order.job.attemptDeadlineMs;
    const at = (ms: number, finished: AttemptFinished): void =>
      events.push(nowMs + ms, { kind: 'answer', item, finished });
    switch (kind) {
      case 'ok':
        at(2 + r.float() * 18, {
          outcome: 'success',
          statusCode: 200,
          durationMs: 5,
          isProvablyUndelivered: false,
        });
        return;
      case 'hang':
        at(deadline, {
          outcome: 'retry',
          durationMs: deadline,
          error: 'timeout',
          isProvablyUndelivered: false,
        });
        return;
      case 'slow':
        at(Math.min(5000, deadline), {
          outcome: deadline > 5000 ? 'success' : 'retry',
          statusCode: deadline > 5000 ? 200 : undefined,
          durationMs: 5000,
          isProvablyUndelivered: false,
        });
        return;
      case 'refuse':
        at(0.2, {
          outcome: 'retry',
          durationMs: 0,
          error: 'ECONNREFUSED',
          isProvablyUndelivered: true,
        });
        return;
      case 'reset':
        at(30 + r.float() * 50, {
          outcome: 'retry',
          durationMs: 50,
          error: 'ECONNRESET',
          isProvablyUndelivered: false,
        });
        return;
    }
  };

  let now = T0;
  let rotation = 0;
  while (now < END) {
    // What the network and the log did while the CPU was busy.
    for (let at = events.peekTime(); at !== undefined && at <= now; at = events.peekTime()) {
      const ev = events.pop()!.event;
      if (ev.kind === 'commit') {
        const g = groups[ev.group]!;
        for (const c of ev.cmds) g.sm.applyCommand(c);
        g.d.afterApply();
        for (const c of ev.cmds) g.d.proposalSettled(c, 'committed', 1);
      } else {
        queue.done(ev.item);
        groups[ev.item.group]!.d.attemptDone(ev.item.order, ev.finished, now);
      }
    }
    // One loop turn: the groups step (the runtime's stepAll), then the runner starts a turn's
    // worth of attempts.
    let cpu = 0;
    let left = budgetOf();
    const hold = queue.startableCount > 0;
    rotation = (rotation + 1) % groupCount;
    fireRate.step(now);
    for (let i = 0; i < groupCount; i++) {
      const gi = (rotation + i) % groupCount;
      const g = groups[gi]!;
      const s = g.d.step(now, leadership, left, { hold, max: 1024 }, admits, gate.taken);
      if (s.proposals.length > 0)
        events.push(now + COMMIT_MS, { kind: 'commit', group: gi, cmds: s.proposals });
      for (const order of s.deliveries) {
        counts.handedOut++;
        if (rates.has(order.job.tenant) && order.attempt === 1) {
          const byS = perSecond.get(order.job.tenant) ?? new Map<number, number>();
          perSecond.set(order.job.tenant, byS);
          const second = Math.floor((now - FLOOD_AT) / 1000);
          byS.set(second, (byS.get(second) ?? 0) + 1);
        }
        cpu += HAND_OUT_CPU_MS;
        const item: Item = {
          tenant: order.job.tenant,
          origin: new URL(order.job.target.url).origin,
          priority: order.job.priority,
          order,
          group: gi,
        };
        if (queue.push(item) !== 'queued') {
          g.d.attemptDone(
            order,
            { outcome: 'retry', durationMs: 0, error: 'queue full', isProvablyUndelivered: true },
            now,
          );
        }
      }
      left -= Math.min(left, s.deliveries.length);
    }
    counts.peakQueued = Math.max(counts.peakQueued, queue.queuedCount);
    for (let n = 0; n < STARTS_PER_TURN; n++) {
      const item = queue.take();
      if (item === undefined) break;
      const sendAt = now + cpu;
      cpu += START_CPU_MS;
      counts.started++;
      const g = groups[item.group]!;
      if (!g.d.maySend(item.order)) {
        queue.done(item);
        g.d.attemptNotStarted(item.order, sendAt);
        continue;
      }
      if (item.tenant === 'quiet') {
        counts.quietSent++;
        if (!quietLags.has(item.order.fireId))
          quietLags.set(item.order.fireId, sendAt - item.order.slotMs);
      } else counts.noisySent++;
      answer(item, sendAt);
    }
    now += Math.max(STEP_MS, cpu);
  }

  // The checks.
  const quiet = [...quietLags.entries()].sort((a, b) => a[0].localeCompare(b[0]));
  const expected = QUIET_OFFSETS_MS.length * 3;
  if (quietLags.size !== expected)
    violations.push(`${expected - quietLags.size} of ${expected} quiet P0 runs never left`);
  for (const [fireId, lag] of quiet)
    if (lag > boundMs)
      violations.push(
        `quiet P0 ${fireId} left ${lag.toFixed(1)} ms after its slot (bound ${boundMs} ms)`,
      );
  for (const g of groups)
    for (const run of g.sm.runs.values())
      if (run.status === 'MISSED' && !run.jobId.startsWith('quiet/')) {
        counts.noisyMissed++;
        if (counts.noisyMissed <= 3)
          violations.push(
            `noisy ${run.fireId} MISSED (${run.reason ?? 'no reason'}) for waiting behind its endpoint`,
          );
      }
  // A tenant held to a rate hands out at most a second's worth (its bucket) plus the rate in any
  // second, and every one of its runs goes out in the end.
  for (const [tenant, rate] of rates) {
    const byS = perSecond.get(tenant) ?? new Map<number, number>();
    for (const [second, n] of byS)
      if (n > (second === 0 ? 2 * rate : rate) + 1)
        violations.push(`${tenant} handed out ${n} runs in second ${second} (rate ${rate}/s)`);
    const sent = [...byS.values()].reduce((a, b) => a + b, 0);
    const jobs = opts.floods.find((_, i) => tenantOf(i) === tenant)!.jobs;
    if (sent !== jobs) violations.push(`${tenant}: ${sent} of ${jobs} runs handed out`);
  }
  return {
    ok: violations.length === 0,
    violations,
    quietLagsMs: quiet.map(([, lag]) => lag),
    counts,
  };
}

function jobSpec(tenant: string, name: string, slotMs: number, over: Partial<JobSpec>): JobSpec {
  return {
    tenant,
    name,
    schedule: `at ${new Date(slotMs).toISOString()}`,
    timezone: 'UTC',
    anchorMs: undefined,
    target: { url: 'http://127.0.0.3:8080/ok', headers: {} },
    payload: '{}',
    delivery: 'at_least_once',
    retry: {
      maxAttempts: 5,
      initialBackoffMs: 1000,
      maxBackoffMs: 60_000,
      multiplier: 2,
      maxAgeMs: 3600_000,
    },
    attemptDeadlineMs: 30_000,
    misfire: { policy: 'fire_once', fireAllCap: 10, catchUpWindowMs: 3600_000 },
    overlap: { policy: 'allow', bufferCap: 0 },
    priority: 1,
    startAtMs: undefined,
    endAtMs: undefined,
    remainingFires: undefined,
    ...over,
  };
}
