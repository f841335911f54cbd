/**
 * The :00 spike through a real 3-process cluster, shared by `npm run bench:scheduler` and
 * `npm run bench`: `jobs` one-off jobs all due in the same second, delivered to a local sink
 * process that records each receipt; lag from the slot to receipt (p50 / p99 / max) and the time
 * until the last fire, next to the ceiling measured in the same run: a bare undici Pool in a
 * process of its own sending the same number of requests (same size, same headers) to the same
 * sink, all issued at once; and the same requests sent from 3 such processes, as the 3 nodes send.
 * With `warmup`, a smaller spike fires first on the fresh cluster and the bare clients send as
 * many requests first, so that every side is measured with its code compiled by V8.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { TEST_SECRET } from '../test/helpers/webhook-sink.js';
import { ProcCluster, type ClusterSecurity, type ProcNode } from '../test/helpers/cluster.js';
import { ApiClient } from '../src/api/client.js';
import { META_GROUP_ID, planBootstrap } from '../src/placement/bootstrap-plan.js';
import { hashShardKey } from '../src/placement/hash.js';
import { lookupRange, splitRing } from '../src/placement/ring.js';
import { DEFAULT_WEBHOOK_CONNECTIONS } from '../src/config/node-config.js';
import { fmt, percentile } from './figures.js';
import { startSinkProcess } from './sink-process.js';
import { traceCpu } from './proc-cpu.js';

/**
 * The sink: records slot-to-receipt lag from `tickraft-scheduled-for`; GET /stats, POST /reset,
 * and GET /count, a poll that costs the sink nothing to speak of while it is busy. /stats also
 * says the sink's own CPU since the last reset.
 */
