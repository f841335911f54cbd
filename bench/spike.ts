/**
 * The :00 spike through a real 3-process cluster, shared by `npm run bench:scheduler` and
 * `npm run bench`: `jobs` one-off jobs all due in the same second, delivered to a local sink
 * process that records each receipt (and which connection it came on). Measured:
 *
 * - tickraft: lag from the slot to receipt (p50 / p99 / max) and the time until the last fire;
 *   what each node sent (the sink counts receipts per client port, and the ports are traced to
 *   the node processes owning those sockets through /proc; the group→leader map says what each
 *   node should send).
 * - The same topology without tickraft, the reference the targets use (≤ 1.1×): 3 bare undici
 *   Pools, each in a process of its own with the connections a node has, each sending exactly
 *   as many requests as its node sends (the spike's jobs hashed to their groups, each group to
 *   the node leading it), all issued at once; measured just before tickraft's spike and just
 *   after it, the ratios being to the mean of the two.
 * - One bare undici Pool in one process sending all the requests, before and after likewise:
 *   context only (one process on a 2-core machine has less to share than three).
 * - CPU: the whole cluster's per fire, the three node processes' every thread (from /proc), from
 *   4 s before the slot (planning, requests rendered ahead) until the cluster is quiet again
 *   (every node's results count still and every replica has applied its leader's commit: the
 *   results proposed, replicated and applied on the 3 replicas), less the idle cluster's rate
 *   measured over ~3 s just before, over the same time; next to the bare clients' CPU per request
 *   (all their processes, from the burst to its last receipt). Also the nodes' CPU from the slot
 *   to the last fire alone.
 *
 * With `warmup`, a smaller spike fires first on the fresh cluster and the bare clients send as
 * many requests first, so that every side is measured with its code compiled by V8.
 */
import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { TEST_SECRET } from '../test/helpers/webhook-sink.js';
import {
  ProcCluster,
  type ClusterSecurity,
  type NodeStatus,
  type ProcNode,
} from '../test/helpers/cluster.js';
import { ApiClient } from '../src/api/client.js';
import { META_GROUP_ID, planBootstrap } from '../src/placement/bootstrap-plan.js';
import { hashShardKey } from '../src/placement/hash.js';
import { lookupRange, splitRing } from '../src/placement/ring.js';
import { DEFAULT_WEBHOOK_CONNECTIONS } from '../src/config/node-config.js';
import { fmt, met, percentile, type Row } from './figures.js';
import { BARE_REQUEST_SOURCE, spawnScriptProcesses, startSinkProcess } from './sink-process.js';
import { traceCpu } from './proc-cpu.js';

/**
 * The sink: records slot-to-receipt lag from `tickraft-scheduled-for`; GET /stats, POST /reset,
 * and GET /count, a poll that costs the sink nothing to speak of while it is busy. /stats also
 * says the sink's own CPU since the last reset, and the receipts per client port (the request
 * itself does not say which node sent it; the port's socket does: socketOwners).
 */
