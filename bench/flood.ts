/**
 * The one-minute flood, for `npm run bench`: N one-off jobs due within one minute, through a
 * real 3-process cluster, next to a bare undici client sending the same requests on the same
 * schedule to the same sink. The scale tickraft is sized for is 2,000,000 jobs due within one
 * minute; a 2-core machine will not take that many, so each size asked for is measured in turn
 * and the result says which fit, and how many cores that scale needs at the CPU per fire
 * measured.
 *
 * For each size N, on a fresh cluster and sink (bench/steady.ts's recording sink):
 *
 *   - a warm-up flood first (N/20 jobs, 2,000-20,000, over 5 s), so that the nodes' delivery
 *     path is compiled by V8 before the measure, as a scheduler that fires every minute has it;
 *     its creation rate (create-jobs batches of 1000 to each group's leader, as spike.ts) sets
 *     how far ahead the measured minute starts: creation must end ≥ 3.5 s (the look-ahead)
 *     before the first slot;
 *   - N one-off jobs (`at <instant>`), job i due at second floor(i × 60 / N) of the minute (N/60
 *     per whole second); the sink's bits say which arrived, and how often. Lost: not received 60 s
 *     after the minute. Per 10 s of slots: lag (receipt − slot) p50 / p99 / max. Drain: the last
 *     receipt after the minute's end (negative: before it). CPU of each node and of the sink from
 *     /proc, from the minute's start to the last receipt, per fire;
 *   - the bare reference: an undici Pool in a process of its own (spike.ts's BARE_SENDER_SOURCE's
 *     requests: same headers, same body fields) that issues each second's N/60 requests at that
 *     whole second for 60 s, each second's requests made a second ahead, after a warm-up of its
 *     own; the same figures, its CPU per request. Then the same from 3 processes, each sending a
 *     third, as the 3 nodes do.
 *
 * Figures only; a fire lost, doubled or of no expected slot is a functional problem, listed in
 * `problems`.
 */
import type { ChildProcess } from 'node:child_process';
import { TEST_SECRET } from '../test/helpers/webhook-sink.js';
import {
  ProcCluster,
  sleep,
  type ClusterSecurity,
  type ProcNode,
} from '../test/helpers/cluster.js';
import { META_GROUP_ID } from '../src/placement/bootstrap-plan.js';
import { hashShardKey } from '../src/placement/hash.js';
import { lookupRange, splitRing } from '../src/placement/ring.js';
import { DEFAULT_WEBHOOK_CONNECTIONS } from '../src/config/node-config.js';
import { describeLeaders, settleLeaders } from './bench-cluster.js';
import { describeMachine, fmt, machineContext, met, type Row } from './figures.js';
import { processCpuMs, traceCpu } from './proc-cpu.js';
import { BARE_REQUEST_SOURCE, spawnScriptProcesses } from './sink-process.js';
import { BARE_CONNECTIONS } from './spike.js';
import {
  groupTerms,
  lagText,
  RecordingSink,
  termsChanged,
  until,
  type LagWindow,
  type NodeCpu,
  type SinkRule,
} from './steady.js';

/** The scale tickraft is sized for: this many jobs due within one minute. */
export const FLOOD_TARGET_JOBS = 2_000_000;
/** A fleet machine's cores and how busy it may run, for the sizing. */
const FLEET_MACHINE_CORES = 2;
const FLEET_BUSY = 0.7;
/**
 * A size fits this machine when nothing was lost or doubled and the p99 lag stayed within this:
 * a fire seconds late, or sent twice after an election on a saturated CPU, is not keeping up.
 */
export const FITS_P99_MS = 1000;
const TENANT = 'acme';
/** The warm-up flood's slots span this many seconds. */
const WARMUP_SECONDS = 5;
/** The scheduler's look-ahead, and slack on top of it before the first slot. */
const LOOK_AHEAD_MS = 3500;
const CREATE_SLACK_MS = 4000;
/** How long the nodes' idle CPU is sampled. */
const IDLE_SAMPLE_MS = 5000;
/** Fires not received this long after the minute's end are lost. */
const LOST_AFTER_MS = 60_000;

