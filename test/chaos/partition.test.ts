// Partitions of a real 3-node cluster through the proxies of chaos/net.ts: every peer link of
// every node crosses its own proxy (one per ordered pair, --peer-route), so a partition is a few
// Toxiproxy API calls. Against our proxy server by default, or a real Toxiproxy at TOXIPROXY_URL.
//
// 1. Isolate the meta group's leader: the two others elect a new leader for every group the
//    isolated node led, and writes (DebugService puts) keep succeeding through them; the isolated
//    node steps down in the meta group (check-quorum; the leader of a quiesced data group may only
//    learn of its successor at the heal). Heal: it rejoins, and all three agree on each group's
//    leader, term, commit index and key count.
// 2. One-way cut leader → follower of a data group: the follower hears nothing from the leader
//    (its commit index stays put while the leader's advances), the leader still hears the
//    follower, and writes keep succeeding with the third node; after healing the follower
//    catches up.
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { eventually, type GroupStatus, type ProcNode } from '../helpers/cluster.js';
import { ProxiedCluster } from '../helpers/proxied-cluster.js';

const META = 0;

/**
 * Puts through `nodes` only, following leader hints that point inside `nodes`, and returns the
 * key's group. With `onlyGroup`, a key of another group is not retried: its group is returned
 * unwritten at the first "not leader" answer (that group may be led from outside `nodes`).
 */
