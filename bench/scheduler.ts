/**
 * `npm run bench:scheduler`: figures, never assertions.
 *
 * 1. In one process: how many fires per second the dispatcher plans (intents) and hands out
 *    (deliveries), with the state machine applying its own proposals; no I/O.
 * 2. A spike through a real 3-process cluster: `--jobs` one-off jobs (default 20,000; try
 *    `--jobs 40000`) all due in the same second, delivered to a local sink process that records
 *    each receipt. Printed: lag from the slot to receipt (p50 / p99 / max) and the time until the
 *    last fire, next to the ceiling measured in the same run: a bare undici Pool sending the
 *    same number of requests (same size, same headers) to the same sink, all issued at once.
 */
import { startSinkProcess } from './sink-process.js';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { SeededRand } from '../src/base/rand.js';
import { GroupDispatcher } from '../src/scheduler/dispatcher.js';
import type { JobSpec } from '../src/scheduler/model.js';
import { SchedulerStateMachine } from '../src/scheduler/state-machine.js';
import { planRetry } from '../src/delivery/backoff.js';
import { compileJobSpec } from '../src/api/job-spec.js';
import { TEST_SECRET } from '../test/helpers/webhook-sink.js';
import { ProcCluster, type ProcNode } from '../test/helpers/cluster.js';
import { META_GROUP_ID, planBootstrap } from '../src/placement/bootstrap-plan.js';
import { hashShardKey } from '../src/placement/hash.js';
import { lookupRange, splitRing } from '../src/placement/ring.js';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '20000' },
    groups: { type: 'string', default: '16' },
    'plan-jobs': { type: 'string', default: '200000' },
    'skip-cluster': { type: 'boolean', default: false },
  },
});
const JOBS = Number(values.jobs);
const GROUPS = Number(values.groups);
const PLAN_JOBS = Number(values['plan-jobs']);

const gc = (globalThis as { gc?: () => void }).gc;
const gcNote = gc ? '' : '; run with --expose-gc for exact figures';

