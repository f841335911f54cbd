// A quiet group fires on time although its leader is lost just before a slot. Between slots a
// group with one job quiesces: no heartbeats, and its followers campaign only after three missed
// beacons (about 5 s). Every replica therefore wakes the group a little before its applied state
// says work is due (docs/ARCHITECTURE.md, Quiescence), so a leader cut off or killed then is
// replaced before the slot. Real processes, every peer link through a proxy; the look-ahead is
// cut to 500 ms so that the group is still quiet until shortly before the slot (with the default
// 3 s, planning the slot's intent wakes it earlier anyway).
import t from 'tap';
import type { ApiClient } from '../../src/api/client.js';
import { META_GROUP_ID } from '../../src/placement/bootstrap-plan.js';
import { hashShardKey } from '../../src/placement/hash.js';
import { lookupRange, splitRing } from '../../src/placement/ring.js';
import { eventually, sleep, type ProcCluster, type ProcNode } from '../helpers/cluster.js';
import { retryUnavailable } from '../helpers/api-retry.js';
import { ProxiedCluster } from '../helpers/proxied-cluster.js';
import { TEST_SECRET, WebhookSink } from '../helpers/webhook-sink.js';

const GROUPS = 2;
const TENANT = 'quiet';
/** How late the slot may fire: the bound for any group's failover. */
const BOUND_MS = 1000;

function groupOfJob(jobId: string): number {
  const ranges = splitRing(GROUPS, META_GROUP_ID + 1);
  return lookupRange(ranges, hashShardKey(`${TENANT}/${jobId}`)).groupId;
}

async function leaderOf(cluster: ProcCluster, groupId: number): Promise<ProcNode> {
  return eventually(async () => {
    for (const n of cluster.nodes.filter((x) => x.running)) {
      const g = (await n.status(2000)).groups.find((x) => x.groupId === groupId);
      if (g?.role === 'leader') return n;
    }
    throw new Error(`group ${groupId} has no leader`);
  }, 20_000);
}

async function isQuiesced(node: ProcNode, groupId: number): Promise<boolean> {
  const g = (await node.status(2000)).groups.find((x) => x.groupId === groupId);
  return g?.quiesced === true;
}

t.test('a quiet group whose leader is lost 1 s before a slot fires it within 1 s', async (t) => {
  const proxied = await ProxiedCluster.create({
    groups: GROUPS,
    extraArgs: ['--look-ahead-ms', '500'],
  });
  const cluster = proxied.cluster;
  const sink = new WebhookSink([TEST_SECRET]);
  await sink.start();
  const clients = new Map<string, ApiClient>();
  t.teardown(async () => {
    for (const c of clients.values()) c.close();
    await proxied.cleanup();
    await sink.close();
  });
  cluster.startAll();
  await cluster.waitReady(60_000);
  for (const n of cluster.nodes) clients.set(n.id, cluster.client(n));
  // Right after start-up a node may not know every leader's API address yet and says to retry.
  await retryUnavailable(() =>
    clients.get('n1')!.call('TenantService', 'CreateTenant', {
      tenantId: TENANT,
      signingSecret: TEST_SECRET,
    }),
  );

  const scenario = async (
    name: string,
    fault: (victim: ProcNode) => Promise<void>,
  ): Promise<void> => {
    const jobId = `${name}-job`;
    const groupId = groupOfJob(jobId);
    const slotMs = Math.ceil(Date.now() / 1000) * 1000 + 9000;
    const via = cluster.nodes.find((n) => n.running)!;
    // A request id makes the retry of a create whose outcome was unknown safe.
    await retryUnavailable(
      () =>
        clients.get(via.id)!.call('JobService', 'CreateJob', {
          jobId,
          requestId: `${jobId}-create`,
          spec: {
            tenant: TENANT,
            schedule: `at ${new Date(slotMs).toISOString()}`,
            target: { url: `${sink.url}/hook` },
          },
        }),
      5000,
    );
    const victim = await leaderOf(cluster, groupId);
    const term = (await victim.status()).groups.find((g) => g.groupId === groupId)!.term;
    // Quiet well before the slot: nothing is due until the planning time, 500 ms before it.
    await eventually(async () => {
      if (!(await isQuiesced(victim, groupId))) throw new Error('the group is awake');
    }, 5000);
    while (Date.now() < slotMs - 3000) await sleep(20);
    t.ok(
      await isQuiesced(victim, groupId),
      `${name}: group ${groupId} is quiet 3 s before the slot`,
    );
    while (Date.now() < slotMs - 1000) await sleep(5);
    await fault(victim);
    const faultMs = Date.now();
    const fireId = `${TENANT}/${jobId}:${slotMs}`;
    const first = await eventually(() => {
      const r = sink.receipts.find((x) => x.fireId === fireId);
      return r ? Promise.resolve(r) : Promise.reject(new Error(`${fireId} not received`));
    }, 15_000);
    const lag = first.atMs - slotMs;
    t.ok(
      lag <= BOUND_MS,
      `${name}: the slot fired ${lag} ms after it (fault ${slotMs - faultMs} ms before), bound ${BOUND_MS} ms`,
    );
    t.ok(first.term > term, `${name}: sent by a leader of a later term (${first.term} > ${term})`);
    t.ok(
      sink.receipts.filter((x) => x.fireId === fireId).every((x) => x.term > term),
      `${name}: the lost leader sent nothing (its lease had run out)`,
    );
  };

  await scenario('partition', (victim) => proxied.net.isolate(victim.id));
  await proxied.net.heal();
  await scenario('kill', (victim) => victim.kill9());
});
