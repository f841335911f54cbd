// AdminService BulkPause / BulkResume / BulkCancel with real processes and a real webhook sink.
// Method: tenants acme and beta each have jobs firing every second, spread over the data groups.
// BulkPause(acme) → after the acknowledgement no acme slot later than the ack is delivered (a
// delivery started before the ack may still arrive: its slot is not later than the ack), while
// beta keeps firing; a second BulkPause changes nothing. BulkResume (through tickctl, as an
// operator runs it) → acme fires again. BulkCancel(acme) → acme's jobs are gone (GetJob
// NOT_FOUND) and stop firing, beta is untouched. Errors: unknown tenant NOT_FOUND, malformed
// tenant INVALID_ARGUMENT naming the field, cancel without --yes refused by tickctl. The time
// every call took to commit in every group is printed (the issue asks for ≤ 5 s; not asserted,
// as timing is not a test's business on a shared machine). Tenant priority weights are checked
// through the API and tickctl (range, default, update).
import t from 'tap';
import { ApiCallError } from '../../src/api/client.js';
import { DEFAULT_TENANT_INFLIGHT_MAX } from '../../src/api/tenant-admin.js';
import { ApiCluster, endpointOf } from '../helpers/api-cluster.js';
import { eventually, sleep } from '../helpers/cluster.js';
import { runTickctl } from '../helpers/tickctl.js';
import { TEST_SECRET } from '../helpers/webhook-sink.js';

type Obj = Record<string, unknown>;
// Ids that differ at the front: FNV-1a (the shard-key hash) sends ids differing only in their last
// character to neighbouring points of the ring, which would put every job in one group.
const ACME = ['0-acme', '1-acme', '2-acme', '3-acme', '4-acme', '5-acme'];
const BETA = ['0-beta', '1-beta', '2-beta'];

const tickctl = (args: string[]): ReturnType<typeof runTickctl> => runTickctl(args);

