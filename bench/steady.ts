/**
 * A sustained load, for `npm run bench`: `rate` fires per second, every second, for `minutes`
 * whole minutes, through a real 3-process cluster, delivered to a recording sink in a process of
 * its own.
 *
 * The jobs are spread over the minute as real cron jobs are, in several zones: `rate × 60` cron
 * jobs with a seconds field, job i `${i % 60} * * * * *` (so `rate` jobs are due at every whole
 * second), their `timezone` cycling over ZONES (every zone's offset is whole minutes, so a job's
 * slot falls on the same second of the minute in all of them), registered through the public
 * CreateJobs API. Once every job is applied, one unmeasured minute runs (the nodes' delivery
 * path compiled by V8, the sink's connections open), then `minutes` whole minutes are measured.
 *
 * The sink keeps each receipt compactly (RECORDING_SINK_SOURCE): per slot second, one bit per job
 * (a fire id seen twice is a duplicate) and a histogram of lags (receipt − slot,
 * `tickraft-scheduled-for`). Per measured minute: receipts, duplicates, lag p50 / p99 / max; lost
 * = every job's slot in every measured minute (jobs × minutes exactly) not received 30 s after
 * the window ended. CPU per fire: each node's process CPU over the window (from /proc) ÷ fires
 * received; the sink's the same way, per request. Figures only; a fire lost or doubled, or one
 * the sink did not expect, is a functional problem listed in `problems`.
 */
import type { ChildProcess } from 'node:child_process';
import { TEST_SECRET } from '../test/helpers/webhook-sink.js';
import { ProcCluster, sleep, type ClusterSecurity } from '../test/helpers/cluster.js';
import type { ApiClient } from '../src/api/client.js';
import { apiClients, describeLeaders, settleLeaders, waitApplied } from './bench-cluster.js';
import { describeMachine, fmt, machineContext, met, type Row } from './figures.js';
import { processCpuMs } from './proc-cpu.js';
import { createBatch } from './registration.js';
import { startSinkProcess } from './sink-process.js';
import { BareSteadySenders } from './steady-bare.js';
import { DEFAULT_WEBHOOK_CONNECTIONS } from '../src/config/node-config.js';

/**
 * The recording sink (CommonJS, `node -e`). Fire ids are `<tenant>/<prefix>-<index>:<slot ms>`;
 * `/config?rule=&jobs=&start=&seconds=` starts a fresh record for jobs 0…jobs-1 and says which
 * slot each job may have: `minute` (job i's slot is at second i % 60 of a minute), `spread` (job
 * i's slot is start + 1000 × floor(i × seconds / jobs)) or `any`. A receipt that breaks the rule
 * (or whose id cannot be read) is a stray. Per slot second it keeps one bit per job, receipts,
 * duplicates, a lag histogram (1 ms buckets up to 1 s, then 10 ms up to 121 s, then one bucket),
 * the exact largest lag and the first and last receipt. `/summary?from=&to=&step=`: per window of
 * `step` ms of slots in [from, to), what those seconds received, with lag percentiles; `/count`:
 * every receipt, a poll that costs the sink nothing to speak of while it is busy. Nothing is
 * sorted while receipts arrive: a sort of a minute's lags would stall the sink for tens of ms,
 * which the lags themselves would then show.
 */
