/**
 * What the membership tests share: tickctl as a child process, a node joining with
 * `tickraft serve --join`, every-second jobs of both delivery modes in every group, the
 * user's checks on the fires (no slot skipped, no at-most-once fire id twice, the largest fire
 * delay) and on the layout once the cluster settled (every group has its replica count on live
 * nodes, no move in flight, every live replica's Raft configuration equal to the meta group's
 * and not joint).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Test } from 'tap';
import type { ApiClient } from '../../src/api/client.js';
import { hashShardKey } from '../../src/placement/hash.js';
import { jobKeyOf } from '../../src/scheduler/job-key.js';
import { eventually, freePort, LOOPBACK_TARGETS, ProcNode } from './cluster.js';
import { iso, TENANT, type SchedulerCluster } from './scheduler-cluster.js';
import { runTickctl } from './tickctl.js';

export type Obj = Record<string, unknown>;

export async function tickctl(
  args: string[],
): Promise<{ code: number | null; out: string; err: string }> {
  const r = await runTickctl(args);
  return { code: r.code, out: r.stdout, err: r.stderr };
}

/** Starts `tickraft serve --join` for a new node; it is torn down with the cluster. */
export async function joiner(
  sc: SchedulerCluster,
  id: string,
  via: ProcNode,
  ports?: { api: number; peer: number },
): Promise<ProcNode> {
  const host = via.host;
  const taken = new Set([
    ...sc.cluster.nodes.map((n) => n.apiPort),
    ...sc.cluster.nodes.map((n) => n.peerPort),
    ...sc.cluster.nodes.map((n) => n.debugPort),
  ]);
  const distinct = async (): Promise<number> => {
    for (;;) {
      const p = await freePort(host);
      if (!taken.has(p)) {
        taken.add(p);
        return p;
      }
    }
  };
  const api = ports?.api ?? (await distinct());
  const peer = ports?.peer ?? (await distinct());
  const debug = await distinct();
  const dataDir = join(sc.cluster.root, `${id}-${api}`);
  const args = (): string[] => [
    '--id',
    id,
    '--data-dir',
    dataDir,
    '--listen',
    `${host}:${api}`,
    '--peer-listen',
    `${host}:${peer}`,
    '--join',
    `${host}:${via.apiPort}`,
    '--tick-ms',
    '20',
    '--admin-token-file',
    sc.cluster.tokenFile,
    '--debug-listen',
    `${host}:${debug}`,
    ...LOOPBACK_TARGETS.flatMap((cidr) => ['--allow-target', cidr]),
  ];
  const node = new ProcNode(id, api, peer, dataDir, args, host, debug);
  sc.cluster.nodes.push(node);
  node.start();
  return node;
}

/** Waits until `node` is listed reachable in ClusterStatus with its meta replica caught up. */
export async function waitJoined(client: ApiClient, node: ProcNode): Promise<void> {
  await eventually(async () => {
    const st = await node.status(1000);
    if (!st.metaInitialized) throw new Error(`${node.id}: meta not caught up`);
    const cs = await client.call<Obj>('AdminService', 'ClusterStatus', {});
    const n = (cs['nodes'] as Obj[]).find((x) => x['id'] === node.id);
    if (n?.['reachable'] !== true) throw new Error(`${node.id} not in ClusterStatus yet`);
  }, 60_000);
}

export interface FiringJob {
  readonly id: string;
  readonly mode: 'at_least_once' | 'at_most_once';
}

/**
 * `count` job ids of `groupId`, half below and half at or above `mid` (the point a split of
 * the group will cut at), alternating the delivery modes.
 */
export function jobsAcrossSplit(
  sc: SchedulerCluster,
  groupId: number,
  mid: number,
  prefix: string,
  count: number,
): FiringJob[] {
  const out: FiringJob[] = [];
  let low = 0;
  let high = 0;
  for (let i = 0; low + high < count; i++) {
    const id = `${prefix}-${i}`;
    if (sc.groupOf(id) !== groupId) continue;
    const upper = hashShardKey(jobKeyOf(TENANT, id)) >= mid;
    if (upper ? high >= count / 2 : low >= count / 2) continue;
    if (upper) high++;
    else low++;
    out.push({ id, mode: (low + high) % 2 === 0 ? 'at_most_once' : 'at_least_once' });
  }
  return out;
}

/** Two every-second jobs per group (one per delivery mode), created and firing. */
export async function jobsInEveryGroup(
  sc: SchedulerCluster,
  prefix: string,
  spec: Obj = {},
): Promise<FiringJob[]> {
  const jobs: FiringJob[] = [];
  for (let g = 1; g <= sc.groups; g++) {
    let found = 0;
    for (let i = 0; found < 2; i++) {
      const id = `${prefix}-${g}-${i}`;
      if (sc.groupOf(id) !== g) continue;
      jobs.push({ id, mode: found === 0 ? 'at_least_once' : 'at_most_once' });
      found++;
    }
  }
  for (const j of jobs)
    await sc.createJob(j.id, { schedule: '* * * * * *', delivery: j.mode, ...spec });
  return jobs;
}

export interface FireFigures {
  readonly maxDelayMs: number;
  readonly skipped: number;
  /** At-most-once slots not received whose run is UNKNOWN: the sender died mid-send. */
  readonly unknown: number;
  readonly duplicates: number;
  readonly slots: number;
}

/**
 * Every slot of every job from its first fire up to `endAt` arrived, no at-most-once fire id
 * arrived twice; returns the figures (the delay of a fire: its first arrival − its slot). An
 * at-most-once slot whose attempt was in flight when its leader was killed may be lost by
 * design (its run is UNKNOWN, never sent again): such a slot is counted apart, not as skipped.
 */