const SINK_SOURCE = `
const http = require('node:http');
let lags = [], first = 0, last = 0, ids = new Set(), dup = 0, ports = {}, cpu0 = process.cpuUsage();
const server = http.createServer((req, res) => {
  if (req.url === '/count') { res.end(String(lags.length)); return; }
  if (req.url === '/stats') {
    lags.sort((a, b) => a - b);
    const c = process.cpuUsage(cpu0);
    res.end(JSON.stringify({ count: lags.length, dup, lags, first, last, cpuUs: c.user + c.system, ports }));
    return;
  }
  if (req.url === '/reset') {
    lags = []; first = 0; last = 0; ids = new Set(); dup = 0; ports = {}; cpu0 = process.cpuUsage(); res.end('{}'); return;
  }
  req.resume();
  req.on('end', () => {
    const now = Date.now();
    const slot = Date.parse(req.headers['tickraft-scheduled-for']);
    const id = req.headers['idempotency-key'];
    if (ids.has(id)) dup++; else ids.add(id);
    const port = req.socket.remotePort;
    ports[port] = (ports[port] || 0) + 1;
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
  /** Receipts per client port. */
  ports: Record<string, number>;
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
  /** The same topology after tickraft's spike (= sameTopologyAfter; kept for its readers). */
  readonly splitCeiling: SpikeSide;
  /** Time to last fire, tickraft ÷ ceilingDrainMs (the one-process ceiling: context only). */
  readonly drainRatio: number;
  /** p99 lag, tickraft ÷ ceilingP99Ms (context only). */
  readonly p99Ratio: number;
  /**
   * Fires each node should send: the spike's jobs hashed to their groups, each group to the node
   * leading it once the jobs were created. The 3 bare processes send these shares.
   */
  readonly nodeShares: Record<string, number>;
  /**
   * Fires each node did send, as the sink saw them: receipts per client port, each port traced
   * to the node process owning its socket (/proc). `unattributed`: receipts on connections
   * closed (or not found) by then. Undefined where /proc cannot be read.
   */
  readonly nodeSent: Record<string, number> | undefined;
  /** 3 bare processes, each sending its node's share (nodeShares), just before the spike. */
  readonly sameTopologyBefore: SpikeSide;
  /** The same just after the spike. */
  readonly sameTopologyAfter: SpikeSide;
  /** The mean of sameTopologyBefore and sameTopologyAfter, field by field: the reference. */
  readonly sameTopology: SpikeSide;
  /** Time to last fire, tickraft ÷ sameTopology (target ≤ 1.1×). */
  readonly drainRatioSameTopology: number;
  /** p99 lag, tickraft ÷ sameTopology (target ≤ 1.1×). */
  readonly p99RatioSameTopology: number;
  /**
   * The whole cluster's CPU per fire, µs: the 3 node processes (all threads) from 4 s before the
   * slot until the cluster was quiet again (clusterQuietMs), less clusterIdleCpuMsPerS over the
   * same time, divided by the fires received (duplicates not counted: their cost is the fire's).
   */
  readonly clusterCpuUsPerFire: number;
  /** The nodes' CPU over that window, ms, idle not yet subtracted. */
  readonly clusterCpuWindowMs: number;
  /** The idle cluster's CPU rate (3 nodes), ms per second, measured over idleMeasuredMs. */
  readonly clusterIdleCpuMsPerS: number;
  readonly idleMeasuredMs: number;
  /** Slot to the moment the cluster was quiet again (results still, every replica applied). */
  readonly clusterQuietMs: number;
  /** The 3 bare processes' CPU per request (all three, burst to last receipt), mean of both. */
  readonly bareCpuUsPerRequest: number;
  /** The one-process bare client's CPU per request, mean of before and after. */
  readonly bareOneCpuUsPerRequest: number;
  /** clusterCpuUsPerFire ÷ bareCpuUsPerRequest (target ≤ 1.5×). */
  readonly cpuRatio: number;
  /** clusterCpuUsPerFire ÷ bareOneCpuUsPerRequest (context only). */
  readonly cpuRatioOne: number;
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
${BARE_REQUEST_SOURCE}
async function burst(tag, at, count) {
  // The requests tickraft sends, made before the burst as the nodes render theirs ahead of the
  // slot.
  const requests = [];
  for (let i = 0; i < count; i++)
    requests.push(requestOf(tag + '-' + process.pid + '-' + String(i).padStart(6, '0'), at));
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
 * one-process ceiling; three send as the cluster's three nodes do, each its node's share of the
 * fires, and on a machine with fewer cores than busy processes that costs time of its own: this
 * says how much, with nothing of tickraft in the processes.
 */
class BareSenders {
  private readonly children: ChildProcess[];
  private readonly outputs: string[];

  constructor(
    private readonly origin: string,
    procs: number,
    connections: number,
  ) {
    ({ children: this.children, outputs: this.outputs } = spawnScriptProcesses(
      BARE_SENDER_SOURCE,
      [origin, String(connections)],
      procs,
    ));
  }

  /**
   * `shares[i]` requests from process i, all issued 200 ms from now; what the sink saw, with the
   * processes' CPU (all of them) from then to the last receipt.
   */
  async burst(tag: string, shares: readonly number[]): Promise<SpikeSide> {
    if (shares.length !== this.children.length)
      throw new Error(`${shares.length} shares for ${this.children.length} processes`);
    await sinkGet(this.origin, '/reset');
    const at = Date.now() + 200;
    const doneBefore = this.outputs.map((o) => o.split('done').length);
    this.children.forEach((c, i) => c.stdin?.write(`${tag} ${at} ${shares[i] ?? 0}\n`));
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

/** `n` split as evenly as can be over `procs`. */
function evenShares(n: number, procs: number): number[] {
  return Array.from({ length: procs }, (_, i) => Math.floor(n / procs) + (i < n % procs ? 1 : 0));
}

/** The mean of two sides, field by field. */
function meanSide(a: SpikeSide, b: SpikeSide): SpikeSide {
  const m = (f: (s: SpikeSide) => number): number => (f(a) + f(b)) / 2;
  return {
    received: m((s) => s.received),
    duplicates: m((s) => s.duplicates),
    drainMs: m((s) => s.drainMs),
    lagP50Ms: m((s) => s.lagP50Ms),
    lagP99Ms: m((s) => s.lagP99Ms),
    lagMaxMs: m((s) => s.lagMaxMs),
    firstMs: m((s) => s.firstMs),
    sinkCpuUsPerRequest: m((s) => s.sinkCpuUsPerRequest),
    senderCpuUsPerRequest: m((s) => s.senderCpuUsPerRequest),
  };
}

/**
 * Which of `pids` owns each client socket connected to `peerPort` on this machine: local port →
 * index in `pids`, from /proc/net/tcp{,6} (port → socket inode) and /proc/<pid>/fd (inode →
 * process). Undefined where /proc cannot be read.
 */
function socketOwners(pids: readonly number[], peerPort: number): Map<number, number> | undefined {
  const portOfInode = new Map<string, number>();
  const portIn = (address: string): number =>
    parseInt(address.slice(address.lastIndexOf(':') + 1), 16);
  let read = false;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    read = true;
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      const [local, remote, inode] = [f[1], f[2], f[9]];
      if (local === undefined || remote === undefined || inode === undefined || inode === '0')
        continue;
      if (portIn(remote) === peerPort) portOfInode.set(inode, portIn(local));
    }
  }
  if (!read) return undefined;
  const owners = new Map<number, number>();
  pids.forEach((pid, i) => {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      return;
    }
    for (const fd of fds) {
      let link: string;
      try {
        link = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
      const port = inode === undefined ? undefined : portOfInode.get(inode);
      if (port !== undefined) owners.set(port, i);
    }
  });
  return owners;
}

/** Every running replica of every group has applied its leader's commit (as waitApplied). */
function allApplied(sts: readonly NodeStatus[]): boolean {
  const commit = new Map<number, number>();
  for (const st of sts)
    for (const g of st.groups)
      if (g.role === 'leader')
        commit.set(g.groupId, Math.max(commit.get(g.groupId) ?? 0, g.commit));
  return sts.every((st) => st.groups.every((g) => g.applied >= (commit.get(g.groupId) ?? 0)));
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
    const jobIdOf = (prefix: string, i: number): string =>
      `${prefix}-${String(i).padStart(6, '0')}`;
    /**
     * Fires per node (in cluster.nodes' order) of a spike `<prefix>-NNNNNN` of `count` jobs: each
     * job hashed to its group (as createSpike does), each group to the node leading it in `by`.
     */
    const sharesOf = (prefix: string, count: number, by: Map<number, string>): number[] => {
      const shares = cluster.nodes.map(() => 0);
      for (let i = 0; i < count; i++) {
        const groupId = lookupRange(ranges, hashShardKey(`acme/${jobIdOf(prefix, i)}`)).groupId;
        const k = Math.max(
          0,
          cluster.nodes.findIndex((n) => n.id === by.get(groupId)),
        );
        shares[k] = (shares[k] ?? 0) + 1;
      }
      return shares;
    };
    const describeShares = (shares: readonly number[]): string =>
      cluster.nodes.map((n, i) => `${n.id} ${fmt(shares[i] ?? 0)}`).join(', ');

    /**
     * `count` one-off jobs named `<prefix>-NNNNNN`, all due at one whole second far enough ahead,
     * and `extraMs` further (time to let the cluster settle and measure it idle before the slot).
     */
    const createSpike = async (
      prefix: string,
      count: number,
      extraMs = 0,
    ): Promise<{ slotMs: number; createdMs: number }> => {
      const createMs = Math.max(8000, count * 0.6);
      const slotMs = Math.ceil((Date.now() + createMs + 4000 + extraMs) / 1000) * 1000;
      const slot = new Date(slotMs).toISOString();
      const jobs: { groupId: number; body: Record<string, unknown> }[] = [];
      for (let i = 0; i < count; i++) {
        const jobId = jobIdOf(prefix, i);
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

    /**
     * Waits until the sink has `count` receipts (or 60 s passed) and no more arrive; `onAll` runs
     * as soon as the count is reached (or the 60 s passed).
     */
    const awaitReceipts = async (
      count: number,
      slotMs: number,
      onAll?: () => void,
    ): Promise<SinkStats> => {
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
      onAll?.();
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

    // Every reference is measured twice, just before tickraft's spike and just after it, and the
    // ratios are to the mean of the two: this machine's speed drifts by tens of percent within
    // minutes, and one measure after the spike put that drift wholly into the ratio.
    // Both references get the same warm-up as the cluster: undici's code in their processes is
    // compiled by V8 before the measured burst, as the nodes' is before their measured spike.
    // The same topology (3 processes, each sending its node's share) is measured nearest the
    // spike on both sides: before it, one process then three; after it, three then one.
    const one = new BareSenders(sink.origin, 1, BARE_CONNECTIONS);
    const three = new BareSenders(sink.origin, 3, nodeConnections);
    // The measured spike's fires per node, from the leaders now (checked again once created).
    const sharesBefore = sharesOf('spike', JOBS, led);
    let bareWarmup: SpikeSide | undefined;
    let ceilingBefore: SpikeSide;
    let ceiling: SpikeSide;
    let sameBefore: SpikeSide;
    let sameAfter: SpikeSide;
    try {
      if (WARMUP > 0) {
        bareWarmup = await one.burst('warm', [WARMUP]);
        log(describeSide('bare Pool warm-up burst', bareWarmup, WARMUP));
        await three.burst('warm', evenShares(WARMUP, 3));
      }
      // One burst of the measured size first, unmeasured: without it the burst before the
      // spike was slower than the one after it in 5 runs of 6 (after ÷ before 0.65-0.94), the
      // sink and the client being less warm than they are once the spike has run.
      await one.burst('bare-settle', [JOBS]);
      ceilingBefore = await one.burst('bare-before', [JOBS]);
      await three.burst('same-settle', sharesBefore);
      sameBefore = await three.burst('same-before', sharesBefore);
      await sinkGet(sink.origin, '/reset');
    } catch (err) {
      one.close();
      three.close();
      throw err;
    }

    const termsBefore = await groupTerms(cluster);
    // 5 s more than the look-ahead needs: the cluster settles (every replica applies the jobs)
    // and is measured idle for ~3 s before the 4 s ahead of the slot that count as the spike's.
    const { slotMs, createdMs } = await createSpike('spike', JOBS, 5000);
    const termsCreated = await groupTerms(cluster);
    const changedCreating = [...termsCreated].filter(
      ([g, term]) => (termsBefore.get(g) ?? 0) !== term,
    ).length;
    const ledAtSlot = await cluster.leaders();
    const shares = sharesOf('spike', JOBS, ledAtSlot);
    const marginMs = slotMs - Date.now();
    log(
      `spike through 3 processes, ${GROUPS} groups: ${fmt(JOBS)} jobs created in ${fmt(createdMs)} ms (${fmt((JOBS / createdMs) * 1000)} jobs/s); slot in ${fmt(marginMs)} ms`,
    );
    if (marginMs < 3500) log('  WARNING: created too late for the look-ahead; raise the margin');
    if (shares.some((n, i) => n !== sharesBefore[i]))
      log(
        `  leaders moved while creating: fires per node ${describeShares(shares)} (the reference before the spike sent ${describeShares(sharesBefore)})`,
      );
    // Settled: every replica has applied the jobs (bounded, to leave the idle measure ≥ 1 s).
    const windowStart = slotMs - 4000;
    for (;;) {
      const sts = await Promise.all(cluster.nodes.map((n) => n.status(5000)));
      if (allApplied(sts) || Date.now() > windowStart - 1000) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    while (Date.now() < windowStart - 3000) await new Promise((r) => setTimeout(r, 20));
    const idleStart = Date.now();
    const cpuTraces = cluster.nodes.map((n) => traceCpu(n.proc?.pid ?? 0));
    while (Date.now() < windowStart) await new Promise((r) => setTimeout(r, 20));
    const stsBefore = await Promise.all(cluster.nodes.map((n) => n.status()));
    const cpuBefore = stsBefore.reduce((sum, st) => sum + st.cpuMs, 0);
    const resultsBefore = stsBefore.reduce((sum, st) => sum + st.schedulerResults, 0);
    let owners: Map<number, number> | undefined;
    const sinkPort = Number(new URL(sink.origin).port);
    const stats = await awaitReceipts(JOBS, slotMs, () => {
      // The nodes' connections to the sink, while they are surely still open.
      owners = socketOwners(
        cluster.nodes.map((n) => n.proc?.pid ?? 0),
        sinkPort,
      );
    });
    // Quiet again: every node's results count still for 1 s (its fires' results all proposed, or
    // still for 5 s) and every replica applied its leader's commit. The window ends at the first
    // poll of that still run; the bench's polls before it land in the window.
    let quietAt = 0;
    let resultsAfter = resultsBefore;
    {
      let last = -1;
      let lastApplied = false;
      const deadline = Date.now() + 60_000;
      for (;;) {
        const t = Date.now();
        const sts = await Promise.all(cluster.nodes.map((n) => n.status(5000)));
        const results = sts.reduce((sum, st) => sum + st.schedulerResults, 0);
        const applied = allApplied(sts);
        if (!applied) quietAt = 0;
        else if (!(lastApplied && results === last)) quietAt = t;
        [last, lastApplied] = [results, applied];
        const stillFor = quietAt === 0 ? 0 : t - quietAt;
        if (stillFor >= (results - resultsBefore >= stats.count - stats.dup ? 1000 : 5000)) break;
        if (t > deadline) {
          log('  WARNING: the cluster was not quiet within 60 s of the last receipt');
          quietAt = t;
          break;
        }
        await new Promise((r) => setTimeout(r, 250));
      }
      resultsAfter = last;
    }
    for (const c of cpuTraces) c.stop();
    const sum = (f: (c: ReturnType<typeof traceCpu>) => number): number =>
      cpuTraces.reduce((total, c) => total + f(c), 0);
    const drainCpuPerNode = cpuTraces.map((c) => c.at(stats.last) - c.at(slotMs));
    const drainCpuMs = drainCpuPerNode.reduce((a, b) => a + b, 0);
    const idleMeasuredMs = windowStart - idleStart;
    const clusterIdleCpuMsPerS =
      (sum((c) => c.at(windowStart) - c.at(idleStart)) * 1000) / idleMeasuredMs;
    const clusterCpuWindowMs = sum((c) => c.at(quietAt) - c.at(windowStart));
    const clusterCpuUsPerFire =
      ((clusterCpuWindowMs - (clusterIdleCpuMsPerS * (quietAt - windowStart)) / 1000) * 1000) /
      (stats.count - stats.dup);
    const terms = await groupTerms(cluster);
    const changed = [...terms].filter(([g, term]) => (termsCreated.get(g) ?? 0) !== term).length;
    log(
      `  leader changes: ${changedCreating} of ${GROUPS + 1} groups changed term while creating, ${changed} during the spike`,
    );
    const ours = sideOf(stats, slotMs, drainCpuMs);
    log(describeSide('tickraft', ours, JOBS));
    const nodeShares: Record<string, number> = {};
    cluster.nodes.forEach((n, i) => (nodeShares[n.id] = shares[i] ?? 0));
    let nodeSent: Record<string, number> | undefined;
    if (owners !== undefined) {
      const sent: Record<string, number> = { unattributed: 0 };
      for (const n of cluster.nodes) sent[n.id] = 0;
      for (const [port, count] of Object.entries(stats.ports)) {
        const owner = cluster.nodes[owners.get(Number(port)) ?? -1];
        const key = owner === undefined ? 'unattributed' : owner.id;
        sent[key] = (sent[key] ?? 0) + count;
      }
      nodeSent = sent;
    }
    log(
      `  fires per node: ${describeShares(shares)} (the spike's jobs hashed to their groups, each group to its leader at the slot); ` +
        (nodeSent === undefined
          ? 'what each node sent is not measured here (no /proc)'
          : `sent, as the sink saw them (its client ports traced to the node owning the socket): ${Object.entries(
              nodeSent,
            )
              .map(([id, n]) => `${id} ${fmt(n)}`)
              .join(', ')}`),
    );
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
      sameAfter = await three.burst('same-after', shares);
      ceiling = await one.burst('bare', [JOBS]);
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
      `  connections to the sink: tickraft ${nodeConnections} per node (3 nodes, ${3 * nodeConnections} in all), bare Pool ${BARE_CONNECTIONS}, bare 3 processes ${nodeConnections} each`,
    );
    log(describeSide('same topology (3 bare), before', sameBefore, JOBS));
    log(describeSide('same topology (3 bare), after', sameAfter, JOBS));
    const sameTopology = meanSide(sameBefore, sameAfter);
    log(
      `  same topology: ${fmt(sameTopology.drainMs)} ms to the last request, p99 ${fmt(sameTopology.lagP99Ms)} ms (mean of before and after; after ÷ before ${(sameAfter.drainMs / sameBefore.drainMs).toFixed(2)})`,
    );
    const drainRatioSameTopology = ours.drainMs / sameTopology.drainMs;
    const p99RatioSameTopology = ours.lagP99Ms / sameTopology.lagP99Ms;
    log(
      `  ratio to the same topology (3 bare processes, each sending its node's share): time to last fire ${drainRatioSameTopology.toFixed(2)}×, p99 lag ${p99RatioSameTopology.toFixed(2)}× (target ≤ 1.1× both)`,
    );
    const drainRatio = ours.drainMs / ceilingDrainMs;
    const p99Ratio = ours.lagP99Ms / ceilingP99Ms;
    log(
      `  ratio to the one-process ceiling: time to last fire ${drainRatio.toFixed(2)}×, p99 lag ${p99Ratio.toFixed(2)}× (context only); ` +
        `the same topology ${(sameTopology.drainMs / ceilingDrainMs).toFixed(2)}× of it`,
    );
    const bareCpuUsPerRequest = sameTopology.senderCpuUsPerRequest;
    const bareOneCpuUsPerRequest =
      (ceilingBefore.senderCpuUsPerRequest + ceiling.senderCpuUsPerRequest) / 2;
    const cpuRatio = clusterCpuUsPerFire / bareCpuUsPerRequest;
    const cpuRatioOne = clusterCpuUsPerFire / bareOneCpuUsPerRequest;
    log(
      `  cluster CPU per fire (3 nodes, all threads, from 4 s before the slot until quiet again ${fmt(quietAt - slotMs)} ms after it, ` +
        `results ${fmt(resultsAfter - resultsBefore)}): ${fmt(clusterCpuWindowMs)} ms less idle ${clusterIdleCpuMsPerS.toFixed(1)} ms/s ` +
        `(measured over ${fmt(idleMeasuredMs)} ms) = ${clusterCpuUsPerFire.toFixed(1)} µs per fire`,
    );
    log(
      `  bare CPU per request (burst to last receipt, mean of before and after): 3 processes ${bareCpuUsPerRequest.toFixed(1)} µs, one process ${bareOneCpuUsPerRequest.toFixed(1)} µs; ` +
        `cluster ÷ 3-process bare ${cpuRatio.toFixed(2)}× (target ≤ 1.5×), ÷ one-process bare ${cpuRatioOne.toFixed(2)}× (context only)`,
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
      splitCeiling: sameAfter,
      drainRatio,
      p99Ratio,
      nodeShares,
      nodeSent,
      sameTopologyBefore: sameBefore,
      sameTopologyAfter: sameAfter,
      sameTopology,
      drainRatioSameTopology,
      p99RatioSameTopology,
      clusterCpuUsPerFire,
      clusterCpuWindowMs,
      clusterIdleCpuMsPerS,
      idleMeasuredMs,
      clusterQuietMs: quietAt - slotMs,
      bareCpuUsPerRequest,
      bareOneCpuUsPerRequest,
      cpuRatio,
      cpuRatioOne,
    };
  } finally {
    cluster.cleanup();
    sink.child.kill();
  }
}