export const RECORDING_SINK_SOURCE = `
const http = require('node:http');
const FINE = 1000, STEP = 10, BUCKETS = FINE + 12000 + 1;
let cfg = { rule: 'any', jobs: 1, start: 0, seconds: 60 };
let seconds = new Map(), total = 0, stray = 0, strayExamples = [];
function bucketOf(lag) {
  if (lag < FINE) return lag < 0 ? 0 : lag;
  return Math.min(BUCKETS - 1, FINE + Math.floor((lag - FINE) / STEP));
}
function lagOf(b) { return b < FINE ? b : FINE + (b - FINE) * STEP; }
function strayOf(why) { stray++; if (strayExamples.length < 5) strayExamples.push(why); }
function record(id, scheduledFor, now) {
  const slotMs = Date.parse(scheduledFor);
  const colon = typeof id === 'string' ? id.lastIndexOf(':') : -1;
  if (colon < 0 || !Number.isFinite(slotMs) || slotMs % 1000 !== 0 || Number(id.slice(colon + 1)) !== slotMs)
    return strayOf('unreadable fire id or slot: ' + id + ' ' + scheduledFor);
  const index = Number(id.slice(id.lastIndexOf('-', colon) + 1, colon));
  if (!Number.isInteger(index) || index < 0 || index >= cfg.jobs) return strayOf('unknown job: ' + id);
  const expected = cfg.rule === 'any' ||
    (cfg.rule === 'minute' ? (slotMs / 1000) % 60 === index % 60
      : slotMs === cfg.start + 1000 * Math.floor((index * cfg.seconds) / cfg.jobs));
  if (!expected) return strayOf('slot not of this job: ' + id);
  let s = seconds.get(slotMs / 1000);
  if (!s) {
    s = { bits: new Uint8Array((cfg.jobs >> 3) + 1), hist: new Uint32Array(BUCKETS), count: 0,
      dup: 0, early: 0, max: -1e15, first: 0, last: 0 };
    seconds.set(slotMs / 1000, s);
  }
  total++;
  s.count++;
  const bit = 1 << (index & 7);
  if (s.bits[index >> 3] & bit) s.dup++; else s.bits[index >> 3] |= bit;
  const lag = now - slotMs;
  if (lag < 0) s.early++;
  s.hist[bucketOf(lag)]++;
  if (lag > s.max) s.max = lag;
  if (s.first === 0) s.first = now;
  if (now > s.last) s.last = now;
}
function percentileOf(hist, count, p) {
  if (count === 0) return null;
  const rank = Math.min(count - 1, Math.floor((p / 100) * count));
  for (let b = 0, seen = 0; b < BUCKETS; b++) { seen += hist[b]; if (seen > rank) return lagOf(b); }
  return null;
}
function summary(from, to, step) {
  const windows = [];
  for (let w = from; w < to; w += step) {
    const hist = new Uint32Array(BUCKETS);
    let count = 0, dup = 0, early = 0, max = -1e15, first = 0, last = 0;
    for (let t = w; t < Math.min(to, w + step); t += 1000) {
      const s = seconds.get(t / 1000);
      if (!s || s.count === 0) continue;
      count += s.count; dup += s.dup; early += s.early; max = Math.max(max, s.max);
      if (first === 0 || s.first < first) first = s.first;
      last = Math.max(last, s.last);
      for (let b = 0; b < BUCKETS; b++) hist[b] += s.hist[b];
    }
    windows.push({ fromMs: w, count, dup, early, p50: percentileOf(hist, count, 50),
      p99: percentileOf(hist, count, 99), max: count > 0 ? max : null, first, last });
  }
  return { windows, total, stray, strayExamples };
}
const server = http.createServer((req, res) => {
  if (req.url === '/count') { res.end(String(total + stray)); return; }
  if (req.url.startsWith('/summary?')) {
    const q = new URL(req.url, 'http://sink').searchParams;
    res.end(JSON.stringify(summary(Number(q.get('from')), Number(q.get('to')), Number(q.get('step')))));
    return;
  }
  if (req.url.startsWith('/config?')) {
    const q = new URL(req.url, 'http://sink').searchParams;
    cfg = { rule: q.get('rule'), jobs: Number(q.get('jobs')), start: Number(q.get('start')),
      seconds: Number(q.get('seconds')) };
    seconds = new Map(); total = 0; stray = 0; strayExamples = [];
    res.end('{}');
    return;
  }
  req.resume();
  req.on('end', () => {
    record(req.headers['idempotency-key'], req.headers['tickraft-scheduled-for'], Date.now());
    res.writeHead(200, { 'content-length': '2' });
    res.end('ok');
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;

/** Which slot each job of a record may have (RECORDING_SINK_SOURCE). */
export type SinkRule =
  | { readonly rule: 'minute'; readonly jobs: number }
  | {
      readonly rule: 'spread';
      readonly jobs: number;
      readonly startMs: number;
      readonly seconds: number;
    }
  | { readonly rule: 'any'; readonly jobs: number };

/** What the sink received for the slots of one window. */
export interface LagWindow {
  /** The window's first slot. */
  readonly fromMs: number;
  /** Receipts, duplicates included. */
  readonly received: number;
  /** Fires received at least once. */
  readonly distinct: number;
  readonly duplicates: number;
  /** Receipts before their slot. */
  readonly early: number;
  /** 1 ms resolution up to 1 s, 10 ms above; NaN when nothing arrived. */
  readonly lagP50Ms: number;
  readonly lagP99Ms: number;
  /** Exact. */
  readonly lagMaxMs: number;
  /** Wall time of the window's first and last receipt (0: none). */
  readonly firstReceiptMs: number;
  readonly lastReceiptMs: number;
}

export interface SinkSummary {
  readonly windows: LagWindow[];
  /** Every receipt since the last configure(), strays included. */
  readonly total: number;
  /** Receipts the rule did not expect, with the first few ids. */
  readonly stray: number;
  readonly strayExamples: string[];
}

interface RawWindow {
  fromMs: number;
  count: number;
  dup: number;
  early: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
  first: number;
  last: number;
}

/** The recording sink in a process of its own (its CPU apart from the senders'). */
export class RecordingSink {
  private constructor(
    readonly origin: string,
    private readonly child: ChildProcess,
  ) {}

  static async start(): Promise<RecordingSink> {
    const { child, origin } = await startSinkProcess(RECORDING_SINK_SOURCE);
    return new RecordingSink(origin, child);
  }

  get pid(): number {
    return this.child.pid ?? 0;
  }

  /** The sink process's CPU so far, ms (/proc). */
  cpuMs(): number {
    return processCpuMs(this.pid);
  }

  /** A fresh record, for jobs 0…jobs-1 under `r`. */
  async configure(r: SinkRule): Promise<void> {
    const q = new URLSearchParams({
      rule: r.rule,
      jobs: String(r.jobs),
      start: String(r.rule === 'spread' ? r.startMs : 0),
      seconds: String(r.rule === 'spread' ? r.seconds : 60),
    });
    await (await fetch(`${this.origin}/config?${q.toString()}`)).text();
  }

  async count(): Promise<number> {
    return Number(await (await fetch(`${this.origin}/count`)).text());
  }

  /** Windows of `stepMs` of slots in [fromMs, toMs). */
  async summary(fromMs: number, toMs: number, stepMs = toMs - fromMs): Promise<SinkSummary> {
    const res = await fetch(`${this.origin}/summary?from=${fromMs}&to=${toMs}&step=${stepMs}`);
    const raw = (await res.json()) as {
      windows: RawWindow[];
      total: number;
      stray: number;
      strayExamples: string[];
    };
    return {
      windows: raw.windows.map((w) => ({
        fromMs: w.fromMs,
        received: w.count,
        distinct: w.count - w.dup,
        duplicates: w.dup,
        early: w.early,
        lagP50Ms: w.p50 ?? Number.NaN,
        lagP99Ms: w.p99 ?? Number.NaN,
        lagMaxMs: w.max ?? Number.NaN,
        firstReceiptMs: w.first,
        lastReceiptMs: w.last,
      })),
      total: raw.total,
      stray: raw.stray,
      strayExamples: raw.strayExamples,
    };
  }

  close(): void {
    this.child.kill();
  }
}

/** The highest term of each group any node reports: a group whose term moved changed leader. */
export async function groupTerms(cluster: ProcCluster): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for (const n of cluster.nodes) {
    const st = await n.status(5000);
    for (const g of st.groups) out.set(g.groupId, Math.max(out.get(g.groupId) ?? 0, g.term));
  }
  return out;
}

export function termsChanged(before: Map<number, number>, after: Map<number, number>): number {
  return [...after].filter(([g, term]) => (before.get(g) ?? 0) !== term).length;
}

/** Sleeps until wall time `t` (to within a few ms). */
export async function until(t: number): Promise<void> {
  for (let left = t - Date.now(); left > 0; left = t - Date.now())
    await sleep(left > 50 ? left - 20 : 1);
}

/** "p50 12 / p99 48 / max 130 ms". */
export function lagText(w: Pick<LagWindow, 'lagP50Ms' | 'lagP99Ms' | 'lagMaxMs'>): string {
  return `lag p50 ${fmt(w.lagP50Ms)} / p99 ${fmt(w.lagP99Ms)} / max ${fmt(w.lagMaxMs)} ms`;
}

/** Zones the jobs cycle over: whole-hour, half-hour and DST offsets, both hemispheres. */
export const ZONES = [
  'UTC',
  'America/New_York',
  'Europe/Berlin',
  'Asia/Kolkata',
  'Australia/Adelaide',
] as const;

const TENANT = 'acme';
/** Receipts of a minute still arriving this long after the window are counted; later ones lost. */
const LATE_MS = 30_000;
/** The per-minute line is printed this long after its minute, once its fires are in. */
const LINE_AFTER_MS = 5000;
/** The lag target printed next to the figures. */
export const STEADY_P99_TARGET_MS = 50;
/** The bare reference: seconds sent before its measure (connections opened), then measured. */
const BARE_WARMUP_SECONDS = 5;
const BARE_MEASURED_SECONDS = 60;

export interface SteadyOptions {
  /** Fires per second. @default 3000 */
  readonly rate?: number;
  /** Measured minutes. @default 10 */
  readonly minutes?: number;
  /** @default 18 */
  readonly groups?: number;
  /** Authentication and TLS of the cluster (test/helpers/cluster.ts). @default 'auth' */
  readonly security?: ClusterSecurity;
  /** Extra `tickraft serve` flags. */
  readonly nodeFlags?: readonly string[];
  /** Progress lines (default: console.log). */
  readonly log?: (line: string) => void;
}

export interface SteadyMinute {
  /** 1-based, within the measure. */
  readonly minute: number;
  readonly fromMs: number;
  /** Every job once. */
  readonly expected: number;
  readonly received: number;
  readonly duplicates: number;
  /** Expected fires not received 30 s after the window. */
  readonly lost: number;
  readonly lagP50Ms: number;
  readonly lagP99Ms: number;
  readonly lagMaxMs: number;
}

export interface NodeCpu {
  readonly nodeId: string;
  readonly cpuMs: number;
  readonly cpuUsPerFire: number;
}

export interface SteadyResult {
  readonly rate: number;
  readonly minutes: number;
  readonly groups: number;
  readonly jobs: number;
  readonly zones: readonly string[];
  readonly registration: {
    readonly created: number;
    readonly failedCalls: number;
    /** Calls sent again after a group had no leader or lost it. */
    readonly retriedCalls: number;
    readonly elapsedMs: number;
    readonly jobsPerSec: number;
  };
  /** The first measured slot (a whole minute). */
  readonly windowStartMs: number;
  readonly perMinute: readonly SteadyMinute[];
  /** jobs × minutes. */
  readonly expected: number;
  readonly received: number;
  readonly duplicates: number;
  readonly lost: number;
  /** Receipts of slots no job has (see RECORDING_SINK_SOURCE), over the whole run. */
  readonly stray: number;
  readonly lagP50Ms: number;
  readonly lagP99Ms: number;
  readonly lagMaxMs: number;
  /** Minutes whose p99 lag passed STEADY_P99_TARGET_MS. */
  readonly minutesOverTarget: number;
  readonly cpu: {
    readonly nodes: readonly NodeCpu[];
    /** The three nodes' CPU ÷ fires received. */
    readonly clusterUsPerFire: number;
    readonly sinkUsPerRequest: number;
  };
  /** Groups whose term changed during the measure. */
  readonly leaderChanges: number;
  /**
   * The same fires for one minute from 3 bare undici processes (a third of each second's each,
   * as many connections as a node has), to the same sink, before the jobs were registered.
   */
  readonly bare: Pick<
    LagWindow,
    'received' | 'duplicates' | 'lagP50Ms' | 'lagP99Ms' | 'lagMaxMs'
  > & {
    readonly expected: number;
    /** The 3 processes' CPU ÷ requests. */
    readonly cpuUsPerRequest: number;
    readonly sinkUsPerRequest: number;
  };
  /** Each node's RSS and V8 heap used at the window's end (no forced collection). */
  readonly memoryAfter: readonly {
    readonly nodeId: string;
    readonly rssBytes: number;
    readonly heapUsedBytes: number;
  }[];
  /** V8 heap each finished run holds per replica, after full collections (bytes). */
  readonly heapPerRunReplica: number;
  /** GC pauses over the measured window, the worst node's p99 and max. */
  readonly gc: { readonly p99Ms: number; readonly maxMs: number };
  readonly loadBefore: readonly number[];
  readonly loadAfter: readonly number[];
  /** Functional problems: a registration call failed, a fire lost, doubled or unexpected. */
  readonly problems: string[];
}

/**
 * Creates `count` jobs through CreateJobs, batches of 1000, 8 calls in flight round-robin over
 * the nodes, each call as registration.ts's createBatch sends it (again after a leader change;
 * the jobs a failed call did create come back as duplicates of their request ids).
 */
async function register(
  clients: readonly ApiClient[],
  count: number,
  jobOf: (i: number) => Record<string, unknown>,
): Promise<{
  created: number;
  failedCalls: number;
  retriedCalls: number;
  slowestCallMs: number;
  errors: string[];
}> {
  const BATCH = 1000;
  let next = 0;
  let created = 0;
  let failedCalls = 0;
  let retriedCalls = 0;
  let slowestCallMs = 0;
  const errors: string[] = [];
  const worker = async (w: number): Promise<void> => {
    for (let calls = 0; next < count; calls++) {
      const from = next;
      const to = Math.min(count, from + BATCH);
      next = to;
      const jobs: Record<string, unknown>[] = [];
      for (let i = from; i < to; i++) jobs.push(jobOf(i));
      const client = clients[(w + calls) % clients.length]!;
      const t0 = performance.now();
      try {
        const r = await createBatch(client, jobs);
        created += r.created;
        if (r.retried) retriedCalls++;
      } catch (err) {
        failedCalls++;
        if (errors.length < 5) errors.push(`jobs ${from}-${to - 1}: ${String(err)}`);
      } finally {
        slowestCallMs = Math.max(slowestCallMs, performance.now() - t0);
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, (_, w) => worker(w)));
  return { created, failedCalls, retriedCalls, slowestCallMs, errors };
}

export async function runSteady(opts: SteadyOptions = {}): Promise<SteadyResult> {
  const rate = opts.rate ?? 3000;
  const minutes = opts.minutes ?? 10;
  const groups = opts.groups ?? 18;
  const log = opts.log ?? ((line: string) => console.log(line));
  const jobs = rate * 60;
  const problems: string[] = [];
  const machineBefore = machineContext();
  log(
    `steady ${fmt(rate)} fires/s for ${minutes} min: ${fmt(jobs)} cron jobs, once a minute each, ${ZONES.length} zones; ${describeMachine(machineBefore)}`,
  );
  const sink = await RecordingSink.start();
  let cluster: ProcCluster | undefined;
  let clients: ApiClient[] = [];
  try {
    cluster = await ProcCluster.create({
      groups,
      extraArgs: [...(opts.nodeFlags ?? [])],
      ...(opts.security === undefined ? {} : { security: opts.security }),
    });
    cluster.startAll();
    await cluster.waitReady(60_000);
    clients = await apiClients(cluster);
    await clients[0]!.call('TenantService', 'CreateTenant', {
      tenantId: TENANT,
      signingSecret: TEST_SECRET,
    });
    const led = await settleLeaders(cluster, groups);
    log(`  ${groups} data groups, led per node: ${describeLeaders(led)}`);
    await waitApplied(cluster);

    const bare = await runBareReference(sink, rate, jobs, log);
    // A fresh record: the reference's receipts are not the cluster's.
    await sink.configure({ rule: 'minute', jobs });

    const url = `${sink.origin}/hook`;
    const t0 = performance.now();
    const jobIdOf = (i: number): string => `steady-${String(i).padStart(7, '0')}`;
    const reg = await register(clients, jobs, (i) => ({
      jobId: jobIdOf(i),
      // A batch sent again after a leader change finds its created jobs by request id.
      requestId: jobIdOf(i),
      spec: {
        tenant: TENANT,
        schedule: `${i % 60} * * * * *`,
        // The zone changes every 60 jobs, so that each second's jobs are in every zone.
        timezone: ZONES[Math.floor(i / 60) % ZONES.length],
        target: { url },
      },
    }));
    const regMs = performance.now() - t0;
    await waitApplied(cluster);
    for (const e of reg.errors) problems.push(`steady registration: ${e}`);
    if (reg.created !== jobs)
      problems.push(`steady: ${fmt(jobs - reg.created)} of ${fmt(jobs)} jobs not created`);
    else if (reg.failedCalls > 0)
      problems.push(`steady: ${reg.failedCalls} CreateJobs calls failed`);
    log(
      `  registered ${fmt(reg.created)}/${fmt(jobs)} jobs in ${fmt(regMs)} ms (${fmt((reg.created / regMs) * 1000)} jobs/s; ` +
        `${reg.retriedCalls} calls sent again after a leader change, slowest call ${fmt(reg.slowestCallMs)} ms); all applied`,
    );

    // The heap the jobs alone hold (after full collections), to tell what the runs add.
    const heapBefore: number[] = [];
    for (const n of cluster.nodes) heapBefore.push((await n.memory(120_000)).heapUsedBytes);
    const receiptsBefore = await sink.count();

    // One whole unmeasured minute at full rate before the measure.
    const windowStartMs = Math.ceil((Date.now() + 60_000) / 60_000) * 60_000;
    const windowEndMs = windowStartMs + minutes * 60_000;
    log(
      `  warm-up until ${new Date(windowStartMs).toISOString()}, then ${minutes} measured minutes`,
    );
    await until(windowStartMs - 2000);
    const termsBefore = await groupTerms(cluster);
    await until(windowStartMs);
    const nodeCpu0 = cluster.nodes.map((n) => processCpuMs(n.proc?.pid ?? 0));
    const sinkCpu0 = sink.cpuMs();
    let printed = 0;
    for (let m = 0; m < minutes; m++) {
      const from = windowStartMs + m * 60_000;
      await until(from + 60_000 + LINE_AFTER_MS);
      const w = (await sink.summary(from, from + 60_000)).windows[0]!;
      printed += w.received;
      log(
        `  minute ${m + 1}: ${fmt(w.received)} received, ${lagText(w)}` +
          (w.duplicates > 0 ? `, ${fmt(w.duplicates)} DUPLICATES` : ''),
      );
    }
    // The CPU of the window itself: what follows (the wait for late fires) is the same load.
    await until(windowEndMs);
    const nodeCpuMs = cluster.nodes.map((n, i) => processCpuMs(n.proc?.pid ?? 0) - nodeCpu0[i]!);
    const sinkCpuMs = sink.cpuMs() - sinkCpu0;
    const termsAfter = await groupTerms(cluster);
    const leaderChanges = termsChanged(termsBefore, termsAfter);
    // A node's heap grows with the runs it keeps; long collections of a large heap are one way
    // for a leader to miss its heartbeats.
    const memoryAfter = (await Promise.all(cluster.nodes.map((n) => n.status(5000)))).map((st) => ({
      nodeId: st.nodeId,
      rssBytes: st.rssBytes,
      heapUsedBytes: st.heapUsedBytes,
    }));
    const gcWindow = await Promise.all(cluster.nodes.map((n) => n.gcSince(windowStartMs, 10_000)));
    await until(windowEndMs + LATE_MS);
    // Every fire left a finished run in each replica's state (kept up to the tenant's retention,
    // 100 runs per job by default): the heap they hold, after full collections, per run.
    const runsKept = (await sink.count()) - receiptsBefore;
    const heapAfter: number[] = [];
    for (const n of cluster.nodes) heapAfter.push((await n.memory(120_000)).heapUsedBytes);
    const heapPerRunReplica =
      heapAfter.reduce((sum, h, i) => sum + h - heapBefore[i]!, 0) /
      (cluster.nodes.length * Math.max(1, runsKept));
    const gc = {
      p99Ms: Math.max(...gcWindow.map((g) => g.gcPauseP99Ms)),
      maxMs: Math.max(...gcWindow.map((g) => g.gcPauseMaxMs)),
    };

    const perMinuteRaw = await sink.summary(windowStartMs, windowEndMs, 60_000);
    const all = (await sink.summary(windowStartMs, windowEndMs)).windows[0]!;
    const perMinute: SteadyMinute[] = perMinuteRaw.windows.map((w, m) => ({
      minute: m + 1,
      fromMs: w.fromMs,
      expected: jobs,
      received: w.received,
      duplicates: w.duplicates,
      lost: jobs - w.distinct,
      lagP50Ms: w.lagP50Ms,
      lagP99Ms: w.lagP99Ms,
      lagMaxMs: w.lagMaxMs,
    }));
    const expected = jobs * minutes;
    const lost = expected - all.distinct;
    const fires = all.received;
    const cpuNodes: NodeCpu[] = cluster.nodes.map((n, i) => ({
      nodeId: n.id,
      cpuMs: nodeCpuMs[i]!,
      cpuUsPerFire: (nodeCpuMs[i]! * 1000) / Math.max(1, fires),
    }));
    const clusterUsPerFire = (nodeCpuMs.reduce((a, b) => a + b, 0) * 1000) / Math.max(1, fires);
    const sinkUsPerRequest = (sinkCpuMs * 1000) / Math.max(1, fires);
    const minutesOverTarget = perMinute.filter((m) => !(m.lagP99Ms <= STEADY_P99_TARGET_MS)).length;
    const loadAfter = machineContext().load;

    const late = fires - printed;
    log(
      `  summary: ${fmt(fires)} received of ${fmt(expected)} expected (${minutes} × ${fmt(jobs)}), ` +
        `lost ${fmt(lost)}, duplicates ${fmt(all.duplicates)}, stray ${fmt(perMinuteRaw.stray)}; ${lagText(all)}` +
        (late !== 0 ? ` (${fmt(late)} arrived after their minute's line)` : ''),
    );
    log(
      `  target lag p99 ≤ ${STEADY_P99_TARGET_MS} ms each minute: ${minutes - minutesOverTarget} of ${minutes} minutes met it`,
    );
    log(
      `  CPU per fire: cluster ${clusterUsPerFire.toFixed(1)} µs (` +
        cpuNodes.map((c) => `${c.nodeId} ${c.cpuUsPerFire.toFixed(1)} µs`).join(', ') +
        `), i.e. ${((clusterUsPerFire * rate) / 1e6).toFixed(2)} cores at ${fmt(rate)}/s; ` +
        `sink ${sinkUsPerRequest.toFixed(1)} µs per request`,
    );
    log(
      `  leader changes during the measure: ${leaderChanges} of ${groups + 1} groups changed term; ` +
        `load average before ${machineBefore.load.join(' ')}, after ${loadAfter.join(' ')}`,
    );
    log(
      `  heap the finished runs hold: ${fmt(heapPerRunReplica)} B per run per replica (${fmt(runsKept)} runs, after full collections); ` +
        `GC pauses over the measure (worst node): p99 ${gc.p99Ms.toFixed(0)} ms, max ${gc.maxMs.toFixed(0)} ms`,
    );
    log(
      `  nodes' memory at the window's end: ` +
        memoryAfter
          .map(
            (m) =>
              `${m.nodeId} rss ${fmt(m.rssBytes / 2 ** 20)} MiB, heap ${fmt(m.heapUsedBytes / 2 ** 20)} MiB`,
          )
          .join('; '),
    );

    if (lost > 0) problems.push(`steady: ${fmt(lost)} of ${fmt(expected)} fires never arrived`);
    if (all.duplicates > 0)
      problems.push(`steady: ${fmt(all.duplicates)} fires arrived more than once`);
    if (perMinuteRaw.stray > 0)
      problems.push(
        `steady: ${fmt(perMinuteRaw.stray)} receipts of no expected slot (${perMinuteRaw.strayExamples.join('; ')})`,
      );
    // A graceful stop lets `TICKRAFT_NODE_ARGS=--cpu-prof` write the nodes' profiles.
    await Promise.all(cluster.nodes.map((n) => n.term()));
    return {
      rate,
      minutes,
      groups,
      jobs,
      zones: ZONES,
      registration: {
        created: reg.created,
        failedCalls: reg.failedCalls,
        retriedCalls: reg.retriedCalls,
        elapsedMs: regMs,
        jobsPerSec: (reg.created / regMs) * 1000,
      },
      windowStartMs,
      perMinute,
      expected,
      received: fires,
      duplicates: all.duplicates,
      lost,
      stray: perMinuteRaw.stray,
      lagP50Ms: all.lagP50Ms,
      lagP99Ms: all.lagP99Ms,
      lagMaxMs: all.lagMaxMs,
      minutesOverTarget,
      cpu: { nodes: cpuNodes, clusterUsPerFire, sinkUsPerRequest },
      leaderChanges,
      bare,
      memoryAfter,
      heapPerRunReplica,
      gc,
      loadBefore: machineBefore.load,
      loadAfter,
      problems,
    };
  } finally {
    for (const c of clients) c.close();
    cluster?.cleanup();
    sink.close();
  }
}

