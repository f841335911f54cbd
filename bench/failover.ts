/**
 * Failover, for `npm run bench`: trials of a data group losing its leader, each on a fresh
 * 3-process cluster whose every peer link crosses a Toxiproxy proxy
 * (test/helpers/proxied-cluster.ts), so that kills, partitions and pauses all meet the same
 * topology. Two kinds of group:
 *
 * - busy: `jobs` every-second cron jobs (misfire fire_all) all in one data group. The fault comes
 *   after 4 s of steady firing, at a random point within the next second.
 * - quiet: one job every 10 s (misfire fire_all) alone in its group, which quiesces between
 *   slots (no heartbeats). The fault comes 1 s before a slot or 6 s before it, alternating
 *   between trials; the trial records whether the leader reported quiesced in the 1.5 s before.
 *
 * Three faults on the process leading the group: kill (SIGKILL), partition (isolated from its
 * peers, blackhole: every byte on its peer links vanishes) and pause (SIGSTOP). The partition is
 * healed and the paused process continued (SIGCONT) once the figures below are measured.
 *
 * Figures per trial: the time from the fault until another node says it leads the group in a
 * higher term; resume: for busy groups the time from the fault to the sink's first receipt
 * carrying a fencing token of a higher term, for quiet groups the lag of the first slot due after
 * the fault; the slots lost (busy: every slot of every job from the window's start to 6 s after
 * the fault; quiet: the first 2 slots after the fault; all must reach the sink), the slots more
 * than 1 s late, the duplicates, and the lease violations: requests carrying the old leader's term
 * for a slot whose request from a newer term the sink had already received.
 */
import { ApiCallError, type ApiClient } from '../src/api/client.js';
import { META_GROUP_ID } from '../src/placement/bootstrap-plan.js';
import { hashShardKey } from '../src/placement/hash.js';
import { lookupRange, splitRing } from '../src/placement/ring.js';
import { termOfToken } from '../src/scheduler/dispatcher.js';
import { sleep, type ProcCluster, type ProcNode } from '../test/helpers/cluster.js';
import { ProxiedCluster } from '../test/helpers/proxied-cluster.js';
import { TEST_SECRET } from '../test/helpers/webhook-sink.js';
import { apiClients, settleLeaders } from './bench-cluster.js';
import { fmt, percentile } from './figures.js';
import { createBatch } from './registration.js';
import { startSinkProcess } from './sink-process.js';

export const GROUP_KINDS = ['busy', 'quiet'] as const;
export type GroupKind = (typeof GROUP_KINDS)[number];
export const FAULTS = ['kill', 'partition', 'pause'] as const;
export type Fault = (typeof FAULTS)[number];

/** How each fault is written in the output. */
export const FAULT_TEXT: Record<Fault, string> = {
  kill: 'kill -9',
  partition: 'isolate',
  pause: 'SIGSTOP',
};

/** A slot later than this is counted late. */
const LATE_MS = 1000;
/** Any wait of a trial (a new leader, the resume, the next slot's receipt) gives up after this. */
const GIVE_UP_MS = 60_000;
/** Election polls: every 20 ms, each node asked with this deadline. */
const POLL_MS = 20;
const STATUS_DEADLINE_MS = 1000;
/** How long before the fault the leader's replica is watched for `quiesced`. */
const WATCH_BEFORE_FAULT_MS = 1500;
/**
 * After SIGCONT or the heal, the sink is read for at least this long: what the old leader still
 * held (requests rendered ahead, attempts in flight) goes out, if it wrongly goes out, within its
 * first loop turns and reconnects.
 */
const AFTER_UNDO_MS = 5000;
/** Quiet groups: the job's period, and how many slots after the fault must arrive. */
const QUIET_PERIOD_MS = 10_000;
const QUIET_SLOTS = 2;
/** Quiet groups: the fault's offsets before a slot, taken in turn by successive trials. */
const QUIET_OFFSETS_MS = [1000, 6000] as const;

/**
 * Records [fire id, receipt ms, fencing token] of every request; GET /receipts?from=N returns
 * those from the N-th on, so that the bench can poll it often at little cost.
 */