const SINK_SOURCE = `
const http = require('node:http');
let lags = [], first = 0, last = 0, ids = new Set(), dup = 0, cpu0 = process.cpuUsage();
const server = http.createServer((req, res) => {
  if (req.url === '/count') { res.end(String(lags.length)); return; }
  if (req.url === '/stats') {
    lags.sort((a, b) => a - b);
    const c = process.cpuUsage(cpu0);
    res.end(JSON.stringify({ count: lags.length, dup, lags, first, last, cpuUs: c.user + c.system }));
    return;
  }
  if (req.url === '/reset') {
    lags = []; first = 0; last = 0; ids = new Set(); dup = 0; cpu0 = process.cpuUsage(); res.end('{}'); return;
  }
  req.resume();
  req.on('end', () => {
    const now = Date.now();
    const slot = Date.parse(req.headers['tickraft-scheduled-for']);
    const id = req.headers['idempotency-key'];
    if (ids.has(id)) dup++; else ids.add(id);
    lags.push(now - slot);
    if (first === 0) first = now;
    last = now;
    res.writeHead(200, { 'content-length': '2' });
    res.end('ok');
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;

interface SinkStats {
  count: number;
  dup: number;
  lags: number[];
  first: number;
  last: number;
  cpuUs: number;
}

/** One side of the comparison: what the sink saw. */
export interface SpikeSide {
  readonly received: number;
  readonly duplicates: number;
  /** Slot (or, for the ceiling, the moment all requests were issued) to the last receipt. */
  readonly drainMs: number;
  readonly lagP50Ms: number;
  readonly lagP99Ms: number;
  readonly lagMaxMs: number;
  /** Slot (or the moment all requests were issued) to the first receipt. */
  readonly firstMs: number;
  /** The sink's CPU per request received, µs (the bench's few polls of it included). */
  readonly sinkCpuUsPerRequest: number;
  /**
   * The sending processes' CPU per request, µs, from the slot (or the moment all requests were
   * issued) to the last receipt, from /proc: for tickraft the three nodes, for the bare client
   * its process(es). NaN where not measured.
   */
  readonly senderCpuUsPerRequest: number;
}

/** The spike that warms fresh nodes before the measured one (SpikeOptions.warmup). */
export interface SpikeWarmup {
  readonly jobs: number;
  readonly tickraft: SpikeSide;
  /** Cluster CPU from 4 s before its slot to its last fire. */
  readonly cpuMs: number;
}

export interface SpikeResult {
  readonly jobs: number;
  /** The warm-up spike and the bare client's warm-up burst, when there was one. */
  readonly warmup: (SpikeWarmup & { readonly ceiling: SpikeSide }) | undefined;
  readonly groups: number;
  /** Keep-alive connections to the sink per node (`--webhook-connections`). */
  readonly nodeConnections: number;
  /** Connections of the bare client's Pool. */
  readonly bareConnections: number;
  readonly createMs: number;
  /** Time left before the slot once every job was created (look-ahead needs ≥ 3.5 s). */
  readonly marginMs: number;
  readonly leaderChangesCreating: number;
  readonly leaderChangesSpike: number;
  /** Cluster CPU from 4 s before the slot to the last fire. */
  readonly cpuMs: number;
  /** The node processes' CPU from the slot to the last fire (from /proc; NaN elsewhere). */
  readonly drainCpuMs: number;
  readonly tickraft: SpikeSide;
  /** The bare client's burst just before tickraft's spike. */
  readonly ceilingBefore: SpikeSide;
  /** The bare client's burst just after tickraft's spike. */
  readonly ceiling: SpikeSide;
  /** The ceiling the ratios use: the mean of the two bursts' times to the last request. */
  readonly ceilingDrainMs: number;
  /** The mean of the two bursts' p99 lags. */
  readonly ceilingP99Ms: number;
  /** The ceiling's requests sent from 3 processes at once, as the cluster's 3 nodes send. */
  readonly splitCeiling: SpikeSide;
  /** Time to last fire, tickraft ÷ ceilingDrainMs. */
  readonly drainRatio: number;
  /** p99 lag, tickraft ÷ ceilingP99Ms. */
  readonly p99Ratio: number;
}

export interface SpikeOptions {
  readonly jobs: number;
  readonly groups: number;
  /** Authentication and TLS of the cluster (test/helpers/cluster.ts). @default 'auth' */
  readonly security?: ClusterSecurity;
  /**
   * Jobs of a spike fired first, on the fresh cluster, and requests the bare client sends
   * first, so that both sides are measured with their code compiled by V8. 0: none.
   * @default 0
   */
  readonly warmup?: number;
  /** Extra `tickraft serve` flags. */
  readonly nodeFlags?: readonly string[];
  /** Move every data group's leadership to this node before the spikes (`--leaders-on`). */
  readonly leadersOn?: string | undefined;
  /** Print each node's scheduler counters every 250 ms around the slot. */
  readonly trace?: boolean;
  /** Progress lines (default: console.log). */
  readonly log?: (line: string) => void;
}

async function sinkCount(origin: string): Promise<number> {
  const res = await fetch(`${origin}/count`);
  return Number(await res.text());
}

async function sinkGet(origin: string, path: string): Promise<SinkStats> {
  const res = await fetch(`${origin}${path}`);
  return (await res.json()) as SinkStats;
}

function sideOf(s: SinkStats, slotMs: number, senderCpuMs = Number.NaN): SpikeSide {
  return {
    received: s.count,
    duplicates: s.dup,
    drainMs: s.last - slotMs,
    lagP50Ms: percentile(s.lags, 50),
    lagP99Ms: percentile(s.lags, 99),
    lagMaxMs: s.lags[s.lags.length - 1] ?? Number.NaN,
    firstMs: s.first - slotMs,
    sinkCpuUsPerRequest: s.count > 0 ? s.cpuUs / s.count : Number.NaN,
    senderCpuUsPerRequest: s.count > 0 ? (senderCpuMs * 1000) / s.count : Number.NaN,
  };
}

export function describeSide(name: string, s: SpikeSide, n: number): string {
  return (
    `  ${name.padEnd(26)} received ${fmt(s.received)}/${fmt(n)} (dup ${s.duplicates}), first after ${fmt(s.firstMs)} ms, last after ${fmt(s.drainMs)} ms, ` +
    `lag p50 ${fmt(s.lagP50Ms)} ms, p99 ${fmt(s.lagP99Ms)} ms, max ${fmt(s.lagMaxMs)} ms, ` +
    `sink CPU ${s.sinkCpuUsPerRequest.toFixed(1)} µs per request` +
    (Number.isNaN(s.senderCpuUsPerRequest)
      ? ''
      : `, senders' CPU ${s.senderCpuUsPerRequest.toFixed(1)} µs per request`)
  );
}