t.test('bulk pause, resume and cancel of one tenant across every group', async (t) => {
  const ac = await ApiCluster.start(t);
  const c = ac.client('n1');
  const endpoint = endpointOf(ac.cluster.node('n3'));
  await c.call('TenantService', 'CreateTenant', { tenantId: 'beta', signingSecret: TEST_SECRET });
  // Right after start-up, leader balancing may leave a group briefly without a known leader
  // (UNAVAILABLE with a retry hint): retry as a client would. Nothing is half-written then.
  const created = (await eventually(
    () =>
      c.call<Obj>('JobService', 'CreateJobs', {
        jobs: [
          ...ACME.map((jobId) => ({ jobId, requestId: jobId, spec: ac.spec() })),
          ...BETA.map((jobId) => ({ jobId, requestId: jobId, spec: ac.spec({ tenant: 'beta' }) })),
        ],
      }),
    20_000,
  )) as { created: number; duplicates: number };
  // A retry after a partial commit finds the first part by its request ids.
  t.equal(created.created + created.duplicates, ACME.length + BETA.length);
  const groupsOfAcme = new Set<number>();
  for (const jobId of ACME)
    groupsOfAcme.add(
      (await c.call<Obj>('JobService', 'GetJob', { tenant: 'acme', jobId }))['groupId'] as number,
    );
  t.ok(groupsOfAcme.size >= 3, `acme's jobs live in ${groupsOfAcme.size} groups`);
  const firedAfter = (jobs: string[], ms: number) => () => {
    const idle = jobs.filter((j) => !ac.sink.of(j).some((r) => r.slotMs > ms));
    return idle.length === 0
      ? Promise.resolve()
      : Promise.reject(new Error(`idle: ${idle.join(' ')}`));
  };
  await eventually(firedAfter([...ACME, ...BETA], Date.now()), 20_000);

  // BulkPause through a node, whichever groups it leads: one entry per group, all committed.
  // A group changing leader at that moment answers BULK_INCOMPLETE (UNAVAILABLE): the groups
  // that committed keep the change and a retry is safe, as a careful operator does.
  let retried = false;
  const pause = await ac
    .client('n2')
    .call<Obj>('AdminService', 'BulkPause', { tenant: 'acme' })
    .catch((err: unknown) => {
      if (!(err instanceof ApiCallError) || err.code !== 'BULK_INCOMPLETE') throw err;
      t.comment(`BulkPause incomplete, retried once: ${err.message}`);
      retried = true;
      return ac.client('n2').call<Obj>('AdminService', 'BulkPause', { tenant: 'acme' });
    });
  const pausedAtMs = Date.now();
  const groups = pause['groups'] as Obj[];
  t.equal(groups.length, 4, 'every data group answered');
  t.equal(pause['jobsTotal'], ACME.length);
  if (!retried) t.equal(pause['changedTotal'], ACME.length);
  t.same(
    new Set(groups.filter((g) => (g['jobs'] as number) > 0).map((g) => g['groupId'])),
    groupsOfAcme,
    'the groups that hold acme jobs report them',
  );
  t.comment(
    `BulkPause: every group committed ${String(pause['elapsedMs'])} ms after the call arrived ` +
      `(per group: ${groups.map((g) => `${String(g['groupId'])}:${String(g['committedAfterMs'])}ms`).join(' ')})`,
  );
  const again = await ac.client('n3').call<Obj>('AdminService', 'BulkPause', { tenant: 'acme' });
  t.equal(again['jobsTotal'], ACME.length, 'a retried pause sees the same jobs');
  t.equal(again['changedTotal'], 0, 'and changes nothing');
  const job = await c.call<Obj>('JobService', 'GetJob', { tenant: 'acme', jobId: '3-acme' });
  t.equal(job['paused'], true, 'GetJob shows the job paused');

  const betaBefore = ac.sink.receipts.filter((r) => BETA.includes(r.jobId)).length;
  await sleep(3500);
  const late = ac.sink.receipts.filter((r) => ACME.includes(r.jobId) && r.slotMs > pausedAtMs);
  t.same(
    late.map((r) => r.fireId),
    [],
    'no acme slot after the acknowledged pause is delivered',
  );
  const inFlight = ac.sink.receipts.filter(
    (r) => ACME.includes(r.jobId) && r.atMs > pausedAtMs,
  ).length;
  t.comment(`acme deliveries arriving after the ack (started before it): ${inFlight}`);
  await eventually(firedAfter(BETA, pausedAtMs + 1000), 10_000);
  t.ok(
    ac.sink.receipts.filter((r) => BETA.includes(r.jobId)).length > betaBefore,
    'beta keeps firing',
  );

  // BulkResume as an operator runs it.
  const resumed = await tickctl(['tenants', 'resume', 'acme', '--json', '--endpoint', endpoint]);
  const resumedAtMs = Date.now();
  t.equal(resumed.code, 0, `tickctl tenants resume: ${resumed.stderr}`);
  const res = JSON.parse(resumed.stdout) as Obj;
  t.equal(res['changedTotal'], ACME.length, 'every acme job resumed');
  t.comment(`BulkResume (tickctl): every group committed within ${String(res['elapsedMs'])} ms`);
  await eventually(firedAfter(ACME, resumedAtMs), 15_000);
  t.pass('acme fires again after the resume');
  const table = await tickctl(['tenants', 'pause', 'acme', '--endpoint', endpoint]);
  t.equal(table.code, 0);
  t.match(table.stdout, /GROUP\s+JOBS\s+CHANGED\s+COMMITTED AFTER/);
  t.match(table.stdout, /paused 6 of 6 jobs of tenant acme in 4 groups; every group committed/);
  await c.call('AdminService', 'BulkResume', { tenant: 'acme' });

  // Cancel: the CLI wants a confirmation; the API deletes every job of the tenant.
  const unconfirmed = await tickctl(['tenants', 'cancel', 'acme', '--endpoint', endpoint]);
  t.equal(unconfirmed.code, 2, 'cancel without --yes is a usage error');
  t.match(unconfirmed.stderr, /add --yes to confirm/);
  t.equal(
    (await c.call<Obj>('JobService', 'GetJob', { tenant: 'acme', jobId: '0-acme' }))['id'],
    '0-acme',
    'nothing gone',
  );
  const cancel = await ac.client('n3').call<Obj>('AdminService', 'BulkCancel', { tenant: 'acme' });
  const cancelledAtMs = Date.now();
  t.equal(cancel['changedTotal'], ACME.length, 'every acme job deleted');
  t.comment(`BulkCancel: every group committed within ${String(cancel['elapsedMs'])} ms`);
  for (const jobId of ACME) {
    const gone = await c
      .call('JobService', 'GetJob', { tenant: 'acme', jobId })
      .catch((e: unknown) => e);
    t.equal((gone as ApiCallError).code, 'JOB_NOT_FOUND', `${jobId}: NOT_FOUND`);
  }
  const list = await c.call<Obj>('JobService', 'ListJobs', { tenant: 'beta' });
  t.same(
    (list['jobs'] as Obj[]).map((j) => j['id']),
    BETA,
    "beta's jobs are untouched",
  );
  await sleep(2500);
  t.same(
    ac.sink.receipts
      .filter((r) => ACME.includes(r.jobId) && r.slotMs > cancelledAtMs)
      .map((r) => r.fireId),
    [],
    'no acme slot after the acknowledged cancel is delivered',
  );
  await eventually(firedAfter(BETA, cancelledAtMs + 1000), 10_000);
  const empty = await c.call<Obj>('AdminService', 'BulkCancel', { tenant: 'acme' });
  t.equal(empty['jobsTotal'], 0, 'a retried cancel finds nothing left');

  // Errors.
  const ghost = await c
    .call('AdminService', 'BulkPause', { tenant: 'ghost' })
    .catch((e: unknown) => e);
  t.equal((ghost as ApiCallError).status, 5, 'unknown tenant: NOT_FOUND');
  t.equal((ghost as ApiCallError).code, 'TENANT_NOT_FOUND');
  const malformed = await c
    .call('AdminService', 'BulkResume', { tenant: 'Not A Tenant' })
    .catch((e: unknown) => e);
  t.equal((malformed as ApiCallError).status, 3, 'malformed tenant: INVALID_ARGUMENT');
  t.same(
    (malformed as ApiCallError).violations.map((v) => v.field),
    ['tenant'],
  );
});