const SINK_SOURCE = `
const http = require('node:http');
const receipts = [];
const server = http.createServer((req, res) => {
  if (req.url.startsWith('/receipts')) {
    const from = Number(new URL(req.url, 'http://sink').searchParams.get('from')) || 0;
    res.end(JSON.stringify(receipts.slice(from)));
    return;
  }
  req.resume();
  req.on('end', () => {
    receipts.push([req.headers['idempotency-key'], Date.now(), Number(req.headers['tickraft-fencing-token'])]);
    res.writeHead(200, { 'content-length': '2' });
    res.end('ok');
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;

export interface FailoverOptions {
  /** Every-second jobs of the busy group. */
  readonly jobs: number;
  readonly groups: number;
  /** Trials of each kind × fault combination. */
  readonly trials: number;
  readonly log?: (line: string) => void;
}

export interface FailoverTrial {
  readonly kind: GroupKind;
  readonly fault: Fault;
  /** 1-based, within its combination. */
  readonly trial: number;
  /** Quiet groups: how long before the slot the fault was due. */
  readonly beforeSlotMs: number | undefined;
  readonly groupId: number;
  readonly oldLeader: string;
  readonly oldTerm: number;
  /** The old leader's replica reported quiesced within the 1.5 s before the fault. */
  readonly quiescedBefore: boolean;
  /** How long putting the fault in force took (the isolation's proxy calls; ~0 for signals). */
  readonly applyMs: number;
  readonly newLeader: string;
  readonly newTerm: number;
  /** Fault → another node says it leads the group in a higher term (Infinity: not in 60 s). */
  readonly electedMs: number;
  /** Busy: fault → first receipt of a higher term. Quiet: the first slot after the fault's lag. */
  readonly resumeMs: number;
  /** Slots (job × slot time) that had to reach the sink. */
  readonly expectedSlots: number;
  readonly lostSlots: number;
  /** Slots received over 1 s after their time, among those due from 1 s before the fault on. */
  readonly lateSlots: number;
  /** The same for the slots before that: a loaded machine shows here. */
  readonly lateBeforeFault: number;
  /** Busy groups: the median lag of those earlier slots, what the machine gives unfaulted. */
  readonly lagP50BeforeFaultMs: number;
  /** Receipts beyond the first of a slot (at-least-once redeliveries). */
  readonly duplicates: number;
  /** Requests of the old term (or older) received after the heal or SIGCONT. */
  readonly staleAfterUndo: number;
  /** Old-term requests for a slot whose newer-term request the sink had already received. */
  readonly leaseViolations: number;
  /** Requests the sink received during the trial. */
  readonly received: number;
  /**
   * Where the new leader's time went, from its own replica's leadership timeline (debug
   * status; wall ms on the same machine): fault → its campaign began (detection), → it led
   * (election), → its term's no-op applied, → it held the lease, → its first hand-out. NaN
   * where a stage was not seen.
   */
  readonly stages: FailoverStages;
  /** Setting the trial up or running it failed: the figures above are void. */
  readonly error: string | undefined;
}

export interface FailoverStages {
  readonly detectionMs: number;
  readonly electionMs: number;
  readonly caughtUpMs: number;
  readonly leaseMs: number;
  readonly firstHandOutMs: number;
}

const NO_STAGES: FailoverStages = {
  detectionMs: Number.NaN,
  electionMs: Number.NaN,
  caughtUpMs: Number.NaN,
  leaseMs: Number.NaN,
  firstHandOutMs: Number.NaN,
};

/** One kind × fault combination over its trials (those that did not fail). */
export interface FailoverSummary {
  readonly kind: GroupKind;
  readonly fault: Fault;
  readonly completed: number;
  readonly failed: number;
  readonly resumeP50Ms: number;
  readonly resumeWorstMs: number;
  readonly electedP50Ms: number;
  readonly electedWorstMs: number;
  readonly expectedSlots: number;
  readonly lostSlots: number;
  readonly lateSlots: number;
  readonly leaseViolations: number;
  /** Quiet groups: trials whose leader reported quiesced just before the fault. */
  readonly quiescedBefore: number;
  /** Each stage's median over the trials that saw it. */
  readonly stagesP50: FailoverStages;
}

export interface FailoverResult {
  readonly jobs: number;
  readonly trialsPerCombination: number;
  readonly trials: readonly FailoverTrial[];
  readonly summaries: readonly FailoverSummary[];
}

type Receipt = readonly [fireId: string, atMs: number, token: number];

interface Leader {
  readonly node: ProcNode;
  readonly term: number;
  readonly quiesced: boolean;
}

/** When a trial's fault is due and what it must then measure, fixed once its jobs exist. */
interface Timeline {
  readonly faultAtMs: number;
  /** The slots (fire id → slot time) that must reach the sink, given the fault's real time. */
  slots(faultMs: number): Map<string, number>;
  /** The trial's resume figure if `r` ends the resume wait, else undefined. */
  resumeOf(r: Receipt, faultMs: number, oldTerm: number): number | undefined;
}

interface Workload {
  readonly tenant: string;
  readonly groupId: number;
  readonly jobIds: readonly string[];
  readonly schedule: string;
  /** Quiet groups: how long before its slot the fault comes. */
  readonly beforeSlotMs: number | undefined;
  timeline(createdMs: number): Timeline;
}

interface TrialSpec {
  readonly kind: GroupKind;
  readonly fault: Fault;
  readonly trial: number;
  readonly beforeSlotMs: number | undefined;
}

export async function runFailover(opts: FailoverOptions): Promise<FailoverResult> {
  const log = opts.log ?? ((line: string) => console.log(line));
  const trials: FailoverTrial[] = [];
  // Trial by trial across the combinations rather than combination by combination: the
  // machine's drift over the run then spreads over all of them alike.
  for (let i = 0; i < opts.trials; i++)
    for (const kind of GROUP_KINDS)
      for (const fault of FAULTS) {
        const spec: TrialSpec = {
          kind,
          fault,
          trial: i + 1,
          beforeSlotMs:
            kind === 'quiet' ? QUIET_OFFSETS_MS[i % QUIET_OFFSETS_MS.length] : undefined,
        };
        const trial = await runTrial(spec, opts, log);
        trials.push(trial);
        log(describeTrial(trial, opts.trials, opts.jobs));
      }
  return {
    jobs: opts.jobs,
    trialsPerCombination: opts.trials,
    trials,
    summaries: summarize(trials),
  };
}

/** `count` job ids of `tenant` that all hash into one data group. */
function idsInOneGroup(
  groups: number,
  tenant: string,
  count: number,
): { groupId: number; ids: string[] } {
  const ranges = splitRing(groups, META_GROUP_ID + 1);
  // The ring hashes a job's key, <tenant>/<job id>.
  const groupOf = (id: string): number =>
    lookupRange(ranges, hashShardKey(`${tenant}/${id}`)).groupId;
  const groupId = groupOf(`${tenant}-0`);
  const ids: string[] = [];
  for (let i = 0; ids.length < count; i++)
    if (groupOf(`${tenant}-${i}`) === groupId) ids.push(`${tenant}-${i}`);
  return { groupId, ids };
}

const fireId = (tenant: string, jobId: string, slotMs: number): string =>
  `${tenant}/${jobId}:${slotMs}`;

function busyWorkload(groups: number, jobs: number): Workload {
  const tenant = 'busy';
  const { groupId, ids } = idsInOneGroup(groups, tenant, jobs);
  return {
    tenant,
    groupId,
    jobIds: ids,
    schedule: '* * * * * *',
    beforeSlotMs: undefined,
    timeline(createdMs) {
      // Every job's first slot is at or after its creation: from the next second on, all fire.
      const windowStartMs = Math.ceil(createdMs / 1000) * 1000 + 1000;
      return {
        faultAtMs: windowStartMs + 4000 + Math.random() * 1000,
        slots(faultMs) {
          const endMs = Math.floor((faultMs + 6000) / 1000) * 1000;
          const slots = new Map<string, number>();
          for (const id of ids)
            for (let s = windowStartMs; s <= endMs; s += 1000) slots.set(fireId(tenant, id, s), s);
          return slots;
        },
        // The group fires again once the sink hears from a newer term than the old leader's.
        resumeOf: (r, faultMs, oldTerm) =>
          termOfToken(r[2]) > oldTerm ? r[1] - faultMs : undefined,
      };
    },
  };
}

function quietWorkload(groups: number, beforeSlotMs: number): Workload {
  const tenant = 'quiet';
  const { groupId, ids } = idsInOneGroup(groups, tenant, 1);
  const jobId = ids[0]!;
  const slotsAfter = (ms: number): number[] => {
    const first = Math.floor(ms / QUIET_PERIOD_MS) * QUIET_PERIOD_MS + QUIET_PERIOD_MS;
    return Array.from({ length: QUIET_SLOTS }, (_, i) => first + i * QUIET_PERIOD_MS);
  };
  return {
    tenant,
    groupId,
    jobIds: ids,
    schedule: `*/${QUIET_PERIOD_MS / 1000} * * * * *`,
    beforeSlotMs,
    timeline(createdMs) {
      // The slot after the job's first one: the group has fired once, settled and quiesced.
      const slotMs = slotsAfter(createdMs)[1]!;
      return {
        faultAtMs: slotMs - beforeSlotMs,
        slots: (faultMs) =>
          new Map(slotsAfter(faultMs).map((s) => [fireId(tenant, jobId, s), s] as const)),
        resumeOf(r, faultMs) {
          const first = slotsAfter(faultMs)[0]!;
          return r[0] === fireId(tenant, jobId, first) ? r[1] - first : undefined;
        },
      };
    },
  };
}

/** The receipts of the sink process, read a slice at a time (the bench polls it often). */
class SinkLog {
  readonly receipts: Receipt[] = [];
  private readonly seen = new Set<string>();

  constructor(readonly origin: string) {}

  async poll(): Promise<void> {
    const res = await fetch(`${this.origin}/receipts?from=${this.receipts.length}`);
    for (const r of (await res.json()) as Receipt[]) {
      this.receipts.push(r);
      this.seen.add(r[0]);
    }
  }

  has(fireId: string): boolean {
    return this.seen.has(fireId);
  }
}

async function runTrial(
  spec: TrialSpec,
  opts: FailoverOptions,
  log: (line: string) => void,
): Promise<FailoverTrial> {
  const workload =
    // Only quiet trials have an offset before their slot.
    spec.beforeSlotMs === undefined
      ? busyWorkload(opts.groups, opts.jobs)
      : quietWorkload(opts.groups, spec.beforeSlotMs);
  let sink: Awaited<ReturnType<typeof startSinkProcess>> | undefined;
  let pc: ProxiedCluster | undefined;
  let clients: ApiClient[] = [];
  try {
    sink = await startSinkProcess(SINK_SOURCE);
    pc = await ProxiedCluster.create({ groups: opts.groups });
    pc.cluster.startAll();
    await pc.cluster.waitReady(60_000);
    clients = await apiClients(pc.cluster);
    await createJobs(pc.cluster, clients, workload, sink.origin, opts.groups);
    const createdMs = Date.now();
    return await measure(spec, pc, new SinkLog(sink.origin), workload, createdMs, log);
  } catch (err) {
    return failedTrial(spec, workload.groupId, describeError(err));
  } finally {
    for (const c of clients) c.close();
    await pc?.cleanup();
    sink?.child.kill();
  }
}

async function createJobs(
  cluster: ProcCluster,
  clients: readonly ApiClient[],
  workload: Workload,
  sinkOrigin: string,
  groups: number,
): Promise<void> {
  await clients[0]!.call('TenantService', 'CreateTenant', {
    tenantId: workload.tenant,
    signingSecret: TEST_SECRET,
  });
  // Each group led by its preferred node, so that no leader handover lands in the measure.
  await settleLeaders(cluster, groups);
  const jobs = workload.jobIds.map((jobId) => ({
    jobId,
    spec: {
      tenant: workload.tenant,
      schedule: workload.schedule,
      target: { url: `${sinkOrigin}/hook` },
      misfire: { policy: 'MISFIRE_POLICY_FIRE_ALL' },
    },
  }));
  for (let i = 0; i < jobs.length; i += 1000)
    await createBatch(clients[(i / 1000) % clients.length]!, jobs.slice(i, i + 1000));
}

/** What a fault did, as `measure` observes it. */
interface Observed {
  /** How long putting the fault in force took (the isolation's proxy calls; ~0 for signals). */
  readonly applyMs: number;
  readonly elected: (Leader & { atMs: number }) | undefined;
  readonly resumeMs: number;
  /** When the fault was lifted (the heal, SIGCONT; a kill is never lifted). */
  readonly undoneMs: number;
}

async function measure(
  spec: TrialSpec,
  pc: ProxiedCluster,
  sink: SinkLog,
  workload: Workload,
  createdMs: number,
  log: (line: string) => void,
): Promise<FailoverTrial> {
  const { groupId } = workload;
  const timeline = workload.timeline(createdMs);
  const before = await watchLeader(pc.cluster.nodes, groupId, timeline.faultAtMs);
  if (!before.leader) throw new Error(`group ${groupId} has no leader before the fault`);
  const old = before.leader;
  const faultMs = Date.now();
  const trace =
    process.env['BENCH_TRACE'] === '1'
      ? startTrace(pc.cluster, groupId, sink, faultMs, log)
      : undefined;
  const slots = timeline.slots(faultMs);
  let observed: Observed;
  try {
    observed = await observeFault({
      fault: spec.fault,
      pc,
      sink,
      groupId,
      old,
      timeline,
      slots,
      faultMs,
    });
  } finally {
    await trace?.stop();
  }
  const { elected } = observed;
  const stages = elected ? await stagesOf(elected, groupId, faultMs) : NO_STAGES;
  return {
    ...spec,
    groupId,
    oldLeader: old.node.id,
    oldTerm: old.term,
    quiescedBefore: before.quiesced,
    applyMs: observed.applyMs,
    newLeader: elected?.node.id ?? '',
    newTerm: elected?.term ?? Number.NaN,
    electedMs: elected ? elected.atMs - faultMs : Infinity,
    resumeMs: observed.resumeMs,
    ...slotFigures(sink.receipts, slots, faultMs),
    ...leaseFigures(sink.receipts, old.term, spec.fault === 'kill' ? Infinity : observed.undoneMs),
    received: sink.receipts.length,
    stages,
    error: undefined,
  };
}

/** The new leader's leadership timeline for the group, as stages after the fault. */
async function stagesOf(leader: Leader, groupId: number, faultMs: number): Promise<FailoverStages> {
  const st = await leader.node.status(STATUS_DEADLINE_MS).catch(() => undefined);
  const g = st?.groups.find((x) => x.groupId === groupId);
  if (!g || g.ledTerm !== leader.term) return NO_STAGES;
  const at = (ms: number): number => (ms > 0 ? ms : Number.NaN);
  return {
    detectionMs: at(g.campaignAtMs) - faultMs,
    electionMs: at(g.electedAtMs) - at(g.campaignAtMs),
    caughtUpMs: at(g.caughtUpAtMs) - at(g.electedAtMs),
    leaseMs: at(g.leaseAtMs) - at(g.electedAtMs),
    firstHandOutMs: at(g.firstHandOutAtMs) - at(g.electedAtMs),
  };
}

/** The stages in one line: each after the one before, the last three from the election. */
export function stagesText(s: FailoverStages): string {
  const f = (ms: number): string => (Number.isNaN(ms) ? '?' : fmt(Math.round(ms)));
  return (
    `detection ${f(s.detectionMs)}, election ${f(s.electionMs)}, then no-op applied +${f(s.caughtUpMs)}, ` +
    `lease +${f(s.leaseMs)}, first hand-out +${f(s.firstHandOutMs)} ms`
  );
}

/**
 * Puts the fault on the old leader now, waits for a new leader and for the resume, lifts the
 * fault, then waits for the slots (and at least 5 s after the lift, for stale sends to show).
 */
async function observeFault({
  fault,
  pc,
  sink,
  groupId,
  old,
  timeline,
  slots,
  faultMs,
}: {
  fault: Fault;
  pc: ProxiedCluster;
  sink: SinkLog;
  groupId: number;
  old: Leader;
  timeline: Timeline;
  slots: ReadonlyMap<string, number>;
  faultMs: number;
}): Promise<Observed> {
  const undo = await applyFault(fault, pc, old.node);
  const applyMs = Date.now() - faultMs;
  // The old leader is left out: a paused one would hold each poll for its whole deadline, and an
  // isolated one may still say it leads, in its old term.
  const others = pc.cluster.nodes.filter((n) => n !== old.node);
  const [elected, resumeMs] = await Promise.all([
    waitNewLeader(others, groupId, old.term, faultMs),
    waitResume(sink, (r) => timeline.resumeOf(r, faultMs, old.term), faultMs),
  ]);
  await undo();
  const undoneMs = Date.now();
  let lastSlotMs = 0;
  for (const s of slots.values()) lastSlotMs = Math.max(lastSlotMs, s);
  await awaitSlots(sink, slots, Math.max(lastSlotMs + 1500, undoneMs + AFTER_UNDO_MS));
  return { applyMs, elected, resumeMs, undoneMs };
}

/**
 * The node among `nodes` that says it leads `groupId` in a term above `aboveTerm` (the highest
 * such term if several do), all asked at once.
 */
async function leaderOf(
  nodes: readonly ProcNode[],
  groupId: number,
  aboveTerm = 0,
): Promise<Leader | undefined> {
  const views = await Promise.all(
    nodes.map(async (node): Promise<Leader | undefined> => {
      const st = await node.status(STATUS_DEADLINE_MS).catch(() => undefined);
      const g = st?.groups.find((x) => x.groupId === groupId);
      return g?.role === 'leader' && g.term > aboveTerm
        ? { node, term: g.term, quiesced: g.quiesced }
        : undefined;
    }),
  );
  let best: Leader | undefined;
  for (const v of views) if (v && (!best || v.term > best.term)) best = v;
  return best;
}

/**
 * Follows the group's leader over the 1.5 s before `untilMs` and returns it as last seen, with
 * whether its replica reported quiesced meanwhile (a quiet group's fault 6 s before a slot is
 * meant to find it so).
 */
async function watchLeader(
  nodes: readonly ProcNode[],
  groupId: number,
  untilMs: number,
): Promise<{ leader: Leader | undefined; quiesced: boolean }> {
  await sleep(untilMs - WATCH_BEFORE_FAULT_MS - Date.now());
  let leader: Leader | undefined;
  let quiesced = false;
  do {
    leader = (await leaderOf(nodes, groupId)) ?? leader;
    quiesced ||= leader?.quiesced === true;
    await sleep(Math.min(100, untilMs - Date.now()));
  } while (Date.now() < untilMs);
  return { leader, quiesced };
}

/** Puts the fault on `node` and returns what lifts it (nothing, for a kill). */
async function applyFault(
  fault: Fault,
  pc: ProxiedCluster,
  node: ProcNode,
): Promise<() => Promise<void>> {
  switch (fault) {
    case 'kill':
      await node.kill9();
      return () => Promise.resolve();
    case 'partition':
      await pc.net.isolate(node.id, 'blackhole');
      return () => pc.net.heal();
    case 'pause':
      node.pause();
      return () => {
        node.resume();
        return Promise.resolve();
      };
  }
}

async function waitNewLeader(
  nodes: readonly ProcNode[],
  groupId: number,
  oldTerm: number,
  faultMs: number,
): Promise<(Leader & { atMs: number }) | undefined> {
  while (Date.now() < faultMs + GIVE_UP_MS) {
    const leader = await leaderOf(nodes, groupId, oldTerm);
    if (leader) return { ...leader, atMs: Date.now() };
    await sleep(POLL_MS);
  }
  return undefined;
}

/** Reads the sink until a receipt gives the resume figure (Infinity: none within 60 s). */
async function waitResume(
  sink: SinkLog,
  resumeOf: (r: Receipt) => number | undefined,
  faultMs: number,
): Promise<number> {
  let scanned = 0;
  while (Date.now() < faultMs + GIVE_UP_MS) {
    await sink.poll();
    for (; scanned < sink.receipts.length; scanned++) {
      const figure = resumeOf(sink.receipts[scanned]!);
      if (figure !== undefined) return figure;
    }
    await sleep(50);
  }
  return Infinity;
}

/**
 * Waits, from `notBeforeMs` on, until every slot reached the sink; gives up once none arrived for
 * 60 s (or 3 min after the wait began): what is missing then is lost.
 */
async function awaitSlots(
  sink: SinkLog,
  slots: ReadonlyMap<string, number>,
  notBeforeMs: number,
): Promise<void> {
  await sleep(notBeforeMs - Date.now());
  let got = -1;
  let progressMs = Date.now();
  for (;;) {
    await sink.poll();
    let now = 0;
    for (const id of slots.keys()) if (sink.has(id)) now++;
    if (now > got) progressMs = Date.now();
    got = now;
    if (got === slots.size) return;
    if (Date.now() - progressMs > GIVE_UP_MS || Date.now() > notBeforeMs + 180_000) return;
    await sleep(1000);
  }
}

function slotFigures(
  receipts: readonly Receipt[],
  slots: ReadonlyMap<string, number>,
  faultMs: number,
): Pick<
  FailoverTrial,
  | 'expectedSlots'
  | 'lostSlots'
  | 'lateSlots'
  | 'lateBeforeFault'
  | 'lagP50BeforeFaultMs'
  | 'duplicates'
> {
  const firstAt = new Map<string, number>();
  let duplicates = 0;
  for (const [id, atMs] of receipts) {
    if (!slots.has(id)) continue;
    if (firstAt.has(id)) duplicates++;
    else firstAt.set(id, atMs);
  }
  let late = 0;
  const lagsBefore: number[] = [];
  for (const [id, atMs] of firstAt) {
    const slotMs = slots.get(id)!;
    // A slot due just before the fault may still have been waiting for its send when it came.
    if (slotMs < faultMs - LATE_MS) lagsBefore.push(atMs - slotMs);
    else if (atMs - slotMs > LATE_MS) late++;
  }
  lagsBefore.sort((a, b) => a - b);
  return {
    expectedSlots: slots.size,
    lostSlots: slots.size - firstAt.size,
    lateSlots: late,
    lateBeforeFault: lagsBefore.filter((lag) => lag > LATE_MS).length,
    lagP50BeforeFaultMs: percentile(lagsBefore, 50),
    duplicates,
  };
}

/**
 * The requests of the old term or older: those received after `undoneMs` (SIGCONT or the heal),
 * and, at any time, those for a slot whose request from a newer term had already arrived, which
 * only a sender that kept acting as leader after losing its lease can produce.
 */
function leaseFigures(
  receipts: readonly Receipt[],
  oldTerm: number,
  undoneMs: number,
): Pick<FailoverTrial, 'staleAfterUndo' | 'leaseViolations'> {
  const sentByNewer = new Set<string>();
  let stale = 0;
  let violations = 0;
  for (const [id, atMs, token] of receipts) {
    if (termOfToken(token) > oldTerm) {
      sentByNewer.add(id);
      continue;
    }
    if (atMs >= undoneMs) stale++;
    if (sentByNewer.has(id)) violations++;
  }
  return { staleAfterUndo: stale, leaseViolations: violations };
}

/** BENCH_TRACE=1: every second from the fault on, each node's view of the group. */
function startTrace(
  cluster: ProcCluster,
  groupId: number,
  sink: SinkLog,
  faultMs: number,
  log: (line: string) => void,
): { stop(): Promise<void> } {
  let tracing = true;
  const loop = (async () => {
    while (tracing) {
      await sleep(1000);
      const views = await Promise.all(
        cluster.nodes
          .filter((n) => n.running && !n.paused)
          .map(async (n) => {
            const st = await n.status(STATUS_DEADLINE_MS).catch(() => undefined);
            const g = st?.groups.find((x) => x.groupId === groupId);
            return st && g
              ? `${n.id} ${g.role} t${g.term} c${g.commit} a${g.applied} q${g.quiesced} proposed ${st.schedulerProposed} delivered ${st.schedulerDelivered} queued ${st.deliveryQueued} inflight ${st.deliveryInflight}`
              : `${n.id} ?`;
          }),
      );
      log(
        `    t=${fmt(Date.now() - faultMs)} ms receipts ${fmt(sink.receipts.length)} | ${views.join(' | ')}`,
      );
    }
  })();
  return {
    stop: async () => {
      tracing = false;
      await loop;
    },
  };
}

function failedTrial(spec: TrialSpec, groupId: number, error: string): FailoverTrial {
  return {
    ...spec,
    groupId,
    oldLeader: '',
    oldTerm: Number.NaN,
    quiescedBefore: false,
    applyMs: Number.NaN,
    newLeader: '',
    newTerm: Number.NaN,
    electedMs: Number.NaN,
    resumeMs: Number.NaN,
    expectedSlots: 0,
    lostSlots: 0,
    lateSlots: 0,
    lateBeforeFault: 0,
    lagP50BeforeFaultMs: Number.NaN,
    duplicates: 0,
    staleAfterUndo: 0,
    leaseViolations: 0,
    received: 0,
    stages: NO_STAGES,
    error,
  };
}

function describeError(err: unknown): string {
  if (err instanceof ApiCallError) return `${err.code} ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}