/**
 * The bare client, in a process of its own: a Pool of `connections` (argv) that, for each line
 * `<tag> <start ms> <count> <seconds> <part> <parts>` on stdin, sends the requests of ids
 * `<tag>-<i>` for i < count with i % parts = part, request i at start + 1000 × floor(i × seconds
 * / count) (the sink's `spread` rule), each second's requests all issued at that whole second and
 * made during the second before (the nodes render theirs ahead of the slot), then writes
 * `done <failed requests>`. The requests are BARE_REQUEST_SOURCE (sink-process.ts): tickraft's.
 */
const FLOOD_SENDER_SOURCE = `
const { Pool } = require('undici');
const [origin, connections] = [process.argv[1], Number(process.argv[2])];
// One Pool for every flood: its connections stay open from the warm-up to the measure.
const pool = new Pool(origin, { connections });
${BARE_REQUEST_SOURCE}
async function flood(tag, start, count, seconds, part, parts) {
  const second = (s) => {
    const at = start + 1000 * s, out = [];
    for (let i = Math.ceil((s * count) / seconds); i < Math.ceil(((s + 1) * count) / seconds); i++)
      if (i % parts === part) out.push(requestOf(tag + '-' + i, at));
    return out;
  };
  let failed = 0;
  const sends = [];
  let next = second(0);
  for (let s = 0; s < seconds; s++) {
    const at = start + 1000 * s;
    for (let left = at - Date.now(); left > 0; left = at - Date.now())
      await new Promise((r) => setTimeout(r, left > 20 ? left - 10 : 1));
    for (const r of next) sends.push(pool.request(r).then((res) => res.body.dump(), () => { failed++; }));
    next = s + 1 < seconds ? second(s + 1) : [];
  }
  await Promise.all(sends);
  process.stdout.write('done ' + failed + '\\n');
}
let buffered = '';
let chain = Promise.resolve();
process.stdin.on('data', (d) => {
  buffered += d;
  for (let nl = buffered.indexOf('\\n'); nl >= 0; nl = buffered.indexOf('\\n')) {
    const [tag, start, count, seconds, part, parts] = buffered.slice(0, nl).split(' ');
    buffered = buffered.slice(nl + 1);
    chain = chain.then(() => flood(tag, Number(start), Number(count), Number(seconds),
      Number(part), Number(parts)));
  }
});
`;

/** `procs` bare client processes (FLOOD_SENDER_SOURCE), each sending its share of a flood. */
class BareFlooders {
  private readonly children: ChildProcess[];
  private readonly outputs: string[];

  constructor(origin: string, procs: number, connections: number) {
    ({ children: this.children, outputs: this.outputs } = spawnScriptProcesses(
      FLOOD_SENDER_SOURCE,
      [origin, String(connections)],
      procs,
    ));
  }

  get pids(): number[] {
    return this.children.map((c) => c.pid ?? 0);
  }

  /** Starts a flood; the promise settles once every process answered all its requests. */
  async flood(tag: string, startMs: number, count: number, seconds: number): Promise<number> {
    const before = this.outputs.map((o) => o.length);
    this.children.forEach((c, part) =>
      c.stdin?.write(`${tag} ${startMs} ${count} ${seconds} ${part} ${this.children.length}\n`),
    );
    const deadline = startMs + seconds * 1000 + LOST_AFTER_MS + 30_000;
    for (;;) {
      const done = this.outputs.map((o, i) => /done (\d+)/.exec(o.slice(before[i])));
      if (done.every((d) => d !== null)) return done.reduce((sum, d) => sum + Number(d?.[1]), 0);
      if (this.children.some((c) => c.exitCode !== null))
        throw new Error('a bare sender process exited');
      if (Date.now() > deadline) throw new Error('the bare senders did not finish');
      await sleep(50);
    }
  }

  close(): void {
    for (const c of this.children) c.kill();
  }
}

export interface FloodOptions {
  /** Sizes, each measured in turn on a fresh cluster. @default [300000] */
  readonly jobs?: readonly number[];
  /** @default 18 */
  readonly groups?: number;
  /** Also the bare reference from 3 processes, a third each. @default true */
  readonly split?: boolean;
  /** Authentication and TLS of the cluster (test/helpers/cluster.ts). @default 'auth' */
  readonly security?: ClusterSecurity;
  /** Extra `tickraft serve` flags. */
  readonly nodeFlags?: readonly string[];
  /** Progress lines (default: console.log). */
  readonly log?: (line: string) => void;
}

