// A real 5-node cluster behind per-link proxies under the two partition shapes that need five
// nodes: the majorities ring (every node hears a distinct majority) and the bridge (two halves
// joined by one node). Raft stays available under both: in a ring of five any three replicas
// include two neighbours, and the bridge joins a majority; so writes keep succeeding (through
// whichever node leads, following leader hints) and, once healed, all five nodes converge to the
// same leader, commit index and keys in every group.
import t from 'tap';
import { eventually, type ProcNode } from '../helpers/cluster.js';
import { ProxiedCluster } from '../helpers/proxied-cluster.js';

async function converged(nodes: ProcNode[]): Promise<number> {
  const views = await Promise.all(nodes.map((n) => n.status(2000)));
  let keys = 0;
  for (const g of views[0]!.groups) {
    for (const v of views) {
      const mine = v.groups.find((x) => x.groupId === g.groupId);
      if (!mine) continue;
      if (
        !mine.leader ||
        mine.leader !== g.leader ||
        mine.commit !== g.commit ||
        mine.keys !== g.keys
      )
        throw new Error(`group ${g.groupId}: ${v.nodeId} differs from ${views[0]!.nodeId}`);
    }
    keys += g.keys;
  }
  return keys;
}

t.test('majorities ring and bridge on five nodes', async (t) => {
  const pc = await ProxiedCluster.create({ nodes: 5, groups: 2 });
  t.teardown(() => pc.cleanup());
  const { cluster, net } = pc;
  cluster.startAll();
  await cluster.waitReady(60_000);
  let written = 0;

  for (const shape of ['majoritiesRing', 'bridge'] as const) {
    await net[shape]();
    t.comment(`${shape}: ${net.current.map(([a, b]) => `${a}>${b}`).join(' ')}`);
    for (let i = 0; i < 6; i++) await cluster.put(`${shape}-${i}`, 'v', 20_000);
    written += 6;
    t.pass(`${shape}: 6 writes succeeded`);
    await net.heal();
    const keys = await eventually(() => converged(cluster.nodes), 30_000, 250);
    t.equal(keys, written, `${shape} healed: every node agrees, ${written} keys`);
  }
});