/** A duration, or `never` for a wait that gave up. */
export const msText = (ms: number): string => (Number.isFinite(ms) ? `${fmt(ms)} ms` : 'never');

/** One line per trial, printed as it finishes. */
function describeTrial(t: FailoverTrial, trials: number, jobs: number): string {
  const head =
    `  ${t.kind} × ${t.fault} ${t.trial}/${trials}` +
    (t.beforeSlotMs === undefined
      ? ''
      : ` (${fmt(t.beforeSlotMs / 1000)} s before a slot, leader quiesced: ${t.quiescedBefore ? 'yes' : 'no'})`);
  if (t.error !== undefined) return `${head}: FAILED: ${t.error}`;
  const what =
    t.kind === 'busy'
      ? `${fmt(jobs)} every-second jobs in group ${t.groupId}`
      : `1 job every 10 s in group ${t.groupId}`;
  const resume =
    t.kind === 'busy'
      ? `fires again in a newer term after ${msText(t.resumeMs)}`
      : `first slot after the fault lags ${msText(t.resumeMs)}`;
  const undo = t.fault === 'pause' ? 'SIGCONT' : t.fault === 'partition' ? 'the heal' : undefined;
  return (
    `${head}: ${what}; ${FAULT_TEXT[t.fault]} ${t.oldLeader} (term ${t.oldTerm})` +
    (t.fault === 'partition' ? ` (${fmt(t.applyMs)} ms to apply)` : '') +
    `; ${t.newLeader || 'no node'} leads${t.newLeader ? ` in term ${t.newTerm}` : ''} after ${msText(t.electedMs)}; ${resume}; ` +
    `${fmt(t.expectedSlots)} slots: lost ${fmt(t.lostSlots)}, late > 1 s ${fmt(t.lateSlots)}` +
    (t.kind === 'busy' ? ` (${beforeFaultText(t)})` : '') +
    `, duplicates ${t.duplicates}` +
    (undo === undefined ? '' : `; old-term requests after ${undo} ${t.staleAfterUndo}`) +
    `; lease violations ${t.leaseViolations}; the sink received ${fmt(t.received)} requests; ` +
    `new leader: ${stagesText(t.stages)}`
  );
}