/** The bare client's Pool size. */
export const BARE_CONNECTIONS = 128;

/**
 * The bare client, in a process of its own: a Pool of `connections` (argv) that sends, for each
 * line `<tag> <at ms> <count>` on stdin, `count` requests like the spike's (the same headers,
 * a body of the same fields), made before `at` and all issued at `at`, and writes `done` once
 * all were answered. Lag at the sink counts from `at`. Its connections stay open between bursts,
 * so that a burst after the warm-up finds them open, as the nodes find theirs at the measured
 * spike (the sink's keep-alive hint is 60 s; the warm-up spike fired about 15 s before).
 */
const BARE_SENDER_SOURCE = `
const { Pool } = require('undici');
const [origin, connections] = [process.argv[1], Number(process.argv[2])];
// One Pool for every burst: its connections stay open from one burst to the next (the sink asks
// for 60 s of keep-alive), as the nodes' do from one spike to the next.
const pool = new Pool(origin, { connections });
async function burst(tag, at, count) {
  const slot = new Date(at).toISOString();
  // The requests tickraft sends (ids, body, headers, user-agent), made before the burst as the
  // nodes render theirs ahead of the slot.
  const requests = [];
  for (let i = 0; i < count; i++) {
    const jobId = tag + '-' + process.pid + '-' + String(i).padStart(6, '0');
    const id = 'acme/' + jobId + ':' + at;
    requests.push({ method: 'POST', path: '/hook', headers: {
      'user-agent': 'tickraft-webhook/1', 'content-type': 'application/json',
      'idempotency-key': id, 'tickraft-fencing-token': '33554432',
      'tickraft-scheduled-for': slot, 'tickraft-attempt': '1', 'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at / 1000)),
      'webhook-signature': 'v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=' },
      body: JSON.stringify({ jobId, tenant: 'acme', fireId: id, slot, slotMs: at, attempt: 1,
        fencingToken: 33554432, payload: null }) });
  }
  while (Date.now() < at) await new Promise((r) => setTimeout(r, 1));
  const sends = [];
  for (const r of requests) sends.push(pool.request(r).then((res) => res.body.dump()));
  await Promise.all(sends);
  process.stdout.write('done\\n');
}
let buffered = '';
let chain = Promise.resolve();
process.stdin.on('data', (d) => {
  buffered += d;
  for (let nl = buffered.indexOf('\\n'); nl >= 0; nl = buffered.indexOf('\\n')) {
    const [tag, at, count] = buffered.slice(0, nl).split(' ');
    buffered = buffered.slice(nl + 1);
    chain = chain.then(() => burst(tag, Number(at), Number(count)));
  }
});
`;

/**
 * `procs` bare-client processes (BARE_SENDER_SOURCE) with `connections` each. One process is the
 * ceiling; three send as the cluster's three nodes do (each leads its share of the groups), and
 * on a machine with fewer cores than busy processes that costs time of its own: this says how
 * much, with nothing of tickraft in the processes.
 */
class BareSenders {
  private readonly children: ChildProcess[];
  private readonly outputs: string[];

  constructor(
    private readonly origin: string,
    procs: number,
    connections: number,
  ) {
    this.children = Array.from({ length: procs }, () =>
      spawn(process.execPath, ['-e', BARE_SENDER_SOURCE, origin, String(connections)], {
        stdio: ['pipe', 'pipe', 'inherit'],
      }),
    );
    this.outputs = this.children.map(() => '');
    this.children.forEach((c, i) =>
      c.stdout?.on('data', (d: Buffer) => (this.outputs[i] += d.toString())),
    );
  }