/** One side's minute, as the sink saw it. */
export interface FloodSide {
  readonly received: number;
  readonly duplicates: number;
  /** Due in the minute and not received 60 s after it. */
  readonly lost: number;
  /** Receipts of no expected slot. */
  readonly stray: number;
  /** Requests the bare client saw fail (0 for tickraft, whose retries the sink sees). */
  readonly failedRequests: number;
  readonly lagP50Ms: number;
  readonly lagP99Ms: number;
  readonly lagMaxMs: number;
  /** Six windows of 10 s of slots. */
  readonly perTenSeconds: readonly LagWindow[];
  /** The last receipt after the minute's end (negative: before it). */
  readonly drainAfterMinuteMs: number;
  /** The senders' CPU (/proc) from the minute's start to the last receipt. */
  readonly senderCpuMs: number;
  readonly senderCpuUsPerFire: number;
  /** Per node, for tickraft; empty for the bare client. */
  readonly nodes: readonly NodeCpu[];
  readonly sinkCpuUsPerRequest: number;
}

export interface FloodRun {
  readonly jobs: number;
  readonly groups: number;
  readonly warmupJobs: number;
  /** Creation rate of the warm-up's jobs, which set the margin. */
  readonly warmupCreateJobsPerSec: number;
  readonly createMs: number;
  readonly createJobsPerSec: number;
  /** Time left before the first slot once every job was created (look-ahead needs ≥ 3.5 s). */
  readonly marginMs: number;
  readonly leaderChangesCreating: number;
  readonly leaderChangesFlood: number;
  readonly tickraft: FloodSide;
  /** The three nodes' CPU per second with nothing due, measured for 5 s before creation. */
  readonly idleClusterCpuMsPerSec: number;
  /** The nodes' CPU per fire less that idle CPU over the flood: what the fires cost. */
  readonly firesCpuUsPerFire: number;
  readonly bare: FloodSide;
  /** Undefined when not asked for (FloodOptions.split). */
  readonly bareSplit: FloodSide | undefined;
  /** What the flood asks of this machine's CPU: (cluster + sink µs per fire) × N/60, in cores. */
  readonly demandCores: number;
  /** Nothing lost or doubled, p99 lag ≤ FITS_P99_MS. */
  readonly fits: boolean;
  readonly loadBefore: readonly number[];
  readonly loadAfter: readonly number[];
}

export interface FloodFleet {
  /** The size whose CPU per fire the sizing uses (the largest measured). */
  readonly fromJobs: number;
  /** FLOOD_TARGET_JOBS ÷ 60 s. */
  readonly firesPerSec: number;
  readonly clusterCpuUsPerFire: number;
  /** Cores of this machine's kind busy with the nodes' work at firesPerSec. */
  readonly nodeCores: number;
  /** The same from the fires' own CPU (FloodRun.firesCpuUsPerFire), the nodes' idle CPU left out. */
  readonly firesOnlyCores: number;
  /** Machines of 2 cores at 70 % busy for that. */
  readonly machines: number;
  /** The receivers' cores at this sink's CPU per request (not part of the fleet). */
  readonly receiverCores: number;
  /** Jobs due in one minute this machine's cores would take at the measured CPU per fire. */
  readonly thisMachineJobsPerMinute: number;
}

export interface FloodResult {
  readonly runs: readonly FloodRun[];
  readonly fleet: FloodFleet | undefined;
  /** Functional problems: a fire lost, doubled or of no expected slot; a job not created. */
  readonly problems: string[];
}

/** Waits until the sink has `count` receipts (or `deadline`), then until no more arrive. */
async function awaitReceipts(sink: RecordingSink, count: number, deadline: number): Promise<void> {
  let received = await sink.count();
  while (received < count && Date.now() < deadline) {
    await sleep(250);
    received = await sink.count();
  }
  // Stragglers (retries) count too: wait until the count is still.
  for (let last = -1; received !== last && Date.now() < deadline;) {
    last = received;
    await sleep(1500);
    received = await sink.count();
  }
}