/**
 * One minute of the same fires from 3 bare undici processes (after BARE_WARMUP_SECONDS
 * unmeasured), with the sink recording under the steady rule: the machine's own lag for a
 * second's fires due at once, and its CPU per request.
 */
async function runBareReference(
  sink: RecordingSink,
  rate: number,
  jobs: number,
  log: (line: string) => void,
): Promise<SteadyResult['bare']> {
  await sink.configure({ rule: 'minute', jobs });
  const senders = new BareSteadySenders(sink.origin, 3, DEFAULT_WEBHOOK_CONNECTIONS);
  try {
    const startMs = Math.ceil((Date.now() + 2000) / 1000) * 1000;
    const fromMs = startMs + BARE_WARMUP_SECONDS * 1000;
    const toMs = fromMs + BARE_MEASURED_SECONDS * 1000;
    // The CPU of the measured seconds: from the first measured slot to the last answer.
    const [, [sinkCpu0, cpuAtFrom]] = await Promise.all([
      senders.run(rate, startMs, BARE_WARMUP_SECONDS + BARE_MEASURED_SECONDS),
      until(fromMs).then(() => [sink.cpuMs(), senders.cpuNow()] as const),
    ]);
    const sendersCpuMs = senders.cpuNow() - cpuAtFrom;
    const sinkCpuMs = sink.cpuMs() - sinkCpu0;
    const w = (await sink.summary(fromMs, toMs)).windows[0]!;
    const expected = rate * BARE_MEASURED_SECONDS;
    const out = {
      expected,
      received: w.received,
      duplicates: w.duplicates,
      lagP50Ms: w.lagP50Ms,
      lagP99Ms: w.lagP99Ms,
      lagMaxMs: w.lagMaxMs,
      cpuUsPerRequest: (sendersCpuMs * 1000) / Math.max(1, w.received),
      sinkUsPerRequest: (sinkCpuMs * 1000) / Math.max(1, w.received),
    };
    log(
      `  reference, the cluster idle: 3 bare undici processes sent the same fires for ${BARE_MEASURED_SECONDS} s ` +
        `(${fmt(rate)} due at every whole second, a third each, ${DEFAULT_WEBHOOK_CONNECTIONS} connections each): ` +
        `${fmt(out.received)}/${fmt(expected)} received, ${lagText(w)}; ` +
        `senders ${out.cpuUsPerRequest.toFixed(1)} µs, sink ${out.sinkUsPerRequest.toFixed(1)} µs CPU per request`,
    );
    return out;
  } finally {
    senders.close();
  }
}