  /** `n` requests split over the processes, all issued 200 ms from now; what the sink saw. */
  async burst(tag: string, n: number): Promise<SpikeSide> {
    await sinkGet(this.origin, '/reset');
    const at = Date.now() + 200;
    const procs = this.children.length;
    const doneBefore = this.outputs.map((o) => o.split('done').length);
    this.children.forEach((c, i) => {
      const share = Math.floor(n / procs) + (i < n % procs ? 1 : 0);
      c.stdin?.write(`${tag} ${at} ${share}\n`);
    });
    const cpuTraces = this.children.map((c) => traceCpu(c.pid ?? 0));
    const answered = (): boolean =>
      this.outputs.every((o, i) => o.split('done').length > (doneBefore[i] ?? 0));
    for (let waited = 0; !answered() && waited < 120_000; waited += 20) {
      if (this.children.some((c) => c.exitCode !== null))
        throw new Error('a bare sender process exited');
      await new Promise((r) => setTimeout(r, 20));
    }
    for (const c of cpuTraces) c.stop();
    const stats = await sinkGet(this.origin, '/stats');
    const cpuMs = cpuTraces.reduce((sum, c) => sum + c.at(stats.last) - c.at(at), 0);
    return sideOf(stats, at, cpuMs);
  }

  close(): void {
    for (const c of this.children) c.kill();
  }
}

async function clusterCpuMs(cluster: ProcCluster): Promise<number> {
  let total = 0;
  for (const n of cluster.nodes) total += (await n.status()).cpuMs;
  return total;
}

async function groupTerms(cluster: ProcCluster): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for (const n of cluster.nodes) {
    const st = await n.status();
    for (const g of st.groups) out.set(g.groupId, Math.max(out.get(g.groupId) ?? 0, g.term));
  }
  return out;
}