/** The sink's figures for a minute from `startMs`, with the senders' CPU over it. */
async function sideOf(
  sink: RecordingSink,
  startMs: number,
  jobs: number,
  cpu: {
    senders: readonly { id: string; trace: ReturnType<typeof traceCpu> }[];
    sink: ReturnType<typeof traceCpu>;
  },
  failedRequests: number,
  withNodes: boolean,
): Promise<FloodSide> {
  const endMs = startMs + 60_000;
  const all = await sink.summary(startMs, endMs);
  const tens = await sink.summary(startMs, endMs, 10_000);
  const w = all.windows[0]!;
  const last = w.lastReceiptMs > 0 ? w.lastReceiptMs : Date.now();
  const fires = Math.max(1, w.received);
  const perSender = cpu.senders.map((s) => ({
    id: s.id,
    ms: s.trace.at(last) - s.trace.at(startMs),
  }));
  const senderCpuMs = perSender.reduce((a, s) => a + s.ms, 0);
  return {
    received: w.received,
    duplicates: w.duplicates,
    lost: jobs - w.distinct,
    stray: all.stray,
    failedRequests,
    lagP50Ms: w.lagP50Ms,
    lagP99Ms: w.lagP99Ms,
    lagMaxMs: w.lagMaxMs,
    perTenSeconds: tens.windows,
    drainAfterMinuteMs: w.lastReceiptMs > 0 ? w.lastReceiptMs - endMs : Number.NaN,
    senderCpuMs,
    senderCpuUsPerFire: (senderCpuMs * 1000) / fires,
    nodes: withNodes
      ? perSender.map((s) => ({ nodeId: s.id, cpuMs: s.ms, cpuUsPerFire: (s.ms * 1000) / fires }))
      : [],
    sinkCpuUsPerRequest: ((cpu.sink.at(last) - cpu.sink.at(startMs)) * 1000) / fires,
  };
}

function describeSide(name: string, s: FloodSide, n: number, log: (line: string) => void): void {
  log(
    `  ${name}: received ${fmt(s.received)}/${fmt(n)}, lost ${fmt(s.lost)}, dup ${fmt(s.duplicates)}` +
      (s.failedRequests > 0 ? `, ${fmt(s.failedRequests)} requests failed` : '') +
      `; ${lagText(s)}; ` +
      `last receipt ${fmt(s.drainAfterMinuteMs + 1000)} ms after the last slot (${fmt(s.drainAfterMinuteMs)} ms from the minute's end); ` +
      `senders' CPU ${s.senderCpuUsPerFire.toFixed(1)} µs per fire` +
      (s.nodes.length > 0
        ? ` (${s.nodes.map((c) => `${c.nodeId} ${c.cpuUsPerFire.toFixed(1)}`).join(', ')})`
        : '') +
      `, sink ${s.sinkCpuUsPerRequest.toFixed(1)} µs per request`,
  );
  log(
    `    per 10 s of slots: ` +
      s.perTenSeconds
        .map(
          (w, i) =>
            `${i * 10}-${i * 10 + 10} s p50 ${fmt(w.lagP50Ms)} p99 ${fmt(w.lagP99Ms)} max ${fmt(w.lagMaxMs)}`,
        )
        .join(' | ') +
      ' ms',
  );
}

function problemsOf(name: string, s: FloodSide, n: number, strayExamples: string): string[] {
  const out: string[] = [];
  if (s.lost > 0) out.push(`flood ${fmt(n)} ${name}: ${fmt(s.lost)} fires never arrived`);
  if (s.duplicates > 0)
    out.push(`flood ${fmt(n)} ${name}: ${fmt(s.duplicates)} fires arrived more than once`);
  if (s.stray > 0)
    out.push(
      `flood ${fmt(n)} ${name}: ${fmt(s.stray)} receipts of no expected slot (${strayExamples})`,
    );
  return out;
}

/**
 * One-off jobs `<prefix>-<i>` for i < count, job i due at `slotOf(i)`, created in batches of 1000
 * on the leader of their group, each node's batches one after another, in order of i (the
 * earliest slots first). A batch refused by a node that no longer leads is sent again after a
 * fresh look at the leaders (request ids make that idempotent). Returns the jobs created.
 */