async function putThrough(
  nodes: ProcNode[],
  key: string,
  value: string,
  timeoutMs = 15_000,
  onlyGroup?: number,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let target = nodes[0]!;
  let lastErr: unknown;
  while (Date.now() < deadline) {
    try {
      return (await target.put(key, value, 2000)).groupId;
    } catch (err) {
      const code = (err as grpc.ServiceError).code;
      if (code !== grpc.status.UNAVAILABLE && code !== grpc.status.DEADLINE_EXCEEDED) throw err;
      lastErr = err;
      const other = /not leader of group (\d+)/.exec((err as grpc.ServiceError).details ?? '');
      if (onlyGroup !== undefined && other && Number(other[1]) !== onlyGroup)
        return Number(other[1]);
      const hint = (err as grpc.ServiceError).metadata?.get('tickraft-leader')[0];
      target = nodes.find((n) => n.id === hint) ?? nodes[Math.floor(Math.random() * nodes.length)]!;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(
    `put ${key} through ${nodes.map((n) => n.id).join(',')} failed: ${String(lastErr)}`,
  );
}

async function groupOf(node: ProcNode, groupId: number): Promise<GroupStatus> {
  const g = (await node.status(2000)).groups.find((x) => x.groupId === groupId);
  if (!g) throw new Error(`${node.id} does not host group ${groupId}`);
  return g;
}

/** Every node reports the same leader, term, commit index and key count for every group. */
async function converged(nodes: ProcNode[]): Promise<Map<number, GroupStatus>> {
  const byGroup = new Map<number, GroupStatus[]>();
  for (const n of nodes) {
    for (const g of (await n.status(2000)).groups) {
      byGroup.set(g.groupId, [...(byGroup.get(g.groupId) ?? []), g]);
    }
  }
  const out = new Map<number, GroupStatus>();
  for (const [groupId, views] of byGroup) {
    const first = views[0]!;
    for (const v of views) {
      if (!v.leader || v.leader !== first.leader || v.term !== first.term)
        throw new Error(`group ${groupId}: leaders/terms differ`);
      if (v.commit !== first.commit || v.keys !== first.keys)
        throw new Error(`group ${groupId}: commit ${v.commit} vs ${first.commit}`);
    }
    out.set(groupId, first);
  }
  return out;
}

t.test('partitions through the proxies of every peer link', async (t) => {
  const pc = await ProxiedCluster.create({ nodes: 3, groups: 3 });
  t.teardown(() => pc.cleanup());
  const { cluster, net } = pc;
  cluster.startAll();
  await cluster.waitReady(45_000);
  for (let i = 0; i < 6; i++) await cluster.put(`before-${i}`, 'v', 15_000);

  await t.test(
    'isolate the meta leader: the majority carries on, the old leader rejoins',
    async (t) => {
      const leaders = await cluster.leaders();
      const oldId = leaders.get(META)!;
      const old = cluster.node(oldId);
      const majority = cluster.nodes.filter((n) => n !== old);
      const oldTerm = (await groupOf(old, META)).term;
      const ledByOld = [...leaders].filter(([, id]) => id === oldId).map(([g]) => g);
      t.comment(`meta leader ${oldId} (term ${oldTerm}) also leads groups ${ledByOld.join(',')}`);

      await net.isolate(oldId);
      const newLeaders = await eventually(async () => {
        const seen = new Map<number, string>();
        for (const n of majority) {
          for (const g of (await n.status(1000)).groups) {
            if (g.role === 'leader') seen.set(g.groupId, n.id);
          }
        }
        for (const g of ledByOld) if (!seen.has(g)) throw new Error(`group ${g}: no new leader`);
        return seen;
      }, 20_000);
      for (const g of ledByOld) {
        t.not(
          newLeaders.get(g),
          oldId,
          `group ${g}: new leader ${newLeaders.get(g)} on the majority side`,
        );
      }
      t.ok(
        (await groupOf(majority[0]!, META)).term > oldTerm,
        'the meta group moved to a new term',
      );

      for (let i = 0; i < 12; i++) await putThrough(majority, `during-${i}`, 'v');
      t.pass('writes keep succeeding through the majority');
      // The meta group never quiesces, so check-quorum deposes its cut-off leader. A quiesced data
      // group's leader sends nothing and so cannot notice; it may go on believing it leads, at a
      // term the majority has already left behind, where it can commit nothing.
      await eventually(async () => {
        if ((await groupOf(old, META)).role === 'leader') throw new Error(`${oldId} leads meta`);
      }, 20_000);
      t.pass(`${oldId}, cut off, stepped down in the meta group (check-quorum)`);
      for (const g of (await old.status(1000)).groups.filter((x) => x.role === 'leader')) {
        const newTerm = (await groupOf(cluster.node(newLeaders.get(g.groupId)!), g.groupId)).term;
        t.ok(g.term < newTerm, `group ${g.groupId}: ${oldId} still leads a stale term ${g.term}`);
      }

      await net.heal();
      const final = await eventually(() => converged(cluster.nodes), 30_000, 250);
      t.ok((final.get(META)?.term ?? 0) > oldTerm, 'after healing all agree on a newer meta term');
      const oldView = await groupOf(old, META);
      t.equal(oldView.commit, final.get(META)?.commit, `${oldId} caught up with the meta log`);
      const keys = [...final.values()].reduce((n, g) => n + g.keys, 0);
      t.equal(keys, 18, 'every node holds the 18 keys written before and during the partition');
    },
  );

  await t.test('one-way cut: the follower hears nothing, the leader still hears it', async (t) => {
    const leaders = await cluster.leaders();
    // A data group and a follower of it.
    const [groupId, leaderId] = [...leaders].find(([g]) => g !== META)!;
    const leader = cluster.node(leaderId);
    const follower = cluster.nodes.find((n) => n.id !== leaderId)!;
    const third = cluster.nodes.find((n) => n !== leader && n !== follower)!;
    const before = await groupOf(follower, groupId);

    await net.oneWay(leaderId, follower.id);
    let written = 0;
    for (let i = 0; written < 5 && i < 400; i++) {
      const key = `oneway-${i}`;
      // Keys of other groups are skipped: the cut-off follower may lead some of them, and
      // nothing reaches it through the two nodes written through.
      if ((await putThrough([leader, third], key, 'v', 15_000, groupId)) === groupId) written++;
    }
    t.equal(written, 5, `5 writes to group ${groupId} through ${leaderId} and ${third.id}`);
    const leaderView = await groupOf(leader, groupId);
    const followerView = await groupOf(follower, groupId);
    t.equal(leaderView.role, 'leader', `${leaderId} still leads group ${groupId}`);
    t.ok(leaderView.commit > before.commit, 'the leader commits with the third node');
    t.equal(followerView.commit, before.commit, `${follower.id} heard nothing: its commit stayed`);
    t.equal(followerView.keys, before.keys, 'and it applied nothing');

    await net.heal();
    await eventually(() => converged(cluster.nodes), 30_000, 250);
    t.equal((await groupOf(follower, groupId)).keys, before.keys + 5, `${follower.id} caught up`);
  });
});
