/**
 * Starting a real 3-process cluster for the benchmarks the way a user meets it: readiness, the
 * preferred leaders settled (right after start each node hands the groups it leads to their
 * preferred node), and every node's client API address registered in the meta group (the
 * public API forwards by it).
 */
import { ApiClient } from '../src/api/client.js';
import { META_GROUP_ID, planBootstrap } from '../src/placement/bootstrap-plan.js';
import { eventually, sleep, type ProcCluster, type ProcNode } from '../test/helpers/cluster.js';

/** Waits (at most `boundMs`) until every group is led by its planned first replica. */
export async function settleLeaders(
  cluster: ProcCluster,
  groups: number,
  boundMs = 10_000,
): Promise<Map<number, string>> {
  const plan = planBootstrap(
    cluster.nodes.map((n) => n.id),
    groups,
  );
  let led = await cluster.leaders();
  for (let waited = 0; waited < boundMs; waited += 100) {
    if (plan.groups.every((g) => led.get(g.groupId) === g.replicas[0])) break;
    await sleep(100);
    led = await cluster.leaders();
  }
  return led;
}

/** "n1 6, n2 5, n3 5": data groups led per node. */
export function describeLeaders(led: Map<number, string>): string {
  const perNode = new Map<string, number>();
  for (const [groupId, id] of led)
    if (groupId !== META_GROUP_ID) perNode.set(id, (perNode.get(id) ?? 0) + 1);
  return [...perNode]
    .sort()
    .map(([id, n]) => `${id} ${n}`)
    .join(', ');
}

export function apiEndpoint(n: ProcNode): string {
  return `${n.host}:${n.apiPort}`;
}

/** One public API client per node, once every node's API address is in the meta group. */
export async function apiClients(cluster: ProcCluster): Promise<ApiClient[]> {
  const clients = cluster.nodes.map(
    (n) => new ApiClient(apiEndpoint(n), 60_000, {}, cluster.clientOptions()),
  );
  await eventually(async () => {
    const st = await clients[0]!.call<Record<string, unknown>>('AdminService', 'ClusterStatus', {});
    const nodes = st['nodes'] as Record<string, unknown>[];
    if (nodes.length !== cluster.nodes.length || nodes.some((n) => n['apiAddress'] === ''))
      throw new Error('API addresses not all registered');
  }, 30_000);
  return clients;
}

/** Resolves once every running replica of every group has applied its leader's commit index. */
export async function waitApplied(cluster: ProcCluster, timeoutMs = 120_000): Promise<void> {
  await eventually(
    async () => {
      const sts = await Promise.all(
        cluster.nodes.filter((n) => n.running).map((n) => n.status(5000)),
      );
      const commit = new Map<number, number>();
      for (const st of sts)
        for (const g of st.groups)
          if (g.role === 'leader')
            commit.set(g.groupId, Math.max(commit.get(g.groupId) ?? 0, g.commit));
      for (const st of sts)
        for (const g of st.groups)
          if (g.applied < (commit.get(g.groupId) ?? 0))
            throw new Error(`${st.nodeId} group ${g.groupId} applied ${g.applied}`);
    },
    timeoutMs,
    250,
  );
}