async function createOneOff(
  cluster: ProcCluster,
  groups: number,
  prefix: string,
  count: number,
  slotOf: (i: number) => number,
  url: string,
): Promise<{ created: number; errors: string[] }> {
  const ranges = splitRing(groups, META_GROUP_ID + 1);
  const jobIdOf = (i: number): string => `${prefix}-${i}`;
  // Bodies are built just before their batch: a million of them at once would take the bench
  // process hundreds of MB.
  const groupOf = new Uint16Array(count);
  for (let i = 0; i < count; i++)
    groupOf[i] = lookupRange(ranges, hashShardKey(`${TENANT}/${jobIdOf(i)}`)).groupId;
  const bodyOf = (i: number): Record<string, unknown> => {
    const jobId = jobIdOf(i);
    return {
      jobId,
      requestId: jobId,
      spec: {
        tenant: TENANT,
        name: jobId,
        schedule: `at ${new Date(slotOf(i)).toISOString()}`,
        target: { url },
      },
    };
  };
  const leaders = new Map<number, ProcNode>();
  for (const [groupId, id] of await cluster.leaders()) leaders.set(groupId, cluster.node(id));
  let created = 0;
  const errors: string[] = [];
  let pending = Array.from({ length: count }, (_, i) => i);
  for (let round = 0; pending.length > 0 && round < 20; round++) {
    const byNode = new Map<ProcNode, number[]>();
    for (const i of pending) {
      const node = leaders.get(groupOf[i]!) ?? cluster.nodes[0]!;
      let list = byNode.get(node);
      if (!list) byNode.set(node, (list = []));
      list.push(i);
    }
    const failed: number[] = [];
    await Promise.all(
      [...byNode].map(async ([node, list]) => {
        for (let k = 0; k < list.length; k += 1000) {
          const batch = list.slice(k, k + 1000);
          try {
            const r = (await node.scheduler(
              { op: 'create-jobs', jobs: batch.map(bodyOf) },
              60_000,
            )) as { created: number; duplicates: number };
            created += r.created + r.duplicates;
          } catch (err) {
            if (errors.length < 3) errors.push(String(err));
            failed.push(...batch);
          }
        }
      }),
    );
    pending = failed;
    if (failed.length > 0) {
      await sleep(200);
      for (const [groupId, id] of await cluster.leaders()) leaders.set(groupId, cluster.node(id));
    }
  }
  return { created, errors: pending.length > 0 ? errors : [] };
}

