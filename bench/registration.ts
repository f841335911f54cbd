/**
 * Bulk registration and memory per job, for `npm run bench`: `jobs` jobs created through the
 * public gRPC API's CreateJobs (batches of `batch`), the client spreading batches over the three
 * nodes round-robin with `inflight` calls in flight; each node splits a batch by group and runs
 * or forwards each part on its group's leader, which validates and proposes it (answered once
 * committed and applied). Then every node's RSS and V8 heap used, each after a forced full
 * collection (the nodes run with --expose-gc), minus the same measure before registration,
 * summed over the nodes and divided by jobs × replicas per job.
 *
 * The jobs are yearly cron jobs (they never fire during a run) of one tenant, one target URL,
 * no name and the default payload: the state each job costs, not the size of its strings.
 */
import * as grpc from '@grpc/grpc-js';
import { TEST_SECRET } from '../test/helpers/webhook-sink.js';
import {
  ProcCluster,
  sleep,
  type ClusterSecurity,
  type NodeStatus,
} from '../test/helpers/cluster.js';
import { ApiCallError, type ApiClient } from '../src/api/client.js';
import { META_GROUP_ID } from '../src/placement/bootstrap-plan.js';
import { apiClients, describeLeaders, settleLeaders, waitApplied } from './bench-cluster.js';
import { fmt, percentile } from './figures.js';

export interface RegistrationOptions {
  readonly jobs: number;
  readonly groups: number;
  readonly batch: number;
  readonly inflight: number;
  /**
   * Jobs registered (another tenant, same shape) before the measure, on the fresh nodes: a
   * cluster that has served traffic has its hot paths compiled; 0 measures fresh nodes.
   */
  readonly warmupJobs?: number;
  readonly nodeFlags?: readonly string[];
  /** Authentication and TLS of the cluster (test/helpers/cluster.ts). @default 'auth' */
  readonly security?: ClusterSecurity;
  /**
   * After the measure right after registration, wait this long with the cluster idle and measure
   * again (0: don't): what a node settles to once V8's memory reducer has run.
   */
  readonly settleMs?: number;
  readonly log?: (line: string) => void;
}

export interface NodeMemory {
  readonly nodeId: string;
  readonly rssBefore: number;
  readonly rssAfter: number;
  readonly heapBefore: number;
  readonly heapAfter: number;
  /** V8's heap pages after registration (used or not). */
  readonly heapTotalAfter: number;
  /** Array buffers outside the heap after registration (typed-array columns, entry bytes). */
  readonly arrayBuffersAfter: number;
}

export interface RegistrationResult {
  readonly jobs: number;
  /** The warm-up before the measure, on fresh nodes (undefined: none). */
  readonly warmup?: {
    readonly jobs: number;
    readonly elapsedMs: number;
    readonly jobsPerSec: number;
    readonly clusterCpuUsPerJob: number;
  };
  /** Jobs the API acknowledged as created. */
  readonly created: number;
  /** Calls that failed, with the first few messages. */
  readonly failedCalls: number;
  readonly errors: readonly string[];
  readonly elapsedMs: number;
  readonly jobsPerSec: number;
  readonly batchP50Ms: number;
  readonly batchP99Ms: number;
  readonly batches: number;
  /** CPU of the three node processes while registering, per job created. */
  readonly clusterCpuUsPerJob: number;
  /** Groups whose term changed while registering (an election under load). */
  readonly leaderChanges: number;
  /** Batches sent again because a group had no leader or lost it (not errors). */
  readonly retriedBatches: number;
  readonly memory: {
    readonly nodes: readonly NodeMemory[];
    /** Every node ran its collections (started with --expose-gc). */
    readonly gcForced: boolean;
    readonly replicasPerJob: number;
    readonly heapPerJobReplica: number;
    readonly rssPerJobReplica: number;
    /** The same measure after `settleMs` idle, when asked for. */
    readonly settled?: {
      readonly afterMs: number;
      readonly nodes: readonly NodeMemory[];
      readonly heapPerJobReplica: number;
      readonly rssPerJobReplica: number;
    };
  };
}

const TENANT = 'bench';
const WARMUP_TENANT = 'bench-warmup';

/** The i-th job: a yearly cron (minute and hour vary), far from any run's time. */
function jobAt(i: number, url: string, tenant = TENANT): Record<string, unknown> {
  return {
    jobId: `${tenant === TENANT ? 'reg' : 'warm'}-${String(i).padStart(8, '0')}`,
    spec: {
      tenant,
      schedule: `${i % 60} ${Math.floor(i / 60) % 24} 1 1 *`,
      target: { url },
    },
  };
}