t.test('tenant priority weights: default, range, update through the API and tickctl', async (t) => {
  const ac = await ApiCluster.start(t, { groups: 2 });
  const c = ac.client('n1');
  const endpoint = endpointOf(ac.cluster.node('n2'));
  const acme = await c.call<Obj>('TenantService', 'GetTenant', { tenantId: 'acme' });
  t.equal(acme['priorityWeight'], 1, 'default weight 1');
  const bad = await c
    .call('TenantService', 'CreateTenant', { tenantId: 'heavy', priorityWeight: 101 })
    .catch((e: unknown) => e);
  t.equal((bad as ApiCallError).status, 3);
  t.same(
    (bad as ApiCallError).violations.map((v) => v.field),
    ['priority_weight'],
  );
  const none = await c
    .call('TenantService', 'GetTenant', { tenantId: 'heavy' })
    .catch((e: unknown) => e);
  t.equal((none as ApiCallError).status, 5, 'nothing was created');
  const heavy = await c.call<Obj>('TenantService', 'CreateTenant', {
    tenantId: 'heavy',
    priorityWeight: 40,
  });
  t.equal((heavy['tenant'] as Obj)['priorityWeight'], 40);
  const zero = await c
    .call('TenantService', 'UpdateTenant', { tenantId: 'heavy', priorityWeight: 0 })
    .catch((e: unknown) => e);
  t.same(
    (zero as ApiCallError).violations.map((v) => v.field),
    ['priority_weight'],
    'an explicit 0 is refused, not taken as absent',
  );
  const updated = await tickctl([
    'tenants',
    'update',
    'heavy',
    '--priority-weight',
    '7',
    '--json',
    '--endpoint',
    endpoint,
  ]);
  t.equal(updated.code, 0, updated.stderr);
  t.equal((JSON.parse(updated.stdout) as Obj)['priorityWeight'], 7);
  const kept = await c.call<Obj>('TenantService', 'GetTenant', { tenantId: 'heavy' });
  t.same(
    [kept['priorityWeight'], kept['inflightMax']],
    [7, DEFAULT_TENANT_INFLIGHT_MAX],
    'other fields kept',
  );
  const created = await tickctl([
    'tenants',
    'create',
    'light',
    '--priority-weight',
    '3',
    '--endpoint',
    endpoint,
  ]);
  t.equal(created.code, 0, created.stderr);
  t.match(created.stdout, /WEIGHT/);
  const nothing = await tickctl(['tenants', 'update', 'light', '--endpoint', endpoint]);
  t.equal(nothing.code, 2, 'update without a change is a usage error');
});