async function runOne(
  jobs: number,
  opts: FloodOptions,
  log: (line: string) => void,
  problems: string[],
): Promise<FloodRun> {
  const groups = opts.groups ?? 18;
  const loadBefore = machineContext().load;
  const sink = await RecordingSink.start();
  let cluster: ProcCluster | undefined;
  const bares: BareFlooders[] = [];
  try {
    cluster = await ProcCluster.create({
      groups,
      extraArgs: [...(opts.nodeFlags ?? [])],
      ...(opts.security === undefined ? {} : { security: opts.security }),
    });
    cluster.startAll();
    await cluster.waitReady(60_000);
    await cluster.scheduler({ op: 'put-tenant', id: TENANT, signingSecrets: [TEST_SECRET] });
    const led = await settleLeaders(cluster, groups);
    log(
      `flood of ${fmt(jobs)} jobs due in one minute; ${groups} data groups, led per node: ${describeLeaders(led)}`,
    );
    const url = `${sink.origin}/hook`;
    const nodePids = cluster.nodes.map((n) => n.proc?.pid ?? 0);

    /** Creates `count` jobs spread over `seconds` from a start far enough ahead. */
    const createFlood = async (
      prefix: string,
      count: number,
      seconds: number,
      jobsPerSec: number,
    ): Promise<{ startMs: number; createMs: number; marginMs: number }> => {
      const estimateMs = (count / jobsPerSec) * 1000;
      const startMs =
        Math.ceil((Date.now() + estimateMs * 1.3 + LOOK_AHEAD_MS + CREATE_SLACK_MS) / 1000) * 1000;
      await sink.configure({ rule: 'spread', jobs: count, startMs, seconds });
      const t0 = performance.now();
      const r = await createOneOff(
        cluster!,
        groups,
        prefix,
        count,
        (i) => startMs + 1000 * Math.floor((i * seconds) / count),
        url,
      );
      const createMs = performance.now() - t0;
      if (r.created !== count)
        problems.push(
          `flood ${fmt(jobs)}: ${fmt(count - r.created)} ${prefix} jobs not created (${r.errors.join('; ')})`,
        );
      return { startMs, createMs, marginMs: startMs - Date.now() };
    };

    // The warm-up flood, whose creation rate (a guess of 20,000 jobs/s for its own start) sets
    // the measured minute's start.
    const warmupJobs = Math.min(20_000, Math.max(2000, Math.round(jobs / 20)));
    const warm = await createFlood('warm', warmupJobs, WARMUP_SECONDS, 20_000);
    const warmRate = (warmupJobs / warm.createMs) * 1000;
    await awaitReceipts(sink, warmupJobs, warm.startMs + WARMUP_SECONDS * 1000 + 30_000);
    const warmSide = (await sink.summary(warm.startMs, warm.startMs + WARMUP_SECONDS * 1000))
      .windows[0]!;
    log(
      `  warm-up: ${fmt(warmupJobs)} jobs over ${WARMUP_SECONDS} s, created at ${fmt(warmRate)} jobs/s; ` +
        `received ${fmt(warmSide.received)}, ${lagText(warmSide)}`,
    );

    // The nodes' own CPU with nothing due (heartbeats, timers, status polls): at a small size it
    // is most of the CPU per fire, so the figure beside it says what the fires themselves cost.
    const idle0 = nodePids.map(processCpuMs);
    await sleep(IDLE_SAMPLE_MS);
    const idleClusterCpuMsPerSec =
      (nodePids.reduce((sum, pid, i) => sum + processCpuMs(pid) - idle0[i]!, 0) * 1000) /
      IDLE_SAMPLE_MS;

    const termsBefore = await groupTerms(cluster);
    const created = await createFlood('flood', jobs, 60, warmRate);
    const termsCreated = await groupTerms(cluster);
    const createJobsPerSec = (jobs / created.createMs) * 1000;
    log(
      `  ${fmt(jobs)} jobs created in ${fmt(created.createMs)} ms (${fmt(createJobsPerSec)} jobs/s); ` +
        `first slot ${fmt(created.marginMs)} ms later`,
    );
    if (created.marginMs < LOOK_AHEAD_MS)
      log('  WARNING: created too late for the look-ahead; the first seconds may be late');
    const { startMs } = created;
    await until(startMs - 1000);
    const nodeTraces = cluster.nodes.map((n, i) => ({ id: n.id, trace: traceCpu(nodePids[i]!) }));
    const sinkTrace = traceCpu(sink.pid);
    await awaitReceipts(sink, jobs, startMs + 60_000 + LOST_AFTER_MS);
    for (const t of nodeTraces) t.trace.stop();
    sinkTrace.stop();
    const termsAfter = await groupTerms(cluster);
    const ours = await sideOf(
      sink,
      startMs,
      jobs,
      { senders: nodeTraces, sink: sinkTrace },
      0,
      true,
    );
    const strays = (await sink.summary(startMs, startMs + 60_000)).strayExamples.join('; ');
    // The CPU window: from the minute's start to the last receipt.
    const busyMs = 60_000 + ours.drainAfterMinuteMs;
    const firesCpuUsPerFire =
      ((ours.senderCpuMs - (idleClusterCpuMsPerSec * busyMs) / 1000) * 1000) /
      Math.max(1, ours.received);
    problems.push(...problemsOf('tickraft', ours, jobs, strays));
    describeSide('tickraft', ours, jobs, log);
    log(
      `    the nodes' CPU with nothing due: ${fmt(idleClusterCpuMsPerSec)} ms/s in all; without it, ${firesCpuUsPerFire.toFixed(1)} µs per fire`,
    );
    const leaderChangesCreating = termsChanged(termsBefore, termsCreated);
    const leaderChangesFlood = termsChanged(termsCreated, termsAfter);
    log(
      `  leader changes: ${leaderChangesCreating} of ${groups + 1} groups changed term while creating, ${leaderChangesFlood} during the flood`,
    );
    // The nodes stop here: the bare clients get the machine the nodes had.
    await Promise.all(cluster.nodes.map((n) => n.term()));
    cluster.cleanup();
    cluster = undefined;

    /** The bare client's minute from `procs` processes, after a warm-up flood of its own. */
    const bareMinute = async (procs: number, connections: number): Promise<FloodSide> => {
      const bare = new BareFlooders(sink.origin, procs, connections);
      bares.push(bare);
      const warmStart = Math.ceil((Date.now() + 1500) / 1000) * 1000;
      await sink.configure({
        rule: 'spread',
        jobs: warmupJobs,
        startMs: warmStart,
        seconds: WARMUP_SECONDS,
      });
      await bare.flood('warm', warmStart, warmupJobs, WARMUP_SECONDS);
      const start = Math.ceil((Date.now() + 2500) / 1000) * 1000;
      const rule: SinkRule = { rule: 'spread', jobs, startMs: start, seconds: 60 };
      await sink.configure(rule);
      await until(start - 1000);
      const traces = bare.pids.map((pid, i) => ({ id: `bare${i + 1}`, trace: traceCpu(pid) }));
      const sTrace = traceCpu(sink.pid);
      const failed = await bare.flood('bare', start, jobs, 60);
      await awaitReceipts(sink, jobs, start + 60_000 + LOST_AFTER_MS);
      for (const t of traces) t.trace.stop();
      sTrace.stop();
      bare.close();
      const side = await sideOf(
        sink,
        start,
        jobs,
        { senders: traces, sink: sTrace },
        failed,
        false,
      );
      const examples = (await sink.summary(start, start + 60_000)).strayExamples.join('; ');
      problems.push(...problemsOf(`bare ×${procs}`, side, jobs, examples));
      return side;
    };
    const bare = await bareMinute(1, BARE_CONNECTIONS);
    describeSide(`bare undici Pool, 1 process (${BARE_CONNECTIONS} connections)`, bare, jobs, log);
    let bareSplit: FloodSide | undefined;
    if (opts.split ?? true) {
      bareSplit = await bareMinute(3, DEFAULT_WEBHOOK_CONNECTIONS);
      describeSide(
        `bare undici Pools, 3 processes (${DEFAULT_WEBHOOK_CONNECTIONS} connections each)`,
        bareSplit,
        jobs,
        log,
      );
    }

    const demandCores = ((ours.senderCpuUsPerFire + ours.sinkCpuUsPerRequest) * (jobs / 60)) / 1e6;
    const fits = ours.lost === 0 && ours.duplicates === 0 && ours.lagP99Ms <= FITS_P99_MS;
    const cores = machineContext().cpus;
    log(
      `  demand on this machine: (cluster ${ours.senderCpuUsPerFire.toFixed(1)} + sink ${ours.sinkCpuUsPerRequest.toFixed(1)} µs per fire) × ${fmt(jobs / 60)}/s = ` +
        `${demandCores.toFixed(2)} cores of ${cores}, the bench process and the kernel's network work on top; ` +
        (fits
          ? `fits (nothing lost or doubled, p99 ≤ ${fmt(FITS_P99_MS)} ms)`
          : `does NOT fit: ${fmt(ours.lost)} lost, ${fmt(ours.duplicates)} doubled, p99 ${fmt(ours.lagP99Ms)} ms` +
            (leaderChangesFlood > 0
              ? `, ${leaderChangesFlood} groups changed leader (heartbeats late on a busy CPU)`
              : '') +
            (demandCores > 0.8 * cores ? '; the CPU is what ran out' : '')),
    );
    return {
      jobs,
      groups,
      warmupJobs,
      warmupCreateJobsPerSec: warmRate,
      createMs: created.createMs,
      createJobsPerSec,
      marginMs: created.marginMs,
      leaderChangesCreating,
      leaderChangesFlood,
      tickraft: ours,
      idleClusterCpuMsPerSec,
      firesCpuUsPerFire,
      bare,
      bareSplit,
      demandCores,
      fits,
      loadBefore,
      loadAfter: machineContext().load,
    };
  } finally {
    for (const b of bares) b.close();
    cluster?.cleanup();
    sink.close();
  }
}

