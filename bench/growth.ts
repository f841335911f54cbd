/**
 * The growth table, for `npm run bench -- --only growth`: one 3-process cluster grown to each
 * size of `sizes` in turn (1M, 2M, 5M, 10M jobs by default), and at each size:
 *
 * - registration: the rate of the jobs added since the last size, through the public CreateJobs
 *   (batches of 1,000 spread round-robin over the nodes, `inflight` calls at a time), and the
 *   cluster's CPU per job;
 * - memory: each node's heap used and RSS after forced full collections (the nodes run with
 *   --expose-gc), minus the same before registration, per job per replica; and each node's RSS;
 * - GC pauses while firing: `fireRate` one-off jobs due every second for `fireWindowS` seconds,
 *   delivered to a sink in a process of its own; every node's garbage-collection pauses over the
 *   window (p50 / p99 / max, as V8 reports them to Node's performance timeline), and the fires'
 *   lag;
 * - restart-to-ready: kill -9 of one node, then a restart, until every group it hosts has
 *   applied the commit index its leader had when the node was killed and knows its leader: it
 *   could then vote and, being caught up, be elected. Split into the process's start (Node and
 *   the modules), opening the store (LevelDB, the log tails and the snapshots' bytes), restoring
 *   the snapshots, and the rest (replaying the entries after each snapshot, the elections and
 *   the catch-up from the leaders). The kill comes before the size's snapshot: the node
 *   replays whatever its groups applied since their last automatic snapshot (at most 10,000
 *   entries or 64 MiB of them per group), as a crash between snapshots would;
 * - snapshots: every node snapshots every group (DebugService.TakeSnapshots, one node at a
 *   time): the bytes per node and the time to encode (the node's loop waits) and to write them.
 *
 * The jobs are yearly cron jobs of one tenant (they never fire during a run): the state each
 * job costs. Figures only.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ApiCallError, type ApiClient } from '../src/api/client.js';
import { META_GROUP_ID } from '../src/placement/bootstrap-plan.js';
import { ProcCluster, sleep, type NodeStatus, type ProcNode } from '../test/helpers/cluster.js';
import { TEST_SECRET } from '../test/helpers/webhook-sink.js';
import { apiClients, describeLeaders, settleLeaders, waitApplied } from './bench-cluster.js';
import { fmt, machineContext, met, percentile, type Row } from './figures.js';
import { createBatch } from './registration.js';
import { startSinkProcess } from './sink-process.js';

export interface GrowthOptions {
  /** Cluster sizes to grow to, ascending. */
  readonly sizes: readonly number[];
  readonly groups: number;
  readonly inflight: number;
  /** One-off jobs due per second during the GC window. */
  readonly fireRate: number;
  readonly fireWindowS: number;
  readonly log: (line: string) => void;
}

export interface GrowthStep {
  readonly jobs: number;
  /** Jobs added for this size, and their rate through CreateJobs. */
  readonly added: number;
  readonly jobsPerSec: number;
  readonly clusterCpuUsPerJob: number;
  readonly failedCalls: number;
  readonly errors: readonly string[];
  readonly heapPerJobReplica: number;
  readonly rssPerJobReplica: number;
  /** The largest node's RSS and heap used after the collections, bytes. */
  readonly rssMaxBytes: number;
  readonly heapMaxBytes: number;
  readonly gc: {
    readonly fires: number;
    readonly received: number;
    readonly lagP50Ms: number;
    readonly lagP99Ms: number;
    readonly lagMaxMs: number;
    /** Over the nodes: the most pauses, the worst p99 and max. */
    readonly pauses: number;
    readonly pauseP50Ms: number;
    readonly pauseP99Ms: number;
    readonly pauseMaxMs: number;
  };
  readonly restart: RestartFigures;
  readonly snapshot: {
    /** Per node (the largest), bytes of all its groups' snapshots. */
    readonly bytesPerNode: number;
    /** The largest group's snapshot: bytes, encode and write ms. */
    readonly largestGroupBytes: number;
    readonly largestEncodeMs: number;
    readonly largestWriteMs: number;
    /** A node's whole state: the slowest node's sum of encode and of write times. */
    readonly nodeEncodeMs: number;
    readonly nodeWriteMs: number;
  };
}