export async function runSpike(opts: SpikeOptions): Promise<SpikeResult> {
  const { jobs: JOBS, groups: GROUPS } = opts;
  const WARMUP = opts.warmup ?? 0;
  const log = opts.log ?? ((line: string) => console.log(line));
  const flags = opts.nodeFlags ?? [];
  const at = flags.indexOf('--webhook-connections');
  const nodeConnections = at >= 0 ? Number(flags[at + 1]) : DEFAULT_WEBHOOK_CONNECTIONS;
  const sink = await startSinkProcess(SINK_SOURCE);
  const cluster = await ProcCluster.create({
    groups: GROUPS,
    extraArgs: [...(opts.nodeFlags ?? [])],
    ...(opts.security === undefined ? {} : { security: opts.security }),
  });
  try {
    cluster.startAll();
    await cluster.waitReady(60_000);
    await cluster.scheduler({ op: 'put-tenant', id: 'acme', signingSecrets: [TEST_SECRET] });
    await new Promise((r) => setTimeout(r, 500));
    // Jobs go in batches to the leader of their group. Right after start each node hands the
    // groups it leads to their preferred node; wait (bounded) for those transfers first.
    const plan = planBootstrap(
      cluster.nodes.map((n) => n.id),
      GROUPS,
    );
    let led = await cluster.leaders();
    for (let waited = 0; waited < 10_000; waited += 100) {
      if (plan.groups.every((g) => led.get(g.groupId) === g.replicas[0])) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
      led = await cluster.leaders();
    }
    if (opts.leadersOn !== undefined) {
      // Every data group's leadership on one node, as an operator would move it (the transfer
      // records it as the groups' preferred leader, so balancing keeps it there).
      const to = cluster.node(opts.leadersOn);
      const client = new ApiClient(`${to.host}:${to.apiPort}`, 30_000, {}, cluster.clientOptions());
      try {
        for (const groupId of led.keys())
          if (groupId !== META_GROUP_ID)
            await client.call('AdminService', 'TransferLeader', { groupId, toNode: to.id });
      } finally {
        client.close();
      }
      led = await cluster.leaders();
    }
    const leaders = new Map<number, ProcNode>();
    for (const [groupId, id] of led) leaders.set(groupId, cluster.node(id));
    const perNode = new Map<string, number>();
    for (const [groupId, id] of led)
      if (groupId !== META_GROUP_ID) perNode.set(id, (perNode.get(id) ?? 0) + 1);
    log(`  data groups led per node: ${[...perNode].map(([id, n]) => `${id} ${n}`).join(', ')}`);
    const ranges = splitRing(GROUPS, META_GROUP_ID + 1);

    /** `count` one-off jobs named `<prefix>-NNNNNN`, all due at one whole second far enough ahead. */
    const createSpike = async (
      prefix: string,
      count: number,
    ): Promise<{ slotMs: number; createdMs: number }> => {
      const createMs = Math.max(8000, count * 0.6);
      const slotMs = Math.ceil((Date.now() + createMs + 4000) / 1000) * 1000;
      const slot = new Date(slotMs).toISOString();
      const jobs: { groupId: number; body: Record<string, unknown> }[] = [];
      for (let i = 0; i < count; i++) {
        const jobId = `${prefix}-${String(i).padStart(6, '0')}`;
        const spec = {
          tenant: 'acme',
          name: jobId,
          schedule: `at ${slot}`,
          target: { url: `${sink.origin}/hook` },
        };
        jobs.push({
          groupId: lookupRange(ranges, hashShardKey(`acme/${jobId}`)).groupId,
          body: { jobId, requestId: jobId, spec },
        });
      }
      const t0 = performance.now();
      // Batches go to the leader of their jobs' group; a batch refused by a node that no longer
      // leads is sent again after a fresh look at the leaders (request ids make that idempotent).
      let pending = jobs;
      while (pending.length > 0) {
        const byNode = new Map<ProcNode, Record<string, unknown>[]>();
        for (const j of pending) {
          const node = leaders.get(j.groupId) ?? cluster.nodes[0]!;
          let list = byNode.get(node);
          if (!list) byNode.set(node, (list = []));
          list.push(j.body);
        }
        const failed: typeof jobs = [];
        await Promise.all(
          [...byNode].map(async ([node, list]) => {
            for (let i = 0; i < list.length; i += 1000) {
              const batch = list.slice(i, i + 1000);
              try {
                await node.scheduler({ op: 'create-jobs', jobs: batch }, 60_000);
              } catch {
                for (const body of batch)
                  failed.push({
                    groupId: lookupRange(ranges, hashShardKey(`acme/${String(body['jobId'])}`))
                      .groupId,
                    body,
                  });
              }
            }
          }),
        );
        pending = failed;
        if (failed.length > 0) {
          await new Promise((r) => setTimeout(r, 200));
          for (const [groupId, id] of await cluster.leaders())
            leaders.set(groupId, cluster.node(id));
        }
      }
      return { slotMs, createdMs: performance.now() - t0 };
    };

    /** Waits until the sink has `count` receipts (or 60 s passed) and no more arrive. */
    const awaitReceipts = async (count: number, slotMs: number): Promise<SinkStats> => {
      const deadline = slotMs + 60_000;
      let received = await sinkCount(sink.origin);
      while (received < count && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 250));
        received = await sinkCount(sink.origin);
        if (opts.trace === true && Date.now() > slotMs - 3500) {
          const sts = await Promise.all(cluster.nodes.map((n) => n.status()));
          log(
            `  t=${Date.now() - slotMs} received ${received} | ` +
              sts
                .map(
                  (st) =>
                    `${st.nodeId} snaps ${st.snapshotsTaken} waits ${st.deliveryLeaseWaits} proposed ${st.schedulerProposed} delivered ${st.schedulerDelivered} results ${st.schedulerResults} queued ${st.deliveryQueued} inflight ${st.deliveryInflight}`,
                )
                .join(' | '),
          );
        }
      }
      // Stragglers (retries) must not land in the next measure: wait until the count is still.
      for (let last = -1; received !== last && Date.now() < deadline;) {
        last = received;
        await new Promise((r) => setTimeout(r, 1500));
        received = await sinkCount(sink.origin);
      }
      return sinkGet(sink.origin, '/stats');
    };

    let warmup: SpikeWarmup | undefined;
    if (WARMUP > 0) {
      // A production scheduler fires every minute: its delivery path is compiled by V8 long
      // before any one :00. Fresh nodes compile it during their first spike instead (a third
      // of the nodes' CPU went to TurboFan's threads in one), so one spike warms them first.
      const w = await createSpike('warm', WARMUP);
      while (Date.now() < w.slotMs - 4000) await new Promise((r) => setTimeout(r, 20));
      const cpuBefore = await clusterCpuMs(cluster);
      const side = sideOf(await awaitReceipts(WARMUP, w.slotMs), w.slotMs);
      const cpuMs = (await clusterCpuMs(cluster)) - cpuBefore;
      warmup = { jobs: WARMUP, tickraft: side, cpuMs };
      log(describeSide(`warm-up spike (fresh nodes)`, side, WARMUP));
      log(
        `  warm-up cluster CPU from 4 s before its slot: ${fmt(cpuMs)} ms (${fmt((cpuMs * 1000) / WARMUP)} µs per fire)`,
      );
      await sinkGet(sink.origin, '/reset');
    }

    // The ceiling is measured twice, just before tickraft's spike and just after it, and the
    // ratios are to the mean of the two: this machine's speed drifts by tens of percent within
    // minutes, and one measure after the spike put that drift wholly into the ratio.
    // Both references get the same warm-up as the cluster: undici's code in their processes is
    // compiled by V8 before the measured burst, as the nodes' is before their measured spike.
    const one = new BareSenders(sink.origin, 1, BARE_CONNECTIONS);
    const three = new BareSenders(sink.origin, 3, nodeConnections);
    let bareWarmup: SpikeSide | undefined;
    let ceilingBefore: SpikeSide;
    let ceiling: SpikeSide;
    let split: SpikeSide;
    try {
      if (WARMUP > 0) {
        bareWarmup = await one.burst('warm', WARMUP);
        log(describeSide('bare Pool warm-up burst', bareWarmup, WARMUP));
        await three.burst('warm', WARMUP);
      }
      // One burst of the measured size first, unmeasured: without it the burst before the
      // spike was slower than the one after it in 5 runs of 6 (after ÷ before 0.65-0.94), the
      // sink and the client being less warm than they are once the spike has run.
      await one.burst('bare-settle', JOBS);
      ceilingBefore = await one.burst('bare-before', JOBS);
      await sinkGet(sink.origin, '/reset');
    } catch (err) {
      one.close();
      three.close();
      throw err;
    }

    const termsBefore = await groupTerms(cluster);
    const { slotMs, createdMs } = await createSpike('spike', JOBS);
    const termsCreated = await groupTerms(cluster);
    const changedCreating = [...termsCreated].filter(
      ([g, term]) => (termsBefore.get(g) ?? 0) !== term,
    ).length;
    const marginMs = slotMs - Date.now();
    log(
      `spike through 3 processes, ${GROUPS} groups: ${fmt(JOBS)} jobs created in ${fmt(createdMs)} ms (${fmt((JOBS / createdMs) * 1000)} jobs/s); slot in ${fmt(marginMs)} ms`,
    );
    if (marginMs < 3500) log('  WARNING: created too late for the look-ahead; raise the margin');
    while (Date.now() < slotMs - 4000) await new Promise((r) => setTimeout(r, 20));
    const cpuBefore = await clusterCpuMs(cluster);
    while (Date.now() < slotMs - 300) await new Promise((r) => setTimeout(r, 20));
    const cpuTraces = cluster.nodes.map((n) => traceCpu(n.proc?.pid ?? 0));
    const stats = await awaitReceipts(JOBS, slotMs);
    for (const c of cpuTraces) c.stop();
    const drainCpuPerNode = cpuTraces.map((c) => c.at(stats.last) - c.at(slotMs));
    const drainCpuMs = drainCpuPerNode.reduce((a, b) => a + b, 0);
    const terms = await groupTerms(cluster);
    const changed = [...terms].filter(([g, term]) => (termsCreated.get(g) ?? 0) !== term).length;
    log(
      `  leader changes: ${changedCreating} of ${GROUPS + 1} groups changed term while creating, ${changed} during the spike`,
    );
    const ours = sideOf(stats, slotMs, drainCpuMs);
    log(describeSide('tickraft', ours, JOBS));
    const statuses = await Promise.all(cluster.nodes.map((n) => n.status()));
    log(
      `  requests rendered ahead of the slot: ${fmt(statuses.reduce((n, st) => n + st.deliveryPrerendered, 0))}, ` +
        `sent so: ${fmt(statuses.reduce((n, st) => n + st.deliverySentPrerendered, 0))} (warm-up included)`,
    );
    const cpuAfter = await clusterCpuMs(cluster);
    log(
      `  cluster CPU from 4 s before the slot to the last fire: ${fmt(cpuAfter - cpuBefore)} ms (${fmt(((cpuAfter - cpuBefore) * 1000) / JOBS)} µs per fire); ` +
        `from the slot to the last fire: ${fmt(drainCpuMs)} ms (${fmt((drainCpuMs * 1000) / JOBS)} µs per fire; ` +
        `${cluster.nodes.map((n, i) => `${n.id} ${fmt(drainCpuPerNode[i] ?? 0)} ms`).join(', ')})`,
    );
    try {
      ceiling = await one.burst('bare', JOBS);
      split = await three.burst('split', JOBS);
    } finally {
      one.close();
      three.close();
    }
    log(describeSide('bare undici Pool (ceiling), before', ceilingBefore, JOBS));
    log(describeSide('bare undici Pool (ceiling), after', ceiling, JOBS));
    const ceilingDrainMs = (ceilingBefore.drainMs + ceiling.drainMs) / 2;
    const ceilingP99Ms = (ceilingBefore.lagP99Ms + ceiling.lagP99Ms) / 2;
    log(
      `  ceiling: ${fmt(ceilingDrainMs)} ms to the last request, p99 ${fmt(ceilingP99Ms)} ms (mean of before and after; after ÷ before ${(ceiling.drainMs / ceilingBefore.drainMs).toFixed(2)})`,
    );
    log(
      `  connections to the sink: tickraft ${nodeConnections} per node (3 nodes, ${3 * nodeConnections} in all), bare Pool ${BARE_CONNECTIONS}`,
    );
    log(describeSide(`bare Pools in 3 processes`, split, JOBS));
    const drainRatio = ours.drainMs / ceilingDrainMs;
    const p99Ratio = ours.lagP99Ms / ceilingP99Ms;
    log(
      `  ratio to the ceiling: time to last fire ${drainRatio.toFixed(2)}×, p99 lag ${p99Ratio.toFixed(2)}× (target ≤ 1.25× both)`,
    );
    log(
      `  the ceiling from 3 processes (${nodeConnections} connections each, as the nodes): ` +
        `time to last fire ${(split.drainMs / ceiling.drainMs).toFixed(2)}× the one-process ceiling after the spike; ` +
        `tickraft ${(ours.drainMs / split.drainMs).toFixed(2)}× of it`,
    );
    // A graceful stop lets `TICKRAFT_NODE_ARGS=--cpu-prof` write the nodes' profiles.
    await Promise.all(cluster.nodes.map((n) => n.term()));
    return {
      jobs: JOBS,
      warmup: warmup && bareWarmup && { ...warmup, ceiling: bareWarmup },
      groups: GROUPS,
      nodeConnections,
      bareConnections: BARE_CONNECTIONS,
      createMs: createdMs,
      marginMs,
      leaderChangesCreating: changedCreating,
      leaderChangesSpike: changed,
      cpuMs: cpuAfter - cpuBefore,
      drainCpuMs,
      tickraft: ours,
      ceilingBefore,
      ceiling,
      ceilingDrainMs,
      ceilingP99Ms,
      splitCeiling: split,
      drainRatio,
      p99Ratio,
    };
  } finally {
    cluster.cleanup();
    sink.child.kill();
  }
}