/** The sizing for FLOOD_TARGET_JOBS from the CPU per fire measured at `run`'s size. */
export function fleetOf(run: FloodRun): FloodFleet {
  const firesPerSec = FLOOD_TARGET_JOBS / 60;
  const clusterCpuUsPerFire = run.tickraft.senderCpuUsPerFire;
  const nodeCores = (clusterCpuUsPerFire * firesPerSec) / 1e6;
  const perFire = clusterCpuUsPerFire + run.tickraft.sinkCpuUsPerRequest;
  return {
    fromJobs: run.jobs,
    firesPerSec,
    clusterCpuUsPerFire,
    nodeCores,
    firesOnlyCores: (run.firesCpuUsPerFire * firesPerSec) / 1e6,
    machines: Math.ceil(nodeCores / (FLEET_MACHINE_CORES * FLEET_BUSY)),
    receiverCores: (run.tickraft.sinkCpuUsPerRequest * firesPerSec) / 1e6,
    thisMachineJobsPerMinute: (machineContext().cpus * 60 * 1e6) / perFire,
  };
}

export async function runFlood(opts: FloodOptions = {}): Promise<FloodResult> {
  const sizes = opts.jobs ?? [300_000];
  const log = opts.log ?? ((line: string) => console.log(line));
  log(
    `flood: ${sizes.map(fmt).join(', ')} jobs due within one minute; ${describeMachine(machineContext())}`,
  );
  const problems: string[] = [];
  const runs: FloodRun[] = [];
  for (const n of sizes) runs.push(await runOne(n, opts, log, problems));
  const largest = runs.reduce<FloodRun | undefined>(
    (best, r) => (best === undefined || r.jobs > best.jobs ? r : best),
    undefined,
  );
  const fleet = largest && fleetOf(largest);
  if (fleet) {
    log(
      `  sizes that fit this machine: ${
        runs
          .filter((r) => r.fits)
          .map((r) => fmt(r.jobs))
          .join(', ') || 'none'
      }; ` +
        `at the CPU per fire of ${fmt(fleet.fromJobs)} its ${machineContext().cpus} cores would take ≈ ${fmt(fleet.thisMachineJobsPerMinute)} jobs due in one minute (nodes and sink, nothing else)`,
    );
    log(
      `  a fleet for ${fmt(FLOOD_TARGET_JOBS)} due in one minute (${fmt(fleet.firesPerSec)} fires/s, cluster ${fleet.clusterCpuUsPerFire.toFixed(1)} µs per fire) ` +
        `needs ≈ ${fleet.nodeCores.toFixed(1)} cores of this machine's kind for the nodes ` +
        `(${fleet.machines} machines of ${FLEET_MACHINE_CORES} cores at ${FLEET_BUSY * 100} % busy), ` +
        `plus the receivers' own (≈ ${fleet.receiverCores.toFixed(1)} cores at this sink's cost); ` +
        `the fires' own CPU, the nodes' idle CPU left out, ≈ ${fleet.firesOnlyCores.toFixed(1)} cores`,
    );
  }
  return { runs, fleet, problems };
}