export async function checkFires(
  t: Test,
  sc: SchedulerCluster,
  jobs: readonly FiringJob[],
  endAt: number,
): Promise<FireFigures> {
  let maxDelayMs = 0;
  let skipped = 0;
  let unknown = 0;
  let duplicates = 0;
  let slotsSeen = 0;
  for (const j of jobs) {
    const got = sc.sink.of(j.id);
    t.ok(got.length > 0, `${j.id} fired`);
    if (got.length === 0) continue;
    const firstSlot = Math.min(...got.map((r) => r.slotMs));
    const slots = new Set(got.map((r) => r.slotMs));
    let missingMs: number[] = [];
    for (let s = firstSlot; s <= endAt; s += 1000) {
      slotsSeen++;
      if (!slots.has(s)) missingMs.push(s);
    }
    if (missingMs.length > 0 && j.mode === 'at_most_once') {
      const { runs } = await sc.getJob(j.id);
      const lost = new Set(runs.filter((r) => r.status === 'UNKNOWN').map((r) => r.slotMs));
      for (const s of missingMs.filter((x) => lost.has(x)))
        t.comment(`${j.id}: slot ${iso(s)} UNKNOWN (at most once, its sender was killed)`);
      unknown += missingMs.filter((x) => lost.has(x)).length;
      missingMs = missingMs.filter((x) => !lost.has(x));
    }
    const missing = missingMs.map(iso);
    skipped += missing.length;
    t.same(missing, [], `${j.id} (${j.mode}): no slot skipped`);
    if (j.mode === 'at_most_once') {
      const ids = got.map((r) => r.fireId);
      duplicates += ids.length - new Set(ids).size;
      t.equal(new Set(ids).size, ids.length, `${j.id}: no at-most-once fire id twice`);
    }
    const firstOf = new Map<string, number>();
    for (const r of got) if (!firstOf.has(r.fireId)) firstOf.set(r.fireId, r.atMs - r.slotMs);
    for (const d of firstOf.values()) maxDelayMs = Math.max(maxDelayMs, d);
  }
  return { maxDelayMs, skipped, unknown, duplicates, slots: slotsSeen };
}

/**
 * Waits until no move is in flight, every data group lists `replicaCount` replicas, all on
 * `live` nodes, and every live node hosts exactly the groups it is listed for, with a Raft
 * configuration whose voters are the listed replicas, not joint and without learners.
 * Returns the replicas per node.
 */
export async function checkLayout(
  t: Test,
  client: ApiClient,
  live: readonly ProcNode[],
  replicaCount = 3,
): Promise<Map<string, number>> {
  const liveIds = new Set(live.map((n) => n.id));
  const perNode = await eventually(async () => {
    const cs = await client.call<Obj>('AdminService', 'ClusterStatus', {});
    const moves = cs['moves'] as Obj[];
    if (moves.length > 0) throw new Error(`moves in flight: ${JSON.stringify(moves)}`);
    const listed = new Map<string, string[]>();
    const perNode = new Map<string, number>();
    for (const g of cs['groups'] as Obj[]) {
      if (g['groupId'] === 0) continue;
      const replicas = (g['replicas'] as Obj[]).map((r) => String(r['nodeId'])).sort();
      if (replicas.length !== replicaCount)
        throw new Error(`group ${String(g['groupId'])} has replicas ${replicas.join(',')}`);
      for (const r of replicas) {
        if (!liveIds.has(r)) throw new Error(`group ${String(g['groupId'])} has a replica on ${r}`);
        perNode.set(r, (perNode.get(r) ?? 0) + 1);
      }
      listed.set(String(g['groupId']), replicas);
    }
    for (const n of live) {
      const st = await n.status(1000);
      const hosted = st.groups.filter((g) => g.groupId !== 0);
      const want = [...listed].filter(([, rs]) => rs.includes(n.id)).map(([id]) => id);
      const got = hosted.map((g) => String(g.groupId));
      if (want.sort().join() !== got.sort().join())
        throw new Error(`${n.id} hosts ${got.join(',')}, listed for ${want.join(',')}`);
      for (const g of hosted) {
        const voters = [...g.voters].sort().join();
        if (voters !== listed.get(String(g.groupId))!.join())
          throw new Error(`${n.id}: group ${g.groupId} voters ${voters}`);
        if (g.votersOutgoing.length > 0 || g.learners.length > 0)
          throw new Error(`${n.id}: group ${g.groupId} is joint or has learners`);
      }
    }
    return perNode;
  }, 60_000);
  t.pass(
    `every group has ${replicaCount} replicas on live nodes, no move in flight, every replica's configuration agrees (not joint)`,
  );
  return perNode;
}

/**
 * With TICKRAFT_TEST_LOGS=dir, every node's stdout and stderr is written there when the test
 * ends (for diagnosing a failure by hand).
 */
export function keepLogs(t: Test, sc: SchedulerCluster, name: string): void {
  const dir = process.env['TICKRAFT_TEST_LOGS'];
  if (dir === undefined || dir === '') return;
  t.teardown(() => {
    mkdirSync(dir, { recursive: true });
    for (const n of sc.cluster.nodes) {
      writeFileSync(join(dir, `${name}-${n.id}-${n.apiPort}.out`), n.stdout);
      writeFileSync(join(dir, `${name}-${n.id}-${n.apiPort}.err`), n.stderr);
    }
  });
}
