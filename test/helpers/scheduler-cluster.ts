/**
 * A real cluster with a webhook sink and a tenant, for the scheduler's real-process tests:
 * job placement (which group, which leader, which term), job creation through the test-only
 * admin RPC, and the run states a node's replica holds. Jobs are named by their id under TENANT
 * (job ids are unique per tenant); the admin RPC answers with the records as the state holds them,
 * named by their keys (`acme/<id>`).
 */
import type { Test } from 'tap';
import { META_GROUP_ID } from '../../src/placement/bootstrap-plan.js';
import { hashShardKey } from '../../src/placement/hash.js';
import { lookupRange, splitRing } from '../../src/placement/ring.js';
import { jobKeyOf } from '../../src/scheduler/job-key.js';
import type { Job, Run } from '../../src/scheduler/model.js';
import { eventually, ProcCluster, type ProcNode } from './cluster.js';
import { TEST_SECRET, WebhookSink } from './webhook-sink.js';

export const TENANT = 'acme';

export class SchedulerCluster {
  private constructor(
    readonly cluster: ProcCluster,
    readonly sink: WebhookSink,
    readonly groups: number,
  ) {}

  /** Starts nodes, the sink and the tenant; everything is torn down with the test. */
  static async start(
    t: Test,
    opts: { groups?: number; nodes?: number; extraArgs?: string[] } = {},
  ): Promise<SchedulerCluster> {
    const groups = opts.groups ?? 4;
    const cluster = await ProcCluster.create({
      groups,
      nodes: opts.nodes ?? 3,
      extraArgs: ['--tick-ms', '20', ...(opts.extraArgs ?? [])],
    });
    const sink = new WebhookSink([TEST_SECRET]);
    t.teardown(async () => {
      for (const n of cluster.nodes) n.resume();
      cluster.cleanup();
      await sink.close();
    });
    await sink.start();
    cluster.startAll();
    await cluster.waitReady(60_000);
    await cluster.scheduler({ op: 'put-tenant', id: TENANT, signingSecrets: [TEST_SECRET] });
    const sc = new SchedulerCluster(cluster, sink, groups);
    // Every node must know the tenant before a job of it can be created or delivered there.
    await eventually(async () => {
      for (const n of cluster.nodes) {
        // A job id of a group this node holds (with more than 3 nodes, not every node does).
        const hosted = new Set((await n.status(1000)).groups.map((g) => g.groupId));
        let jobId = 'no-such-job';
        for (let i = 0; !hosted.has(sc.groupOf(jobId)); i++) jobId = `no-such-job-${i}`;
        await n
          .scheduler({ op: 'get-job', tenant: TENANT, jobId })
          .catch((err: { code?: number }) => {
            if (err.code !== 5) throw err as Error; // NOT_FOUND: the node answers
          });
      }
    }, 10_000);
    return sc;
  }

  /** The group of TENANT's job `jobId`: the ring hashes the job's key. */
  groupOf(jobId: string): number {
    const key = jobKeyOf(TENANT, jobId);
    return lookupRange(splitRing(this.groups, META_GROUP_ID + 1), hashShardKey(key)).groupId;
  }

  /** `count` job ids starting with `prefix` that all live in the same group. */
  idsInOneGroup(prefix: string, count: number): string[] {
    const want = this.groupOf(`${prefix}0`);
    const out: string[] = [];
    for (let i = 0; out.length < count; i++) {
      const id = `${prefix}${i}`;
      if (this.groupOf(id) === want) out.push(id);
    }
    return out;
  }

  /** The node leading `groupId` and its term, once exactly one running node claims it. */
  async leaderOf(groupId: number): Promise<{ node: ProcNode; term: number }> {
    return eventually(async () => {
      // A frozen (SIGSTOP) node is skipped, and one that does not answer in time is passed
      // over: only a node that answers and says it leads counts.
      for (const n of this.cluster.nodes.filter((x) => x.running && !x.paused)) {
        const st = await n.status(1000).catch(() => undefined);
        const g = st?.groups.find((x) => x.groupId === groupId);
        if (g?.role === 'leader') return { node: n, term: g.term };
      }
      throw new Error(`no leader of group ${groupId}`);
    }, 20_000);
  }

  async createJob(jobId: string, spec: Record<string, unknown>): Promise<Job> {
    return (await this.cluster.scheduler({
      op: 'create-job',
      jobId,
      requestId: `create-${jobId}`,
      spec: { tenant: TENANT, name: jobId, target: { url: `${this.sink.url}/hook` }, ...spec },
    })) as Job;
  }

  /** Replaces the job's definition (UpdateJob's path); the reply is the job after it. */
  async updateJob(jobId: string, spec: Record<string, unknown>): Promise<Job> {
    return (await this.cluster.scheduler({
      op: 'update-job',
      tenant: TENANT,
      jobId,
      spec: { tenant: TENANT, name: jobId, target: { url: `${this.sink.url}/hook` }, ...spec },
    })) as Job;
  }

  async getJob(jobId: string): Promise<{ job: Job; runs: Run[] }> {
    return (await this.cluster.scheduler({ op: 'get-job', tenant: TENANT, jobId })) as {
      job: Job;
      runs: Run[];
    };
  }

  /** Waits until the job's run of `slotMs` satisfies `pred`; returns it. */
  async runOf(
    jobId: string,
    slotMs: number,
    pred: (r: Run) => boolean,
    timeoutMs = 20_000,
  ): Promise<Run> {
    return eventually(async () => {
      const { runs } = await this.getJob(jobId);
      const run = runs.find((r) => r.slotMs === slotMs);
      if (!run || !pred(run))
        throw new Error(`run ${jobId}:${slotMs} is ${run?.status ?? 'absent'}`);
      return run;
    }, timeoutMs);
  }
}

/** The next whole second at least `aheadMs` from now. */
export function slotAhead(aheadMs: number): number {
  return Math.ceil((Date.now() + aheadMs) / 1000) * 1000;
}

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}