async function clusterCpuMs(cluster: ProcCluster): Promise<number> {
  let total = 0;
  for (const n of cluster.nodes) total += (await n.status(5000)).cpuMs;
  return total;
}

/** Worth another try: the group had no leader, lost it, or the call timed out. */
function retryable(err: unknown): boolean {
  return (
    err instanceof ApiCallError &&
    (err.status === grpc.status.UNAVAILABLE ||
      err.status === grpc.status.DEADLINE_EXCEEDED ||
      // The tenant's write rate: the answer says when to try again.
      err.code === 'TENANT_WRITE_RATE_EXCEEDED')
  );
}

/**
 * One batch through CreateJobs, as a careful bulk client sends it: a call that failed because a
 * group had no leader or lost it, or that the tenant's write rate turned away, is sent again
 * after the pause the answer asks for. A batch spans groups, so a failed
 * call may have created some of its jobs; when the retry answers ALREADY_EXISTS, the batch's
 * jobs go one by one (CreateJob), an existing job counting as created by the earlier call.
 * Any other error is the bench's failure.
 */
export async function createBatch(
  client: ApiClient,
  jobs: readonly Record<string, unknown>[],
): Promise<{ created: number; retried: boolean }> {
  for (let attempt = 0; ; attempt++) {
    try {
      const r = await client.call<{ created: number; duplicates: number }>(
        'JobService',
        'CreateJobs',
        { jobs },
        60_000,
      );
      // A retried call's jobs that the failed one created, when they carry request ids.
      return { created: r.created + r.duplicates, retried: attempt > 0 };
    } catch (err) {
      if (attempt > 0 && err instanceof ApiCallError && err.code === 'JOB_ALREADY_EXISTS') break;
      if (!retryable(err) || attempt === RETRIES_MAX) throw err;
      await sleep((err as ApiCallError).retryDelayMs ?? 300);
    }
  }
  let created = 0;
  for (let i = 0; i < jobs.length; i += 50) {
    await Promise.all(
      jobs.slice(i, i + 50).map(async (job) => {
        for (let attempt = 0; ; attempt++) {
          try {
            await client.call('JobService', 'CreateJob', job, 60_000);
            created++;
            return;
          } catch (err) {
            if (err instanceof ApiCallError && err.code === 'JOB_ALREADY_EXISTS') {
              created++;
              return;
            }
            if (!retryable(err) || attempt === RETRIES_MAX) throw err;
            await sleep((err as ApiCallError).retryDelayMs ?? 300);
          }
        }
      }),
    );
  }
  return { created, retried: true };
}

const RETRIES_MAX = 10;

async function groupTerms(cluster: ProcCluster): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for (const n of cluster.nodes) {
    const st = await n.status(5000);
    for (const g of st.groups) out.set(g.groupId, Math.max(out.get(g.groupId) ?? 0, g.term));
  }
  return out;
}

async function memoryOf(cluster: ProcCluster): Promise<NodeStatus[]> {
  const out: NodeStatus[] = [];
  // One node at a time: a collection of a large heap takes CPU the others would share.
  for (const n of cluster.nodes) out.push(await n.memory(120_000));
  return out;
}

interface RegisterRun {
  readonly created: number;
  readonly failedCalls: number;
  readonly errors: string[];
  readonly retriedBatches: number;
  /** Per call, sorted. */
  readonly latencies: number[];
  readonly elapsedMs: number;
}

/**
 * `count` jobs through CreateJobs, batches of `opts.batch` spread round-robin over the nodes,
 * `opts.inflight` calls at a time. A batch's jobs are built just before its call, as a client
 * reading its jobs from somewhere would.
 */
