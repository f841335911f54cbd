// Observability with real processes: every node started with --metrics-listen answers /healthz,
// turns /readyz to 200 once the cluster is ready, and after a job fires every second its
// /metrics show the fire lag histograms growing, successful fires, and the per-group Raft and
// wheel gauges. Unknown paths are 404. A pull-based worker shows in the worker gauges.
import t from 'tap';
import { Worker } from '../../src/api/worker-client.js';
import { ApiCluster, TENANT } from '../helpers/api-cluster.js';
import { eventually, sleep, TEST_ADMIN_TOKEN, type ProcNode } from '../helpers/cluster.js';

async function get(n: ProcNode, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://${n.host}:${n.metricsPort}${path}`);
  return { status: res.status, body: await res.text() };
}

/** Sum of a metric's samples over the nodes, optionally only those whose labels match. */
type Obj = Record<string, unknown>;

function sum(texts: string[], name: string, labels = ''): number {
  let total = 0;
  for (const text of texts) {
    for (const line of text.split('\n')) {
      if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
      if (labels !== '' && !line.includes(labels)) continue;
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return total;
}

t.test('metrics, healthz and readyz on every node', async (t) => {
  const ac = await ApiCluster.start(t, { metrics: true });
  const nodes = ac.cluster.nodes;
  for (const n of nodes) {
    t.equal((await get(n, '/healthz')).status, 200, `${n.id} /healthz`);
    const ready = await eventually(async () => {
      const r = await get(n, '/readyz');
      if (r.status !== 200) throw new Error(r.body);
      return r;
    }, 20_000);
    t.match(ready.body, /ready/, `${n.id} /readyz`);
    t.equal((await get(n, '/nope')).status, 404);
  }
  const scrape = (): Promise<string[]> =>
    Promise.all(nodes.map(async (n) => (await get(n, '/metrics')).body));
  const before = await scrape();
  const lagBefore = sum(before, 'tickraft_fire_lag_start_seconds_count');

  await ac.client('n1').call('JobService', 'CreateJob', {
    jobId: 'every-second',
    spec: ac.spec({ schedule: '* * * * * *' }),
  });
  const after = await eventually(async () => {
    const texts = await scrape();
    if (sum(texts, 'tickraft_fires_total', 'outcome="success"') < 2) throw new Error('no fires');
    return texts;
  }, 30_000);
  t.ok(ac.sink.receipts.length >= 2, 'the sink got the fires');
  t.ok(sum(after, 'tickraft_fire_lag_start_seconds_count') > lagBefore, 'start lag observed');
  t.ok(sum(after, 'tickraft_fire_lag_response_seconds_count') > 0, 'response lag observed');
  t.ok(sum(after, 'tickraft_fires_total', 'outcome="success"') >= 2, 'successful fires');
  // Per tenant: the only tenant is named (a free slot of --metrics-tenants is filled at the
  // scrape after its first fire), so every fire counted on a node is counted under its name.
  t.equal(
    sum(after, 'tickraft_tenant_fires_total', `tenant="${TENANT}",outcome="success"`),
    sum(after, 'tickraft_fires_total', 'outcome="success"'),
    'per tenant: every success under the tenant that fired',
  );
  t.ok(sum(after, 'tickraft_tenant_fire_lag_seconds_count', `tenant="${TENANT}"`) > 0);
  t.ok(
    after.some((text) => text.includes(`tickraft_tenant_deliveries_queued{tenant="${TENANT}",`)),
    "the tenant's queue depth, on the node that sends its fires",
  );
  for (const text of after) t.match(text, /^tickraft_tenant_dead_runs\{tenant="other",node=/m);
  t.ok(sum(after, 'tickraft_proposal_seconds_count') > 0, 'proposal latency observed');
  t.ok(sum(after, 'tickraft_group_commit_entries_count') > 0, 'group commits observed');
  t.ok(sum(after, 'tickraft_leader_changes_total') >= 5, 'leader changes counted');
  // Every replica's planning index counts the job: it always has a next slot.
  t.equal(sum(after, 'tickraft_planning_wheel_entries'), 3, 'the job, on its 3 replicas');
  // The job's group: every replica counts it, only the leader knows its fire rate (a leader
  // elected meanwhile on a loaded machine counts from its own first fire: ask until it has).
  t.equal(sum(after, 'tickraft_group_jobs'), 3, 'one job, counted by its 3 replicas');
  const rated = await eventually(async () => {
    const texts = await scrape();
    if (sum(texts, 'tickraft_group_fire_rate_per_second') <= 0) throw new Error('no rate yet');
    return texts;
  }, 30_000);
  t.ok(sum(rated, 'tickraft_group_fire_rate_per_second') > 0, "the leader's fire rate");
  const busy = await eventually(async () => {
    const cs = await ac.client('n2').call<Obj>('AdminService', 'ClusterStatus', {});
    const found = (cs['groups'] as Obj[]).filter((g) => Number(g['jobs']) > 0);
    if (found.length !== 1 || !(Number(found[0]!['fireRatePerSec']) > 0))
      throw new Error('no leader with a rate yet');
    return found;
  }, 30_000);
  t.equal(busy.length, 1, 'ClusterStatus: one group holds the job');
  t.equal(Number(busy[0]?.['jobs']), 1, 'ClusterStatus: its leader counts 1 job');
  t.ok(Number(busy[0]?.['fireRatePerSec']) > 0, 'ClusterStatus: and a fire rate above 0');
  for (const [i, text] of after.entries()) {
    const id = nodes[i]!.id;
    for (const name of [
      'tickraft_raft_term',
      'tickraft_raft_commit_index',
      'tickraft_raft_applied_index',
      'tickraft_dead_runs',
      'tickraft_dispatch_wheel_entries',
      'tickraft_group_jobs',
      'tickraft_group_fire_rate_per_second',
    ]) {
      t.match(text, new RegExp(`^${name}\\{group="1",node="${id}"\\} \\d+`, 'm'), `${id} ${name}`);
    }
    t.match(text, new RegExp(`^tickraft_raft_term\\{group="0",node="${id}"\\} [1-9]`, 'm'));
    t.match(text, /^tickraft_deliveries_inflight\{node="n\d"\} \d+/m);
    t.match(text, /^tickraft_group_commit_fsync_seconds_bucket/m);
    t.match(text, /^tickraft_raft_heartbeats_while_held_total\{node="n\d"\} \d+/m);
  }

  // A node stopped (SIGSTOP) for longer than an election timeout was held: counted, and logged
  // with how long, once it runs again.
  const n3 = nodes[2]!;
  const before3 = (await get(n3, '/metrics')).body;
  for (const what of ['event_loop', 'raft_turn'])
    t.match(
      before3,
      new RegExp(`^tickraft_loop_held_total\\{what="${what}",node="n3"\\} \\d+`, 'm'),
    );
  const pid = n3.proc!.pid!;
  process.kill(pid, 'SIGSTOP');
  await sleep(800);
  process.kill(pid, 'SIGCONT');
  const held = await eventually(async () => {
    const text = (await get(n3, '/metrics')).body;
    const n = sum([text], 'tickraft_loop_held_total', 'what="event_loop"');
    if (n < 1) throw new Error('not counted yet');
    return n;
  }, 10_000);
  t.ok(held >= 1, `the stop counted as a held event loop (${held})`);
  const line = n3.stdout.split('\n').find((l) => l.includes('"msg":"event loop was held"'));
  t.ok(line, 'and logged');
  const lateMs = Number((JSON.parse(line ?? '{}') as Obj)['lateMs']);
  t.ok(lateMs >= 700, `with how long (${lateMs} ms)`);

  // The meta group's leader stopped past two election timeouts (the meta group never quiets):
  // a follower campaigns and says its leader went silent; the old leader, running again, steps
  // down for a later term. Both are counted by reason.
  const metaLeaderId = (await ac.cluster.leaders()).get(0);
  const metaLeader = nodes.find((n) => n.id === metaLeaderId)!;
  const others = nodes.filter((n) => n !== metaLeader);
  const silentBefore = sum(
    await Promise.all(others.map(async (n) => (await get(n, '/metrics')).body)),
    'tickraft_raft_role_changes_total',
    'reason="leader_silent"',
  );
  process.kill(metaLeader.proc!.pid!, 'SIGSTOP');
  await sleep(2500);
  process.kill(metaLeader.proc!.pid!, 'SIGCONT');
  const silent = await eventually(async () => {
    const texts = await Promise.all(others.map(async (n) => (await get(n, '/metrics')).body));
    const n = sum(texts, 'tickraft_raft_role_changes_total', 'reason="leader_silent"');
    if (n <= silentBefore) throw new Error('no campaign counted yet');
    return n - silentBefore;
  }, 10_000);
  t.ok(silent >= 1, `a follower's campaign counted as leader_silent (${silent})`);
  const campaign = others
    .flatMap((n) => n.stdout.split('\n'))
    .filter((l) => l.includes('"msg":"campaigning: the leader went silent'))
    .map((l) => JSON.parse(l) as Obj)
    .find((o) => o['group'] === 0 && o['leaderBefore'] === metaLeader.id);
  t.ok(campaign, `logged, naming the silent leader ${metaLeader.id} of group 0`);
  const down = await eventually(async () => {
    const text = (await get(metaLeader, '/metrics')).body;
    const n =
      sum([text], 'tickraft_raft_role_changes_total', 'reason="higher_term"') +
      sum([text], 'tickraft_raft_role_changes_total', 'reason="check_quorum"');
    if (n < 1) throw new Error('not stepped down yet');
    return n;
  }, 10_000);
  t.ok(down >= 1, `${metaLeader.id}, running again, counted its step-down (${down})`);
});

t.test('worker metrics: streams per pool and leases held', async (t) => {
  const ac = await ApiCluster.start(t, { metrics: true });
  const nodes = ac.cluster.nodes;
  const scrape = (): Promise<string[]> =>
    Promise.all(nodes.map(async (n) => (await get(n, '/metrics')).body));
  const n1 = nodes[0]!;
  const worker = new Worker({
    token: TEST_ADMIN_TOKEN,
    endpoints: [`${n1.host}:${n1.apiPort}`],
    workerId: 'metrics-worker',
    pool: 'metrics',
    capacity: 4,
    handle: () => sleep(1500).then(() => ({ output: 'ok' })),
  });
  t.teardown(() => worker.stop());
  await worker.start();
  const connected = await eventually(async () => {
    const texts = await scrape();
    if (sum(texts, 'tickraft_workers_connected', 'pool="metrics"') < 3) throw new Error('not yet');
    return texts;
  }, 20_000);
  t.equal(
    sum(connected, 'tickraft_workers_connected', 'pool="metrics"'),
    3,
    'the worker has a stream to each of the three nodes',
  );
  await ac.client('n1').call('JobService', 'CreateJob', {
    jobId: 'worker-every-second',
    spec: ac.spec({ schedule: '* * * * * *', target: { url: 'worker:metrics' } }),
  });
  const held = await eventually(async () => {
    const texts = await scrape();
    if (sum(texts, 'tickraft_worker_leases', 'state="held"') < 1) throw new Error('none held');
    return texts;
  }, 20_000);
  t.ok(sum(held, 'tickraft_worker_leases', 'state="held"') >= 1, 'a lease is held while it runs');
  await worker.stop(3000);
  const gone = await eventually(async () => {
    const texts = await scrape();
    if (sum(texts, 'tickraft_workers_connected', 'pool="metrics"') > 0) throw new Error('still');
    return texts;
  }, 20_000);
  t.equal(sum(gone, 'tickraft_workers_connected', 'pool="metrics"'), 0, 'streams closed on stop');
});