export interface RestartFigures {
  readonly nodeId: string;
  /** Kill to every hosted group caught up with a known leader. */
  readonly readyMs: number;
  /** From the spawn: the node's start() finished (store and groups opened, listeners bound). */
  readonly startedMs: number;
  readonly storeOpenMs: number;
  readonly restoreMs: number;
  readonly restoreBytes: number;
  /** The process's own start before start() ran (Node, modules, configuration). */
  readonly bootMs: number;
}

export interface GrowthResult {
  readonly steps: readonly GrowthStep[];
  readonly groups: number;
  readonly fireWindowS: number;
  readonly bundled: boolean;
  readonly load: { readonly before: readonly number[]; readonly after: readonly number[] };
}

const TENANT = 'bench';
const FIRE_TENANT = 'bench-fire';
const URL_NEVER_CALLED = 'http://127.0.0.1:9/hooks/bench';
const BIN = fileURLToPath(new URL('../bin/tickraft', import.meta.url));

/** Counts receipts and their lag (receipt − slot); GET /stats, POST /reset. */
const SINK_SOURCE = `
const http = require('node:http');
let lags = [];
const server = http.createServer((req, res) => {
  if (req.url === '/stats') { lags.sort((a, b) => a - b); res.end(JSON.stringify(lags)); return; }
  if (req.url === '/reset') { lags = []; res.end('{}'); return; }
  req.resume();
  req.on('end', () => {
    lags.push(Date.now() - Date.parse(req.headers['tickraft-scheduled-for']));
    res.writeHead(200, { 'content-length': '2' });
    res.end('ok');
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;

/** The i-th job: a yearly cron (minute and hour vary), far from any run's time. */
function jobAt(i: number): Record<string, unknown> {
  return {
    jobId: `g-${String(i).padStart(8, '0')}`,
    spec: {
      tenant: TENANT,
      schedule: `${i % 60} ${Math.floor(i / 60) % 24} 1 1 *`,
      target: { url: URL_NEVER_CALLED },
    },
  };
}

async function clusterCpuMs(cluster: ProcCluster): Promise<number> {
  let total = 0;
  for (const n of cluster.nodes) if (n.running) total += (await n.status(10_000)).cpuMs;
  return total;
}

/** Jobs [from, to) through CreateJobs, batches of 1,000, `inflight` calls, a line every 10 s. */
async function register(
  clients: readonly ApiClient[],
  from: number,
  to: number,
  inflight: number,
  log: (line: string) => void,
): Promise<{ created: number; failedCalls: number; errors: string[]; elapsedMs: number }> {
  let next = from;
  let created = 0;
  let failedCalls = 0;
  let calls = 0;
  const errors: string[] = [];
  const t0 = performance.now();
  let reported = t0;
  const worker = async (w: number): Promise<void> => {
    while (next < to) {
      const start = next;
      const end = Math.min(to, start + 1000);
      next = end;
      const jobs: Record<string, unknown>[] = [];
      for (let i = start; i < end; i++) jobs.push(jobAt(i));
      const client = clients[(calls++ + w) % clients.length]!;
      try {
        // Not `created += await …`: that reads `created` before the wait, losing other calls'.
        const r = await createBatch(client, jobs);
        created += r.created;
      } catch (err) {
        failedCalls++;
        if (errors.length < 5)
          errors.push(
            `jobs ${start}-${end - 1}: ${err instanceof ApiCallError ? `${err.code} ${err.message}` : String(err)}`,
          );
      }
      const now = performance.now();
      if (now - reported > 10_000) {
        reported = now;
        log(`    ${fmt(from + created)} jobs, ${fmt((created / (now - t0)) * 1000)} jobs/s so far`);
      }
    }
  };
  await Promise.all(Array.from({ length: inflight }, (_, w) => worker(w)));
  return { created, failedCalls, errors, elapsedMs: performance.now() - t0 };
}

async function memoryOf(cluster: ProcCluster): Promise<NodeStatus[]> {
  const out: NodeStatus[] = [];
  // One node at a time: collecting a large heap takes CPU the others would share.
  for (const n of cluster.nodes) out.push(await n.memory(300_000));
  return out;
}

/**
 * `rate` one-off jobs due at each of the next `windowS` whole seconds (created ahead through
 * the debug API's create-jobs, by each group's leader), fired at the sink; every node's GC pauses
 * over the window.
 */
async function gcWhileFiring(
  clients: readonly ApiClient[],
  sinkOrigin: string,
  sizeTag: string,
  rate: number,
  windowS: number,
  nodes: readonly ProcNode[],
): Promise<GrowthStep['gc']> {
  await fetch(`${sinkOrigin}/reset`);
  const firstSlot = Math.ceil((Date.now() + 8000) / 1000) * 1000;
  const jobs: Record<string, unknown>[] = [];
  for (let s = 0; s < windowS; s++) {
    const slot = new Date(firstSlot + s * 1000).toISOString();
    for (let i = 0; i < rate; i++) {
      const jobId = `f${sizeTag}-${s}-${i}`;
      jobs.push({
        jobId,
        spec: {
          tenant: FIRE_TENANT,
          schedule: `at ${slot}`,
          target: { url: `${sinkOrigin}/hook` },
        },
      });
    }
  }
  for (let i = 0; i < jobs.length; i += 1000)
    await createBatch(clients[(i / 1000) % clients.length]!, jobs.slice(i, i + 1000));
  if (Date.now() > firstSlot - 3500)
    throw new Error('growth: the GC window jobs were created too late for the look-ahead');
  const lastSlot = firstSlot + (windowS - 1) * 1000;
  while (Date.now() < firstSlot) await sleep(50);
  while (Date.now() < lastSlot + 3000) await sleep(200);
  const statuses = await Promise.all(nodes.map((n) => n.gcSince(firstSlot, 10_000)));
  const lags = (await (await fetch(`${sinkOrigin}/stats`)).json()) as number[];
  return {
    fires: jobs.length,
    received: lags.length,
    lagP50Ms: percentile(lags, 50),
    lagP99Ms: percentile(lags, 99),
    lagMaxMs: lags[lags.length - 1] ?? Number.NaN,
    pauses: Math.max(...statuses.map((s) => s.gcPauses)),
    pauseP50Ms: Math.max(...statuses.map((s) => s.gcPauseP50Ms)),
    pauseP99Ms: Math.max(...statuses.map((s) => s.gcPauseP99Ms)),
    pauseMaxMs: Math.max(...statuses.map((s) => s.gcPauseMaxMs)),
  };
}

/**
 * kill -9 of `node`, a restart at once, and the time until every group it hosts has applied the
 * commit index its leader had at the kill and knows a leader.
 */
async function restartToReady(cluster: ProcCluster, node: ProcNode): Promise<RestartFigures> {
  const commitAtKill = new Map<number, number>();
  const before = await Promise.all(cluster.nodes.map((n) => n.status(10_000)));
  for (const st of before)
    for (const g of st.groups)
      commitAtKill.set(g.groupId, Math.max(commitAtKill.get(g.groupId) ?? 0, g.commit));
  const hosted = new Set(before.find((s) => s.nodeId === node.id)!.groups.map((g) => g.groupId));
  const killedAt = performance.now();
  await node.kill9();
  node.start();
  const spawnedAt = performance.now();
  let st: NodeStatus | undefined;
  for (;;) {
    if (!node.running)
      throw new Error(`growth: ${node.id} exited on restart: ${node.stderr.slice(-600)}`);
    st = await node.status(2000).catch(() => undefined);
    if (
      st !== undefined &&
      st.startupStartedMs > 0 &&
      [...hosted].every((id) => {
        const g = st!.groups.find((x) => x.groupId === id);
        return g !== undefined && g.leader !== '' && g.applied >= (commitAtKill.get(id) ?? 0);
      })
    )
      break;
    if (performance.now() - killedAt > 600_000)
      throw new Error(`growth: ${node.id} not ready in 600 s`);
    await sleep(50);
  }
  const readyMs = performance.now() - killedAt;
  const bootMs = st.startupStartedMs - st.startupStoreOpenMs - st.startupGroupsOpenMs;
  return {
    nodeId: node.id,
    readyMs,
    startedMs: st.startupStartedMs + (spawnedAt - killedAt),
    storeOpenMs: st.startupStoreOpenMs,
    restoreMs: st.snapshotRestoreMs,
    restoreBytes: st.snapshotRestoreBytes,
    bootMs,
  };
}

export async function runGrowth(opts: GrowthOptions): Promise<GrowthResult> {
  const { log } = opts;
  const loadBefore = machineContext().load;
  const probe = spawnSync(process.execPath, [BIN, '--version'], { encoding: 'utf8' });
  const bundled = probe.status === 0 && probe.stderr === '';
  if (!bundled)
    log(
      `  WARNING: the nodes run their sources through tsx (start-up includes compiling): ${probe.stderr.trim()}`,
    );
  const sink = await startSinkProcess(SINK_SOURCE);
  const cluster = await ProcCluster.create({ groups: opts.groups });
  let clients: ApiClient[] = [];
  const steps: GrowthStep[] = [];
  try {
    cluster.startAll();
    await cluster.waitReady(60_000);
    clients = await apiClients(cluster);
    for (const tenantId of [TENANT, FIRE_TENANT])
      await clients[0]!.call('TenantService', 'CreateTenant', {
        tenantId,
        signingSecret: TEST_SECRET,
      });
    const led = await settleLeaders(cluster, opts.groups);
    log(`  ${opts.groups} data groups, led per node: ${describeLeaders(led)}`);
    await waitApplied(cluster);
    const baseline = await memoryOf(cluster);
    let have = 0;
    for (const size of opts.sizes) {
      log(`  growing to ${fmt(size)} jobs`);
      const cpu0 = await clusterCpuMs(cluster);
      const reg = await register(clients, have, size, opts.inflight, log);
      const cpuUs = (((await clusterCpuMs(cluster)) - cpu0) * 1000) / Math.max(1, reg.created);
      have = size;
      const jobsPerSec = (reg.created / reg.elapsedMs) * 1000;
      log(
        `    registered ${fmt(reg.created)} in ${fmt(reg.elapsedMs)} ms: ${fmt(jobsPerSec)} jobs/s, cluster CPU ${fmt(cpuUs)} µs per job` +
          (reg.failedCalls > 0
            ? `; ${reg.failedCalls} calls FAILED: ${reg.errors.join('; ')}`
            : ''),
      );
      await waitApplied(cluster, 600_000);
      const mem = await memoryOf(cluster);
      const dataReplicas = mem.reduce(
        (n, st) => n + st.groups.filter((g) => g.groupId !== META_GROUP_ID).length,
        0,
      );
      const dataGroups = new Set(
        mem.flatMap((st) => st.groups.map((g) => g.groupId)).filter((g) => g !== META_GROUP_ID),
      ).size;
      const denominator = size * (dataReplicas / dataGroups);
      const heapPerJobReplica =
        mem.reduce((s, st, i) => s + st.heapUsedBytes - baseline[i]!.heapUsedBytes, 0) /
        denominator;
      const rssPerJobReplica =
        mem.reduce((s, st, i) => s + st.rssBytes - baseline[i]!.rssBytes, 0) / denominator;
      const rssMaxBytes = Math.max(...mem.map((st) => st.rssBytes));
      const heapMaxBytes = Math.max(...mem.map((st) => st.heapUsedBytes));
      log(
        `    memory: heap ${fmt(heapPerJobReplica)} B, RSS ${fmt(rssPerJobReplica)} B per job per replica; ` +
          mem
            .map(
              (st) => `${st.nodeId} RSS ${gib(st.rssBytes)} GiB, heap ${gib(st.heapUsedBytes)} GiB`,
            )
            .join(', '),
      );
      const gc = await gcWhileFiring(
        clients,
        sink.origin,
        String(size),
        opts.fireRate,
        opts.fireWindowS,
        cluster.nodes,
      );
      log(
        `    while firing ${fmt(opts.fireRate)}/s for ${opts.fireWindowS} s: ${fmt(gc.received)}/${fmt(gc.fires)} received, lag p50 ${fmt(gc.lagP50Ms)} / p99 ${fmt(gc.lagP99Ms)} / max ${fmt(gc.lagMaxMs)} ms; ` +
          `GC pauses (worst node) ${fmt(gc.pauses)}, p50 ${gc.pauseP50Ms.toFixed(1)} / p99 ${gc.pauseP99Ms.toFixed(1)} / max ${gc.pauseMaxMs.toFixed(1)} ms`,
      );
      // The last node: it leads a third of the groups, which fail over meanwhile.
      const restartNode = cluster.nodes[cluster.nodes.length - 1]!;
      const restart = await restartToReady(cluster, restartNode);
      log(
        `    kill -9 + restart of ${restart.nodeId}: ready after ${fmt(restart.readyMs)} ms ` +
          `(start() done ${fmt(restart.startedMs)} ms after the kill: store opened in ${fmt(restart.storeOpenMs)} ms, ` +
          `${mib(restart.restoreBytes)} MiB of snapshots restored in ${fmt(restart.restoreMs)} ms; ` +
          `the rest: replay, elections, catch-up)`,
      );
      await settleLeaders(cluster, opts.groups, 30_000);
      await waitApplied(cluster, 600_000);
      const snaps = [];
      for (const n of cluster.nodes) snaps.push({ node: n.id, taken: await n.takeSnapshots() });
      const all = snaps.flatMap((s) => s.taken);
      const largest = all.reduce((a, b) => (b.bytes > a.bytes ? b : a), all[0]!);
      const perNode = snaps.map((s) => ({
        bytes: s.taken.reduce((n, t) => n + t.bytes, 0),
        encodeMs: s.taken.reduce((n, t) => n + t.encodeMs, 0),
        writeMs: s.taken.reduce((n, t) => n + t.writeMs, 0),
      }));
      const snapshot = {
        bytesPerNode: Math.max(...perNode.map((p) => p.bytes)),
        largestGroupBytes: largest?.bytes ?? 0,
        largestEncodeMs: largest?.encodeMs ?? 0,
        largestWriteMs: largest?.writeMs ?? 0,
        nodeEncodeMs: Math.max(...perNode.map((p) => p.encodeMs)),
        nodeWriteMs: Math.max(...perNode.map((p) => p.writeMs)),
      };
      log(
        `    snapshots: ${mib(snapshot.bytesPerNode)} MiB per node; largest group ${mib(snapshot.largestGroupBytes)} MiB, encoded in ${fmt(snapshot.largestEncodeMs)} ms, written in ${fmt(snapshot.largestWriteMs)} ms; ` +
          `a whole node ${fmt(snapshot.nodeEncodeMs)} ms encoding, ${fmt(snapshot.nodeWriteMs)} ms writing`,
      );
      steps.push({
        jobs: size,
        added: reg.created,
        jobsPerSec,
        clusterCpuUsPerJob: cpuUs,
        failedCalls: reg.failedCalls,
        errors: reg.errors,
        heapPerJobReplica,
        rssPerJobReplica,
        rssMaxBytes,
        heapMaxBytes,
        gc,
        restart,
        snapshot,
      });
    }
    await Promise.all(cluster.nodes.map((n) => n.term()));
    return {
      steps,
      groups: opts.groups,
      fireWindowS: opts.fireWindowS,
      bundled,
      load: { before: loadBefore, after: machineContext().load },
    };
  } finally {
    for (const c of clients) c.close();
    cluster.cleanup();
    sink.child.kill();
  }
}

const gib = (bytes: number): string => (bytes / 2 ** 30).toFixed(2);
const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);

/** The table's rows: one block per size, each target judged at the sizes it is stated for. */
export function growthRows(r: GrowthResult): Row[] {
  const rows: Row[] = [
    {
      figure: `growth: one 3-node cluster, ${r.groups} groups, grown size by size (a node killed and restarted at each)`,
      measured: r.bundled ? '' : 'nodes ran their sources through tsx (dist/ stale)',
      target: '',
      met: '',
    },
  ];
  for (const s of r.steps) {
    const at10M = s.jobs >= 10_000_000;
    const judged = (ok: boolean): string => (at10M ? met(ok) : '');
    rows.push(
      {
        figure: `  ${fmt(s.jobs)} jobs: registration of the last ${fmt(s.added)}; cluster CPU per job`,
        measured: `${fmt(s.jobsPerSec)} jobs/s; ${fmt(s.clusterCpuUsPerJob)} µs`,
        target: '',
        met: '',
      },
      {
        figure: '    heap / RSS per job per replica; largest node RSS',
        measured: `${fmt(s.heapPerJobReplica)} / ${fmt(s.rssPerJobReplica)} B; ${(s.rssMaxBytes / 2 ** 30).toFixed(2)} GiB`,
        target: at10M ? 'RSS ≤ 2.5 GiB per node at 10M' : '',
        met: judged(s.rssMaxBytes <= 2.5 * 2 ** 30),
      },
      {
        figure: '    snapshot per node; largest group: size, encode, write',
        measured: `${(s.snapshot.bytesPerNode / 2 ** 20).toFixed(0)} MiB; ${(s.snapshot.largestGroupBytes / 2 ** 20).toFixed(1)} MiB, ${fmt(s.snapshot.largestEncodeMs)} ms, ${fmt(s.snapshot.largestWriteMs)} ms`,
        target: '',
        met: '',
      },
      {
        figure: `    GC pause p50 / p99 / max while firing ${fmt(s.gc.fires)} fires over ${r.fireWindowS} s (worst node)`,
        measured: `${s.gc.pauseP50Ms.toFixed(1)} / ${s.gc.pauseP99Ms.toFixed(1)} / ${s.gc.pauseMaxMs.toFixed(1)} ms (${fmt(s.gc.pauses)} pauses); fire lag p99 ${fmt(s.gc.lagP99Ms)} ms`,
        target: at10M ? 'p99 ≤ 50 ms at 10M' : '',
        met: judged(s.gc.pauseP99Ms <= 50),
      },
      {
        figure: '    kill -9 to ready: total (start-up done; store open, snapshots restored)',
        measured: `${fmt(s.restart.readyMs)} ms (${fmt(s.restart.startedMs)}; ${fmt(s.restart.storeOpenMs)}, ${fmt(s.restart.restoreMs)} ms for ${(s.restart.restoreBytes / 2 ** 20).toFixed(0)} MiB)`,
        target: at10M ? '≤ 30 s at 10M' : '',
        met: judged(s.restart.readyMs <= 30_000),
      },
    );
  }
  return rows;
}

/** What went wrong rather than slow: jobs not created, fires not delivered. */
export function growthProblems(r: GrowthResult): string[] {
  const out: string[] = [];
  for (const s of r.steps) {
    if (s.failedCalls > 0)
      out.push(
        `growth (${fmt(s.jobs)}): ${s.failedCalls} CreateJobs calls failed: ${s.errors.join('; ')}`,
      );
    if (s.gc.received < s.gc.fires)
      out.push(
        `growth (${fmt(s.jobs)}): ${fmt(s.gc.received)} of ${fmt(s.gc.fires)} fires reached the sink`,
      );
  }
  return out;
}