async function registerAll(
  clients: readonly ApiClient[],
  count: number,
  opts: Pick<RegistrationOptions, 'batch' | 'inflight'>,
  jobOf: (i: number) => Record<string, unknown>,
): Promise<RegisterRun> {
  const latencies: number[] = [];
  const errors: string[] = [];
  let failedCalls = 0;
  let retriedBatches = 0;
  let created = 0;
  let next = 0;
  let batches = 0;
  const t0 = performance.now();
  const worker = async (w: number): Promise<void> => {
    for (;;) {
      const from = next;
      if (from >= count) return;
      const to = Math.min(count, from + opts.batch);
      next = to;
      const jobs: Record<string, unknown>[] = [];
      for (let i = from; i < to; i++) jobs.push(jobOf(i));
      const client = clients[(batches++ + w) % clients.length]!;
      const started = performance.now();
      try {
        const r = await createBatch(client, jobs);
        created += r.created;
        retriedBatches += r.retried ? 1 : 0;
        latencies.push(performance.now() - started);
      } catch (err) {
        failedCalls++;
        if (errors.length < 5)
          errors.push(
            `jobs ${from}-${to - 1} via ${client.endpoint}: ${err instanceof ApiCallError ? `${err.code} ${err.message}` : String(err)}`,
          );
      }
    }
  };
  await Promise.all(Array.from({ length: opts.inflight }, (_, w) => worker(w)));
  const elapsedMs = performance.now() - t0;
  latencies.sort((a, b) => a - b);
  return { created, failedCalls, errors, retriedBatches, latencies, elapsedMs };
}