/** Heap in use after a full collection (when the process was started with --expose-gc). */
function settledHeap(): number {
  gc?.();
  gc?.();
  return process.memoryUsage().heapUsed;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en');

// ---------------------------------------------------------------------------------------
// 1. In-process planning and dispatch

function inProcess(): void {
  const T = Date.UTC(2026, 0, 1, 12, 0, 0);
  const spec: JobSpec = compileJobSpec(
    {
      tenant: 'acme',
      name: 'x',
      schedule: `at 2026-01-01T12:00:00Z`,
      target: { url: 'http://127.0.0.1:9/h' },
    },
    T - 60_000,
  ).spec;
  const heapAtStart = settledHeap();
  const sm = new SchedulerStateMachine();
  for (let i = 0; i < PLAN_JOBS; i++) {
    sm.applyCommand({
      op: 'create-job',
      atMs: T - 60_000,
      jobId: `j${i}`,
      spec,
      nextFireAtMs: T,
      requestId: undefined,
    });
  }
  const rand = new SeededRand(1);
  const d = new GroupDispatcher(sm, {
    startMs: T - 60_000,
    retryAt: (job, attempt, slot, now, ra) => planRetry(job.retry, attempt, slot, now, ra, rand),
  });
  const leader = { term: 1, leaseValid: true, caughtUp: true };
  const heapJobs = settledHeap() - heapAtStart;
  let t0 = performance.now();
  let planned = 0;
  for (let now = T - 2900; planned < PLAN_JOBS; now += 10) {
    const s = d.step(now, leader);
    for (const p of s.proposals) {
      sm.applyCommand(p);
      if (p.op === 'fire-intents') planned += p.intents.length;
      d.proposalSettled(p, 'committed', 1);
    }
    d.afterApply();
  }
  const planMs = performance.now() - t0;
  t0 = performance.now();
  let handed = 0;
  const orders = [];
  for (let now = T; handed < PLAN_JOBS; now += 10) {
    const s = d.step(now, leader);
    handed += s.deliveries.length;
    orders.push(...s.deliveries);
  }
  const dispatchMs = performance.now() - t0;
  t0 = performance.now();
  for (const o of orders)
    d.attemptDone(
      o,
      { outcome: 'success', statusCode: 200, durationMs: 3, isProvablyUndelivered: false },
      T + 50,
    );
  const s = d.step(T + 50, leader);
  for (const p of s.proposals) sm.applyCommand(p);
  d.afterApply();
  const resultMs = performance.now() - t0;
  const heapAll = settledHeap() - heapAtStart;
  console.log(`in-process, ${fmt(PLAN_JOBS)} jobs due in the same second:`);
  console.log(
    `  plan (intents proposed+applied)   ${fmt((planned / planMs) * 1000).padStart(12)} fires/s  (${planMs.toFixed(0)} ms)`,
  );
  console.log(
    `  dispatch (orders handed out)      ${fmt((handed / dispatchMs) * 1000).padStart(12)} fires/s  (${dispatchMs.toFixed(0)} ms)`,
  );
  console.log(
    `  results (proposed+applied)        ${fmt((handed / resultMs) * 1000).padStart(12)} fires/s  (${resultMs.toFixed(0)} ms)`,
  );
  console.log(
    `  heap per job (this replica, after GC${gcNote}): ${fmt(heapJobs / PLAN_JOBS)} B registered, ` +
      `${fmt(heapAll / PLAN_JOBS)} B with its run and dispatcher indexes`,
  );
}

// ---------------------------------------------------------------------------------------
// 2. The spike through real processes

/** The sink: records slot-to-receipt lag from `tickraft-scheduled-for`; GET /stats, POST /reset. */
const SINK_SOURCE = `
const http = require('node:http');
let lags = [], first = 0, last = 0, ids = new Set(), dup = 0;
const server = http.createServer((req, res) => {
  if (req.url === '/stats') {
    lags.sort((a, b) => a - b);
    res.end(JSON.stringify({ count: lags.length, dup, lags, first, last }));
    return;
  }
  if (req.url === '/reset') { lags = []; first = 0; last = 0; ids = new Set(); dup = 0; res.end('{}'); return; }
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
}

function startSink(): ReturnType<typeof startSinkProcess> {
  return startSinkProcess(SINK_SOURCE);
}

async function sinkGet(origin: string, path: string): Promise<SinkStats> {
  const res = await fetch(`${origin}${path}`);
  return (await res.json()) as SinkStats;
}

function summarize(
  name: string,
  s: SinkStats,
  slotMs: number,
  n: number,
): { drainMs: number; p99: number } {
  const drainMs = s.last - slotMs;
  const p99 = percentile(s.lags, 99);
  console.log(
    `  ${name.padEnd(26)} received ${fmt(s.count)}/${fmt(n)} (dup ${s.dup}), last after ${fmt(drainMs)} ms, ` +
      `lag p50 ${fmt(percentile(s.lags, 50))} ms, p99 ${fmt(p99)} ms, max ${fmt(s.lags[s.lags.length - 1] ?? NaN)} ms`,
  );
  console.log(
    `  ${''.padEnd(26)} first ${fmt(s.lags[0] ?? NaN)} ms, p1 ${fmt(percentile(s.lags, 1))}, p10 ${fmt(percentile(s.lags, 10))}, p25 ${fmt(percentile(s.lags, 25))}, p75 ${fmt(percentile(s.lags, 75))} ms`,
  );
  return { drainMs, p99 };
}

/** The ceiling: the same count of same-sized requests from a bare undici Pool, issued at once. */
async function bareClient(origin: string, n: number): Promise<SinkStats & { slotMs: number }> {
  await sinkGet(origin, '/reset');
  const pool = new Pool(origin, { connections: 128 });
  const body = JSON.stringify({
    jobId: 'spike-000000',
    tenant: 'acme',
    fireId: 'spike-000000:1',
    slot: new Date().toISOString(),
    slotMs: 0,
    attempt: 1,
    fencingToken: 33554432,
    payload: {},
  });
  const slotMs = Date.now();
  const slot = new Date(slotMs).toISOString();
  const sends: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) {
    sends.push(
      pool
        .request({
          method: 'POST',
          path: '/hook',
          headers: {
            'content-type': 'application/json',
            'idempotency-key': `bare-${i}`,
            'tickraft-scheduled-for': slot,
            'tickraft-fencing-token': '33554432',
            'tickraft-attempt': '1',
            'webhook-id': `bare-${i}`,
            'webhook-timestamp': String(Math.floor(slotMs / 1000)),
            'webhook-signature': 'v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=',
          },
          body,
        })
        .then((r) => r.body.dump()),
    );
  }
  await Promise.all(sends);
  await pool.close();
  return { ...(await sinkGet(origin, '/stats')), slotMs };
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

async function spike(): Promise<void> {
  const sink = await startSink();
  const cluster = await ProcCluster.create({
    groups: GROUPS,
    extraArgs: (process.env['BENCH_NODE_FLAGS'] ?? '').split(' ').filter((a) => a !== ''),
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
    const leaders = new Map<number, ProcNode>();
    for (const [groupId, id] of led) leaders.set(groupId, cluster.node(id));
    const perNode = new Map<string, number>();
    for (const [groupId, id] of led)
      if (groupId !== META_GROUP_ID) perNode.set(id, (perNode.get(id) ?? 0) + 1);
    console.log(
      `  data groups led per node: ${[...perNode].map(([id, n]) => `${id} ${n}`).join(', ')}`,
    );
    const ranges = splitRing(GROUPS, META_GROUP_ID + 1);
    const createMs = Math.max(8000, JOBS * 0.6);
    const slotMs = Math.ceil((Date.now() + createMs + 4000) / 1000) * 1000;
    const slot = new Date(slotMs).toISOString();
    const jobs: { groupId: number; body: Record<string, unknown> }[] = [];
    for (let i = 0; i < JOBS; i++) {
      const jobId = `spike-${String(i).padStart(6, '0')}`;
      const spec = {
        tenant: 'acme',
        name: jobId,
        schedule: `at ${slot}`,
        target: { url: `${sink.origin}/hook` },
      };
      jobs.push({
        groupId: lookupRange(ranges, hashShardKey(jobId)).groupId,
        body: { jobId, requestId: jobId, spec },
      });
    }
    const termsBefore = await groupTerms(cluster);
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
                  groupId: lookupRange(ranges, hashShardKey(String(body['jobId']))).groupId,
                  body,
                });
            }
          }
        }),
      );
      pending = failed;
      if (failed.length > 0) {
        await new Promise((r) => setTimeout(r, 200));
        for (const [groupId, id] of await cluster.leaders()) leaders.set(groupId, cluster.node(id));
      }
    }
    const createdMs = performance.now() - t0;
    const termsCreated = await groupTerms(cluster);
    const changedCreating = [...termsCreated].filter(
      ([g, term]) => (termsBefore.get(g) ?? 0) !== term,
    ).length;
    const marginMs = slotMs - Date.now();
    console.log(
      `spike through 3 processes, ${GROUPS} groups: ${fmt(JOBS)} jobs created in ${fmt(createdMs)} ms (${fmt((JOBS / createdMs) * 1000)} jobs/s); slot in ${fmt(marginMs)} ms`,
    );
    if (marginMs < 3500)
      console.log('  WARNING: created too late for the look-ahead; raise the margin');
    while (Date.now() < slotMs - 4000) await new Promise((r) => setTimeout(r, 20));
    const cpuBefore = await clusterCpuMs(cluster);
    const deadline = slotMs + 60_000;
    while (Date.now() < slotMs) await new Promise((r) => setTimeout(r, 5));
    const cpuAtSlot = await clusterCpuMs(cluster);
    let stats = await sinkGet(sink.origin, '/stats');
    while (stats.count < JOBS && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      stats = await sinkGet(sink.origin, '/stats');
      if (process.env['BENCH_TRACE'] === '1' && Date.now() > slotMs - 3500) {
        const sts = await Promise.all(cluster.nodes.map((n) => n.status()));
        console.log(
          `  t=${Date.now() - slotMs} received ${stats.count} | ` +
            sts
              .map(
                (st) =>
                  `${st.nodeId} proposed ${st.schedulerProposed} delivered ${st.schedulerDelivered} results ${st.schedulerResults} queued ${st.deliveryQueued} inflight ${st.deliveryInflight}`,
              )
              .join(' | '),
        );
      }
    }
    // Stragglers (retries) must not land in the ceiling's run: wait until the count is still.
    for (let last = -1; stats.count !== last && Date.now() < deadline;) {
      last = stats.count;
      await new Promise((r) => setTimeout(r, 1500));
      stats = await sinkGet(sink.origin, '/stats');
    }
    const terms = await groupTerms(cluster);
    const changed = [...terms].filter(([g, term]) => (termsCreated.get(g) ?? 0) !== term).length;
    console.log(
      `  leader changes: ${changedCreating} of ${GROUPS + 1} groups changed term while creating, ${changed} during the spike`,
    );
    const ours = summarize('tickraft', stats, slotMs, JOBS);
    const cpuAfter = await clusterCpuMs(cluster);
    console.log(
      `  cluster CPU from 4 s before the slot to the last fire: ${fmt(cpuAfter - cpuBefore)} ms (${fmt(((cpuAfter - cpuBefore) * 1000) / JOBS)} µs per fire; ${fmt(cpuAtSlot - cpuBefore)} ms of it before the slot)`,
    );
    const bare = await bareClient(sink.origin, JOBS);
    const ceiling = summarize('bare undici Pool (ceiling)', bare, bare.slotMs, JOBS);
    console.log(
      `  ratio to the ceiling: time to last fire ${(ours.drainMs / ceiling.drainMs).toFixed(2)}×, p99 lag ${(ours.p99 / ceiling.p99).toFixed(2)}× (target ≤ 1.25× both)`,
    );
    // A graceful stop lets `TICKRAFT_NODE_ARGS=--cpu-prof` write the nodes' profiles.
    await Promise.all(cluster.nodes.map((n) => n.term()));
  } finally {
    cluster.cleanup();
    sink.child.kill();
  }
}

console.log(
  `machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}`,
);
inProcess();
if (!values['skip-cluster']) await spike();