/** `npm run bench`'s rows: each size next to the bare client, then the fleet sizing. */
export function floodRows(r: FloodResult): Row[] {
  const rows: Row[] = [];
  for (const run of r.runs) {
    const side = (s: FloodSide): string =>
      `lag p50 / p99 / max ${fmt(s.lagP50Ms)} / ${fmt(s.lagP99Ms)} / ${fmt(s.lagMaxMs)} ms, last ${fmt(s.drainAfterMinuteMs)} ms after the minute; lost ${fmt(s.lost)}, doubled ${fmt(s.duplicates)}`;
    rows.push(
      {
        figure: `flood: ${fmt(run.jobs)} jobs due within one minute (${fmt(run.jobs / 60)}/s): tickraft`,
        measured: side(run.tickraft),
        target: `fits: nothing lost or doubled, p99 ≤ ${fmt(FITS_P99_MS)} ms`,
        met: met(run.fits),
      },
      {
        figure: '  bare undici client, same requests, same sink, same minute',
        measured: side(run.bare),
        target: '',
        met: '',
      },
      {
        figure: '  CPU per fire: cluster (less its idle); bare client per request; sink',
        measured: `${fmt(run.tickraft.senderCpuUsPerFire)} (${fmt(run.firesCpuUsPerFire)}) µs; ${fmt(run.bare.senderCpuUsPerFire)} µs; ${fmt(run.tickraft.sinkCpuUsPerRequest)} µs`,
        target: '',
        met: '',
      },
      {
        figure: "  the flood's CPU demand on this machine; groups that changed leader",
        measured: `${run.demandCores.toFixed(2)} cores; ${run.leaderChangesFlood}`,
        target: '',
        met: '',
      },
    );
  }
  if (r.fleet)
    rows.push({
      figure: `  a fleet for ${fmt(FLOOD_TARGET_JOBS)} due in one minute (CPU per fire of the ${fmt(r.fleet.fromJobs)} run)`,
      measured: `${r.fleet.nodeCores.toFixed(1)} cores for the nodes: ${r.fleet.machines} machines of ${FLEET_MACHINE_CORES} cores at ${FLEET_BUSY * 100} %; receivers ${r.fleet.receiverCores.toFixed(1)} cores`,
      target: '',
      met: '',
    });
  return rows;
}