/** A busy group's slots before the fault: how the machine kept up before anything failed. */
function beforeFaultText(t: FailoverTrial): string {
  // No lag at all: not one of those slots arrived (they count as lost).
  if (Number.isNaN(t.lagP50BeforeFaultMs)) return 'before the fault: none received';
  return `before the fault ${fmt(t.lateBeforeFault)}, lag p50 ${fmt(t.lagP50BeforeFaultMs)} ms`;
}

function summarize(trials: readonly FailoverTrial[]): FailoverSummary[] {
  const out: FailoverSummary[] = [];
  for (const kind of GROUP_KINDS)
    for (const fault of FAULTS) {
      const all = trials.filter((t) => t.kind === kind && t.fault === fault);
      const done = all.filter((t) => t.error === undefined);
      const sorted = (f: (t: FailoverTrial) => number): number[] =>
        done.map(f).sort((a, b) => a - b);
      const resume = sorted((t) => t.resumeMs);
      const elected = sorted((t) => t.electedMs);
      const sum = (f: (t: FailoverTrial) => number): number => done.reduce((n, t) => n + f(t), 0);
      out.push({
        kind,
        fault,
        completed: done.length,
        failed: all.length - done.length,
        resumeP50Ms: median(resume),
        resumeWorstMs: resume.at(-1) ?? Number.NaN,
        electedP50Ms: median(elected),
        electedWorstMs: elected.at(-1) ?? Number.NaN,
        expectedSlots: sum((t) => t.expectedSlots),
        lostSlots: sum((t) => t.lostSlots),
        lateSlots: sum((t) => t.lateSlots),
        leaseViolations: sum((t) => t.leaseViolations),
        quiescedBefore: done.filter((t) => t.quiescedBefore).length,
        stagesP50: stageMedians(done),
      });
    }
  return out;
}