export async function runRegistration(opts: RegistrationOptions): Promise<RegistrationResult> {
  const log = opts.log ?? ((line: string) => console.log(line));
  const cluster = await ProcCluster.create({
    groups: opts.groups,
    extraArgs: [...(opts.nodeFlags ?? [])],
    ...(opts.security === undefined ? {} : { security: opts.security }),
  });
  let clients: ApiClient[] = [];
  try {
    cluster.startAll();
    await cluster.waitReady(60_000);
    clients = await apiClients(cluster);
    await clients[0]!.call('TenantService', 'CreateTenant', {
      tenantId: TENANT,
      signingSecret: TEST_SECRET,
    });
    const led = await settleLeaders(cluster, opts.groups);
    log(
      `  registration cluster: ${opts.groups} data groups, led per node: ${describeLeaders(led)}`,
    );
    await waitApplied(cluster);

    // The target is never called (no slot falls in the run); any URL the validator accepts.
    const url = 'http://127.0.0.1:9/hooks/bench';
    const warmupJobs = opts.warmupJobs ?? 0;
    let warmup: RegistrationResult['warmup'];
    if (warmupJobs > 0) {
      await clients[0]!.call('TenantService', 'CreateTenant', {
        tenantId: WARMUP_TENANT,
        signingSecret: TEST_SECRET,
      });
      const cpu0 = await clusterCpuMs(cluster);
      const w = await registerAll(clients, warmupJobs, opts, (i) => jobAt(i, url, WARMUP_TENANT));
      if (w.failedCalls > 0) throw new Error(`warm-up registration failed: ${w.errors.join('; ')}`);
      const cpuUs = (((await clusterCpuMs(cluster)) - cpu0) * 1000) / Math.max(1, w.created);
      warmup = {
        jobs: w.created,
        elapsedMs: w.elapsedMs,
        jobsPerSec: (w.created / w.elapsedMs) * 1000,
        clusterCpuUsPerJob: cpuUs,
      };
      log(
        `  warm-up on the fresh nodes: ${fmt(w.created)} jobs (tenant ${WARMUP_TENANT}) in ${fmt(w.elapsedMs)} ms: ` +
          `${fmt(warmup.jobsPerSec)} jobs/s, cluster CPU ${fmt(cpuUs)} µs per job, ${w.retriedBatches} batches retried`,
      );
      await waitApplied(cluster);
    }
    const before = await memoryOf(cluster);

    const termsBefore = await groupTerms(cluster);
    const cpuBefore = await clusterCpuMs(cluster);
    const run = await registerAll(clients, opts.jobs, opts, (i) => jobAt(i, url));
    const { latencies, errors, failedCalls, retriedBatches, created, elapsedMs } = run;
    const clusterCpuUsPerJob =
      (((await clusterCpuMs(cluster)) - cpuBefore) * 1000) / Math.max(1, created);
    const termsAfter = await groupTerms(cluster);
    const leaderChanges = [...termsAfter].filter(
      ([g, term]) => (termsBefore.get(g) ?? 0) !== term,
    ).length;
    if (process.env['BENCH_TRACE'] === '1')
      for (const n of cluster.nodes)
        for (const line of n.stdout.split('\n'))
          if (/leader changed|"level":[45]0/.test(line)) log(`    ${n.id}: ${line.slice(0, 300)}`);
    const jobsPerSec = (created / elapsedMs) * 1000;
    log(
      `  registered ${fmt(created)}/${fmt(opts.jobs)} jobs in ${fmt(elapsedMs)} ms: ${fmt(jobsPerSec)} jobs/s; ` +
        `per batch p50 ${fmt(percentile(latencies, 50))} ms, p99 ${fmt(percentile(latencies, 99))} ms` +
        `; ${retriedBatches} batches retried after a leader change; cluster CPU ${fmt(clusterCpuUsPerJob)} µs per job; ${leaderChanges} groups changed leader` +
        (failedCalls > 0 ? `; ${failedCalls} calls FAILED` : ''),
    );

    await waitApplied(cluster);
    const after = await memoryOf(cluster);
    const nodesAt = (at: readonly NodeStatus[]): NodeMemory[] =>
      cluster.nodes.map((n, i) => ({
        nodeId: n.id,
        rssBefore: before[i]!.rssBytes,
        rssAfter: at[i]!.rssBytes,
        heapBefore: before[i]!.heapUsedBytes,
        heapAfter: at[i]!.heapUsedBytes,
        heapTotalAfter: at[i]!.heapTotalBytes,
        arrayBuffersAfter: at[i]!.arrayBuffersBytes,
      }));
    const nodes = nodesAt(after);
    const dataGroups = new Set<number>();
    let replicas = 0;
    for (const st of after)
      for (const g of st.groups)
        if (g.groupId !== META_GROUP_ID) {
          dataGroups.add(g.groupId);
          replicas++;
        }
    const replicasPerJob = replicas / dataGroups.size;
    const denominator = Math.max(1, created) * replicasPerJob;
    const perJobReplica = (ns: readonly NodeMemory[], f: (m: NodeMemory) => number): number =>
      ns.reduce((s, m) => s + f(m), 0) / denominator;
    const logNodes = (ns: readonly NodeMemory[]): void => {
      for (const m of ns)
        log(
          `    ${m.nodeId}: heap ${mib(m.heapBefore)} → ${mib(m.heapAfter)} MiB, rss ${mib(m.rssBefore)} → ${mib(m.rssAfter)} MiB` +
            ` (after: V8 heap pages ${mib(m.heapTotalAfter)} MiB, array buffers ${mib(m.arrayBuffersAfter)} MiB,` +
            ` the rest ${mib(m.rssAfter - m.heapTotalAfter - m.arrayBuffersAfter)} MiB: code, stacks, LevelDB, allocator)`,
        );
    };
    logNodes(nodes);
    let memory: RegistrationResult['memory'] = {
      nodes,
      gcForced: [...before, ...after].every((s) => s.gcForced),
      replicasPerJob,
      heapPerJobReplica: perJobReplica(nodes, (m) => m.heapAfter - m.heapBefore),
      rssPerJobReplica: perJobReplica(nodes, (m) => m.rssAfter - m.rssBefore),
    };
    log(
      `  memory per job per replica (${replicasPerJob} replicas/job${memory.gcForced ? '' : ', NO forced GC'}): ` +
        `heap ${fmt(memory.heapPerJobReplica)} B, rss ${fmt(memory.rssPerJobReplica)} B`,
    );
    const settleMs = opts.settleMs ?? 0;
    if (settleMs > 0) {
      // Nothing runs on the cluster meanwhile: what a node keeps once a burst is over.
      await sleep(settleMs);
      const settledNodes = nodesAt(await memoryOf(cluster));
      logNodes(settledNodes);
      memory = {
        ...memory,
        settled: {
          afterMs: settleMs,
          nodes: settledNodes,
          heapPerJobReplica: perJobReplica(settledNodes, (m) => m.heapAfter - m.heapBefore),
          rssPerJobReplica: perJobReplica(settledNodes, (m) => m.rssAfter - m.rssBefore),
        },
      };
      log(
        `  after ${fmt(settleMs / 1000)} s idle: heap ${fmt(memory.settled!.heapPerJobReplica)} B, ` +
          `rss ${fmt(memory.settled!.rssPerJobReplica)} B per job per replica`,
      );
    }
    // A graceful stop lets `TICKRAFT_NODE_ARGS=--cpu-prof` write the nodes' profiles.
    await Promise.all(cluster.nodes.map((n) => n.term()));
    return {
      jobs: opts.jobs,
      ...(warmup === undefined ? {} : { warmup }),
      created,
      failedCalls,
      errors,
      elapsedMs,
      jobsPerSec,
      batchP50Ms: percentile(latencies, 50),
      batchP99Ms: percentile(latencies, 99),
      batches: latencies.length + failedCalls,
      clusterCpuUsPerJob,
      leaderChanges,
      retriedBatches,
      memory,
    };
  } finally {
    for (const c of clients) c.close();
    cluster.cleanup();
  }
}

function mib(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(1);
}