/** `npm run bench`'s rows: the whole measure, then each minute against the p99 target. */
export function steadyRows(r: SteadyResult): Row[] {
  const rows: Row[] = [
    {
      figure: `steady: ${fmt(r.rate)} fires/s for ${r.minutes} min (${fmt(r.jobs)} once-a-minute cron jobs, ${r.zones.length} zones)`,
      measured: `${fmt(r.received)}/${fmt(r.expected)} received, lost ${fmt(r.lost)}, doubled ${fmt(r.duplicates)}; lag p50 / p99 / max ${fmt(r.lagP50Ms)} / ${fmt(r.lagP99Ms)} / ${fmt(r.lagMaxMs)} ms`,
      target: 'nothing lost or doubled',
      met: met(r.lost === 0 && r.duplicates === 0),
    },
    {
      figure: `  reference: the same fires from 3 bare undici processes for ${BARE_MEASURED_SECONDS} s, cluster idle: received; lag p50 / p99 / max`,
      measured: `${fmt(r.bare.received)}/${fmt(r.bare.expected)}; ${fmt(r.bare.lagP50Ms)} / ${fmt(r.bare.lagP99Ms)} / ${fmt(r.bare.lagMaxMs)} ms`,
      target: `p99 ≤ ${STEADY_P99_TARGET_MS} ms`,
      met: met(r.bare.lagP99Ms <= STEADY_P99_TARGET_MS),
    },
    {
      figure:
        '  p99 lag, tickraft (whole measure) ÷ the bare reference; CPU per fire ÷ bare per request',
      measured: `${(r.lagP99Ms / r.bare.lagP99Ms).toFixed(2)}×; ${fmt(r.cpu.clusterUsPerFire)} ÷ ${fmt(r.bare.cpuUsPerRequest)} µs = ${(r.cpu.clusterUsPerFire / r.bare.cpuUsPerRequest).toFixed(2)}×`,
      target: '',
      met: '',
    },
    {
      figure: '  CPU per fire: per node; the cluster; the sink per request',
      measured: `${r.cpu.nodes.map((n) => `${n.nodeId} ${fmt(n.cpuUsPerFire)}`).join(', ')} µs; ${fmt(r.cpu.clusterUsPerFire)} µs; ${fmt(r.cpu.sinkUsPerRequest)} µs`,
      target: '',
      met: '',
    },
    {
      figure: '  heap per finished run per replica; GC pause p99 / max (worst node)',
      measured: `${fmt(r.heapPerRunReplica)} B; ${r.gc.p99Ms.toFixed(0)} / ${r.gc.maxMs.toFixed(0)} ms`,
      target: '',
      met: '',
    },
    {
      figure: '  groups that changed leader during the measure; RSS per node after it',
      measured: `${r.leaderChanges}; ${r.memoryAfter.map((m) => `${(m.rssBytes / 2 ** 30).toFixed(2)}`).join(' / ')} GiB`,
      target: '',
      met: '',
    },
  ];
  for (const m of r.perMinute)
    rows.push({
      figure: `  minute ${m.minute}: received; lag p50 / p99 / max`,
      measured: `${fmt(m.received)}/${fmt(m.expected)}; ${fmt(m.lagP50Ms)} / ${fmt(m.lagP99Ms)} / ${fmt(m.lagMaxMs)} ms`,
      target: `p99 ≤ ${STEADY_P99_TARGET_MS} ms`,
      met: met(m.lagP99Ms <= STEADY_P99_TARGET_MS),
    });
  return rows;
}