/** Each stage's median over the trials that saw it. */
function stageMedians(trials: readonly FailoverTrial[]): FailoverStages {
  const of = (k: keyof FailoverStages): number =>
    median(
      trials
        .map((t) => t.stages[k])
        .filter((x) => !Number.isNaN(x))
        .sort((a, b) => a - b),
    );
  return {
    detectionMs: of('detectionMs'),
    electionMs: of('electionMs'),
    caughtUpMs: of('caughtUpMs'),
    leaseMs: of('leaseMs'),
    firstHandOutMs: of('firstHandOutMs'),
  };
}

/** The middle value of an ascending list, or the mean of the two middle ones; NaN when empty. */
function median(sorted: readonly number[]): number {
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** What `npm run bench` reports as functional failures of one trial. */
export function trialProblems(t: FailoverTrial): string[] {
  const which = `failover (${t.kind} × ${t.fault}, trial ${t.trial})`;
  if (t.error !== undefined) return [`${which}: ${t.error}`];
  const problems: string[] = [];
  if (t.lostSlots > 0)
    problems.push(
      `${which}: ${fmt(t.lostSlots)} of ${fmt(t.expectedSlots)} slots never reached the sink`,
    );
  if (t.leaseViolations > 0)
    problems.push(
      `${which}: lease violation: ${t.leaseViolations} requests carried the old leader's term ${t.oldTerm} for slots a newer term had already sent`,
    );
  return problems;
}