/** `npm run bench`'s rows for one spike: the same-topology ratios and CPU per fire, judged. */
export function spikeRows(s: SpikeResult): Row[] {
  const same = s.sameTopology;
  const rows: Row[] = [
    {
      figure: `:00 spike (${fmt(s.jobs)} jobs): tickraft lag p50 / p99 / max; time to last fire`,
      measured: `${fmt(s.tickraft.lagP50Ms)} / ${fmt(s.tickraft.lagP99Ms)} / ${fmt(s.tickraft.lagMaxMs)} ms; ${fmt(s.tickraft.drainMs)} ms`,
      target: '',
      met: '',
    },
    {
      figure: "  3 bare processes, each sending its node's share (mean of before and after)",
      measured: `lag p99 ${fmt(same.lagP99Ms)} ms; last after ${fmt(same.drainMs)} ms (shares ${Object.values(s.nodeShares).map(fmt).join(' / ')})`,
      target: '',
      met: '',
    },
    {
      figure: '  time to last fire, tickraft ÷ the same topology',
      measured: `${s.drainRatioSameTopology.toFixed(2)}×`,
      target: '≤ 1.1×',
      met: met(s.drainRatioSameTopology <= 1.1),
    },
    {
      figure: '  p99 lag, tickraft ÷ the same topology',
      measured: `${s.p99RatioSameTopology.toFixed(2)}×`,
      target: '≤ 1.1×',
      met: met(s.p99RatioSameTopology <= 1.1),
    },
    {
      figure: "  whole cluster's CPU per fire ÷ bare CPU per request (3 processes)",
      measured: `${fmt(s.clusterCpuUsPerFire)} ÷ ${fmt(s.bareCpuUsPerRequest)} µs = ${s.cpuRatio.toFixed(2)}×`,
      target: '≤ 1.5×',
      met: met(s.cpuRatio <= 1.5),
    },
    {
      figure: '  context: ÷ one bare process: time to last fire; p99; CPU per request',
      measured: `${s.drainRatio.toFixed(2)}×; ${s.p99Ratio.toFixed(2)}×; ${s.cpuRatioOne.toFixed(2)}× (${fmt(s.bareOneCpuUsPerRequest)} µs)`,
      target: '',
      met: '',
    },
    {
      figure: '  leader changes while creating / during the spike; duplicates',
      measured: `${s.leaderChangesCreating} / ${s.leaderChangesSpike}; ${fmt(s.tickraft.duplicates)}`,
      target: '',
      met: '',
    },
  ];
  return rows;
}
