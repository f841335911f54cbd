// A worker token leases only its own tenant's runs: two tenants' jobs target the same pool name,
// a worker holding acme's worker token is connected to every node, and it must be handed acme's
// runs and never globex's; a writer token cannot open the Work stream at all.
import t from 'tap';
import { ApiCallError, ApiClient } from '../../src/api/client.js';
import { Worker, type LeasedRun } from '../../src/api/worker-client.js';
import { ApiCluster, endpointOf, TENANT } from '../helpers/api-cluster.js';
import { eventually, sleep } from '../helpers/cluster.js';

type Obj = Record<string, unknown>;

t.test("a worker token leases only its tenant's runs", async (t) => {
  const ac = await ApiCluster.start(t, { groups: 2 });
  const admin = ac.client('n1');
  await admin.call('TenantService', 'CreateTenant', { tenantId: 'globex' });
  const tokenFor = async (tenant: string, role: string): Promise<string> =>
    String((await admin.call<Obj>('TokenService', 'CreateToken', { tenant, role }))['token']);
  const acmeWorker = await tokenFor(TENANT, 'worker');
  const acmeWriter = await tokenFor(TENANT, 'writer');
  for (const [tenant, jobId] of [
    [TENANT, 'w-acme'],
    ['globex', 'w-globex'],
  ] as const)
    await admin.call('JobService', 'CreateJob', {
      jobId,
      spec: { tenant, schedule: '* * * * * *', target: { url: 'worker:shared' } },
    });

  const leased: LeasedRun[] = [];
  const warnings: string[] = [];
  const start = (token: string): Worker =>
    new Worker({
      endpoints: ac.cluster.nodes.map(endpointOf),
      token,
      workerId: `w-${leased.length}`,
      pool: 'shared',
      capacity: 4,
      discoverEveryMs: 500,
      log: { info: () => undefined, warn: (f) => warnings.push(JSON.stringify(f)) },
      handle: (run) => {
        leased.push(run);
        return Promise.resolve({ output: 'ok' });
      },
    });
  const worker = start(acmeWorker);
  t.teardown(() => worker.stop());
  await worker.start();
  await eventually(() => {
    if (leased.filter((r) => r.jobId === 'w-acme').length < 3)
      throw new Error(`acme's runs leased: ${leased.length}`);
    return Promise.resolve();
  }, 30_000);
  await sleep(2000);
  t.same(
    [...new Set(leased.map((r) => `${r.tenant}/${r.jobId}`))],
    [`${TENANT}/w-acme`],
    `only acme's runs were leased (${leased.length} leases)`,
  );

  // globex's runs stay unleased: nobody of its tenant is connected.
  const runs = await admin.call<Obj>('RunService', 'ListRuns', {
    tenant: 'globex',
    jobId: 'w-globex',
  });
  t.notOk(
    (runs['runs'] as Obj[]).some((r) => r['status'] === 'RUN_STATUS_SUCCEEDED'),
    "no globex run succeeded: acme's worker never took one",
  );

  // Revoking the worker's token ends its open streams: no lease after the bound.
  const listed = await admin.call<Obj>('TokenService', 'ListTokens', { tenant: TENANT });
  const workerInfo = (listed['tokens'] as Obj[]).find((i) => i['role'] === 'worker');
  const workerId = typeof workerInfo?.['id'] === 'string' ? workerInfo['id'] : '';
  await admin.call('TokenService', 'RevokeToken', { tokenId: workerId });
  const revokedAt = Date.now();
  await eventually(() => {
    if (!warnings.some((w) => w.includes('revoked')))
      throw new Error(`streams not ended yet: ${warnings.join(' | ')}`);
    return Promise.resolve();
  }, 10_000);
  const endedAfter = Date.now() - revokedAt;
  t.ok(endedAfter <= 5000, `the open streams ended ${endedAfter} ms after the revocation`);
  const before = leased.length;
  await sleep(3000);
  t.equal(leased.length, before, 'and no run was leased to the revoked token after that');

  // A writer token is no worker token.
  const refused: string[] = [];
  const writer = new Worker({
    endpoints: [endpointOf(ac.cluster.nodes[0]!)],
    token: acmeWriter,
    workerId: 'not-a-worker',
    pool: 'shared',
    discoverEveryMs: 60_000,
    log: { info: () => undefined, warn: (f) => refused.push(JSON.stringify(f)) },
    handle: () => Promise.reject(new Error('must never be leased a run')),
  });
  t.teardown(() => writer.stop());
  await writer.start();
  await eventually(() => {
    if (!refused.some((r) => r.includes('WorkerService.Work needs a worker token')))
      throw new Error(`not refused yet: ${refused.join(' | ')}`);
    return Promise.resolve();
  }, 10_000);
  t.pass('the Work stream refuses a writer token');
  const direct = new ApiClient(
    endpointOf(ac.cluster.nodes[0]!),
    5000,
    {},
    { token: await tokenFor(TENANT, 'worker') },
  );
  t.teardown(() => direct.close());
  const read = await direct.call('JobService', 'GetJob', { jobId: 'w-acme' }).then(
    () => 'OK',
    (err: unknown) => (err instanceof ApiCallError ? err.code : String(err)),
  );
  t.equal(read, 'PERMISSION_DENIED', 'a worker token reads nothing');
});
