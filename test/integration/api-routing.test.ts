// The public gRPC API with real processes: any node accepts any call (a node that does not lead
// the job's group forwards it), jobs created through it fire at a real webhook sink, a retried
// CreateJob with the same request id creates one job, a stale UpdateJob is ABORTED, lists span
// every group with page tokens, and after kill -9 of one node the others keep answering.
import t from 'tap';
import type { ApiCallError } from '../../src/api/client.js';
import { ApiCluster, TENANT } from '../helpers/api-cluster.js';
import { eventually, sleep } from '../helpers/cluster.js';

type Obj = Record<string, unknown>;

t.test('routing, firing, idempotency, versions, lists and a kill -9', async (t) => {
  const ac = await ApiCluster.start(t);
  const leaders = await ac.leaders();
  const jobs: Obj[] = [];
  // Twelve jobs, each created through a node chosen to not lead its group when possible.
  for (let i = 0; i < 12; i++) {
    const jobId = `fire-${i}`;
    const via = ['n1', 'n2', 'n3'][i % 3]!;
    const res = await ac.client(via).call<Obj>('JobService', 'CreateJob', {
      jobId,
      requestId: `req-${jobId}`,
      spec: ac.spec({ schedule: i < 3 ? '* * * * * *' : '0 0 1 1 *' }),
    });
    jobs.push(res['job'] as Obj);
  }
  const forwarded = jobs.filter(
    (j, i) => leaders.get(j['groupId'] as number) !== ['n1', 'n2', 'n3'][i % 3],
  );
  t.ok(forwarded.length > 0, `${forwarded.length} creates went through a node that does not lead`);

  // Reads through every node agree.
  for (const via of ['n1', 'n2', 'n3']) {
    const j = await ac
      .client(via)
      .call<Obj>('JobService', 'GetJob', { tenant: TENANT, jobId: 'fire-5' });
    t.equal(j['id'], 'fire-5', `GetJob via ${via}`);
  }

  // Idempotent create: same request id, one job, the retry says duplicate.
  const again = await ac.client('n3').call<Obj>('JobService', 'CreateJob', {
    jobId: 'fire-7',
    requestId: 'req-fire-7',
    spec: ac.spec({ schedule: '0 0 1 1 *' }),
  });
  t.equal(again['duplicate'], true, 'a retried create is recognised');
  t.equal((again['job'] as Obj)['version'], 1);
  const dup = await ac
    .client('n1')
    .call('JobService', 'CreateJob', { jobId: 'fire-7', spec: ac.spec() })
    .catch((e: unknown) => e);
  t.equal(
    (dup as ApiCallError).code,
    'JOB_ALREADY_EXISTS',
    'without the request id: ALREADY_EXISTS',
  );

  // Optimistic concurrency.
  const updated = await ac.client('n2').call<Obj>('JobService', 'UpdateJob', {
    tenant: TENANT,
    jobId: 'fire-8',
    expectedVersion: 1,
    spec: ac.spec({ schedule: '0 0 2 1 *', name: 'renamed' }),
  });
  t.equal(updated['version'], 2);
  const stale = await ac
    .client('n3')
    .call('JobService', 'UpdateJob', {
      tenant: TENANT,
      jobId: 'fire-8',
      expectedVersion: 1,
      spec: ac.spec(),
    })
    .catch((e: unknown) => e);
  t.equal((stale as ApiCallError).status, 10, 'stale version: ABORTED');
  t.equal((stale as ApiCallError).code, 'JOB_VERSION_CONFLICT');

  // Lists across groups, in pages of 5.
  const seen: string[] = [];
  let token = '';
  for (let page = 0; page < 10; page++) {
    const res = await ac.client(['n1', 'n2', 'n3'][page % 3]!).call<Obj>('JobService', 'ListJobs', {
      tenant: TENANT,
      pageSize: 5,
      pageToken: token,
    });
    seen.push(...(res['jobs'] as Obj[]).map((j) => j['id'] as string));
    token = res['nextPageToken'] as string;
    if (token === '') break;
  }
  t.same(
    seen,
    jobs.map((j) => j['id'] as string).sort(),
    'ListJobs pages cover every job once, by id',
  );

  // The every-second jobs fire at the sink, signed.
  await eventually(() => {
    for (const id of ['fire-0', 'fire-1', 'fire-2'])
      if (ac.sink.of(id).filter((r) => r.status === 200).length < 4)
        return Promise.reject(new Error(`${id} has not fired 4 times`));
    return Promise.resolve();
  }, 15_000);
  t.ok(
    ac.sink.receipts.every((r) => r.signatureOk),
    'every fire verifies with the tenant secret',
  );
  const runs = await ac.client('n1').call<Obj>('RunService', 'ListRuns', {
    tenant: TENANT,
    jobId: 'fire-0',
    status: 'RUN_STATUS_SUCCEEDED',
    pageSize: 2,
  });
  const listed = runs['runs'] as Obj[];
  t.equal(listed.length, 2, 'ListRuns filters by status');
  t.ok((listed[0]!['slotMs'] as number) > (listed[1]!['slotMs'] as number), 'runs newest first');
  t.not(runs['nextPageToken'], '', 'more runs on the next page');
  t.match(listed[0]!['fireId'], /^acme\/fire-0:\d+$/, 'a fire id carries the tenant');
  t.equal(listed[0]!['jobId'], 'fire-0', 'and a run names the job by its id');
  const run = await ac
    .client('n2')
    .call<Obj>('RunService', 'GetRun', { tenant: TENANT, fireId: listed[1]!['fireId'] });
  const attempts = run['attempts'] as Obj[];
  t.equal(attempts[0]?.['statusCode'], 200, 'GetRun carries the attempts');

  // kill -9 one node: calls through the two others keep succeeding once groups re-elect.
  await ac.cluster.node('n1').kill9();
  await eventually(
    () =>
      ac.client('n2').call('JobService', 'CreateJob', {
        jobId: 'after-kill-0',
        spec: ac.spec({ schedule: '0 0 1 1 *' }),
      }),
    10_000,
  );
  await sleep(500);
  let ok = 0;
  for (let i = 1; i <= 12; i++) {
    const via = i % 2 === 0 ? 'n2' : 'n3';
    await ac.client(via).call('JobService', 'CreateJob', {
      jobId: `after-kill-${i}`,
      requestId: `after-kill-${i}`,
      spec: ac.spec({ schedule: '0 0 1 1 *' }),
    });
    const j = await ac
      .client(via === 'n2' ? 'n3' : 'n2')
      .call<Obj>('JobService', 'GetJob', { tenant: TENANT, jobId: `after-kill-${i}` });
    if (j['id'] === `after-kill-${i}`) ok++;
  }
  t.equal(ok, 12, 'creates and reads through the surviving nodes all succeed');
  const status = await ac.client('n3').call<Obj>('AdminService', 'ClusterStatus', {});
  const n1 = (status['nodes'] as Obj[]).find((n) => n['id'] === 'n1');
  t.equal(n1?.['reachable'], false, 'ClusterStatus shows the killed node unreachable');
  const meta = (status['groups'] as Obj[]).find((g) => g['groupId'] === 0);
  t.ok(meta?.['leader'] !== '' && meta?.['leader'] !== 'n1', 'the meta group re-elected');
});
