// Job ids are unique per tenant, with real processes and a real webhook sink. Method: tenants
// acme and beta each create a job `nightly-report` (same id, same request id, different targets
// and signing secrets) firing every second. Each tenant's GetJob, ListJobs and ListRuns see only
// its own; a third tenant (gamma) that has no such job gets NOT_FOUND for it in exactly the words
// a never-existing id gets, naming no tenant; a fire id of one tenant is NOT_FOUND under the
// other. The fires delivered carry distinct fire ids `<tenant>/nightly-report:<slot>`, each body
// names its own tenant and reaches its own target, and each signature verifies with its own
// tenant's secret only. DeleteJob of acme's job leaves beta's, which keeps firing.
import t from 'tap';
import type { ApiClient } from '../../src/api/client.js';
import type { PublicServiceName } from '../../src/api/proto-options.js';
import { compileSigningKeys, verifyWebhook } from '../../src/delivery/signing.js';
import { ApiCluster, createTenantCarefully, endpointOf } from '../helpers/api-cluster.js';
import { refusal, retryUnavailable } from '../helpers/api-retry.js';
import { eventually, sleep } from '../helpers/cluster.js';
import { runTickctl } from '../helpers/tickctl.js';
import { TEST_SECRET, type Receipt } from '../helpers/webhook-sink.js';

type Obj = Record<string, unknown>;

const JOB = 'nightly-report';
/** beta's own secret: 24 bytes of 0x2b (acme's, TEST_SECRET, is 24 bytes of 0x2a). */
const BETA_SECRET = `whsec_${Buffer.alloc(24, 43).toString('base64')}`;

t.test('two tenants, one job id: each sees, fires and deletes only its own', async (t) => {
  const ac = await ApiCluster.start(t);
  // A leader change on a loaded machine answers UNAVAILABLE (retry after the hint); a user's
  // client retries that, and so does this one, so that only the answers under test remain.
  const raw: ApiClient = ac.client('n1');
  const c = {
    call: <T>(service: PublicServiceName, method: string, request: object): Promise<T> =>
      retryUnavailable(() => raw.call<T>(service, method, request)),
  };
  await createTenantCarefully(ac.client('n2'), { tenantId: 'beta', signingSecret: BETA_SECRET });
  await createTenantCarefully(ac.client('n3'), { tenantId: 'gamma' });

  // The same id and the same request id under two tenants: two jobs, neither a duplicate.
  for (const tenant of ['acme', 'beta']) {
    const res = await retryUnavailable(() =>
      ac.client(tenant === 'acme' ? 'n2' : 'n3').call<Obj>('JobService', 'CreateJob', {
        jobId: JOB,
        requestId: 'nightly-1',
        spec: ac.spec({
          tenant,
          schedule: '* * * * * *',
          target: { url: `${ac.sink.url}/${tenant}` },
        }),
      }),
    );
    t.equal(res['duplicate'], false, `${tenant}: created, not a duplicate of the other's`);
    t.equal((res['job'] as Obj)['id'], JOB, `${tenant}: the job is named by its id`);
  }
  const again = await refusal(
    c.call('JobService', 'CreateJob', { jobId: JOB, spec: ac.spec({ tenant: 'beta' }) }),
  );
  t.equal(again.code, 'JOB_ALREADY_EXISTS', 'within one tenant the id is taken');

  for (const tenant of ['acme', 'beta']) {
    const job = await c.call<Obj>('JobService', 'GetJob', { tenant, jobId: JOB });
    const spec = job['spec'] as Obj;
    t.equal(job['id'], JOB);
    t.equal(spec['tenant'], tenant, `GetJob under ${tenant}: its own job`);
    t.equal(
      (spec['target'] as Obj)['url'],
      `${ac.sink.url}/${tenant}`,
      `${tenant}: its own target`,
    );
    const list = await c.call<Obj>('JobService', 'ListJobs', { tenant });
    t.same(
      (list['jobs'] as Obj[]).map((j) => [j['id'], (j['spec'] as Obj)['tenant']]),
      [[JOB, tenant]],
      `ListJobs of ${tenant}: only its own`,
    );
  }
  const gammaList = await c.call<Obj>('JobService', 'ListJobs', { tenant: 'gamma' });
  t.same(gammaList['jobs'], [], 'gamma lists no job');

  // Another tenant's id answers as a missing one does: same status, code and words.
  const other = await refusal(c.call('JobService', 'GetJob', { tenant: 'gamma', jobId: JOB }));
  const never = await refusal(
    c.call('JobService', 'GetJob', { tenant: 'gamma', jobId: 'never-existed' }),
  );
  t.equal(other.status, 5, "another tenant's id: NOT_FOUND");
  t.equal(other.code, 'JOB_NOT_FOUND');
  t.equal(other.code, never.code);
  t.equal(other.message, never.message.replace('never-existed', JOB), 'in the same words');
  t.notMatch(other.message, /acme|beta|gamma|\//, 'naming no tenant and no key');
  for (const method of ['PauseJob', 'ResumeJob', 'TriggerJob', 'DeleteJob']) {
    const e = await refusal(c.call('JobService', method, { tenant: 'gamma', jobId: JOB }));
    t.equal(e.code, 'JOB_NOT_FOUND', `${method} under gamma: NOT_FOUND`);
    t.equal(e.message, other.message, `${method}: the same words`);
  }
  const upd = await refusal(
    c.call('JobService', 'UpdateJob', {
      tenant: 'gamma',
      jobId: JOB,
      spec: ac.spec({ tenant: 'gamma' }),
    }),
  );
  t.equal(upd.code, 'JOB_NOT_FOUND', 'UpdateJob under gamma: NOT_FOUND');
  const runsOfOther = await refusal(
    c.call('RunService', 'ListRuns', { tenant: 'gamma', jobId: JOB }),
  );
  t.equal(runsOfOther.code, 'JOB_NOT_FOUND', 'ListRuns under gamma: NOT_FOUND');

  // Both fire; each tenant's runs are its own.
  const startedMs = Date.now();
  const ofTenant = (tenant: string): Receipt[] =>
    ac.sink.of(JOB, tenant).filter((r) => r.status === 200);
  await eventually(() => {
    for (const tenant of ['acme', 'beta'])
      if (ofTenant(tenant).filter((r) => r.slotMs > startedMs).length < 3)
        return Promise.reject(new Error(`${tenant} has not fired 3 times`));
    return Promise.resolve();
  }, 20_000);
  const runsOf = async (tenant: string): Promise<Obj[]> =>
    (await c.call<Obj>('RunService', 'ListRuns', { tenant, jobId: JOB, pageSize: 1000 }))[
      'runs'
    ] as Obj[];
  const fireIds = new Map<string, Set<string>>();
  for (const tenant of ['acme', 'beta']) {
    const runs = await runsOf(tenant);
    t.ok(runs.length >= 3, `ListRuns of ${tenant}: ${runs.length} runs`);
    t.ok(
      runs.every(
        (r) =>
          r['jobId'] === JOB &&
          r['tenant'] === tenant &&
          r['fireId'] === `${tenant}/${JOB}:${String(r['slotMs'])}`,
      ),
      `${tenant}: every run is its own, its fire id carrying the tenant`,
    );
    fireIds.set(tenant, new Set(runs.map((r) => r['fireId'] as string)));
  }
  const acmeFire = [...fireIds.get('acme')!][0]!;
  const got = await c.call<Obj>('RunService', 'GetRun', { tenant: 'acme', fireId: acmeFire });
  t.equal(got['fireId'], acmeFire, 'GetRun of a fire id under its own tenant');
  const crossRun = await refusal(
    c.call('RunService', 'GetRun', { tenant: 'beta', fireId: acmeFire }),
  );
  const missingFire = `beta/${JOB}:1`;
  const missingRun = await refusal(
    c.call('RunService', 'GetRun', { tenant: 'beta', fireId: missingFire }),
  );
  t.equal(crossRun.code, 'RUN_NOT_FOUND', "another tenant's fire id: NOT_FOUND");
  t.equal(crossRun.code, missingRun.code);
  t.equal(
    crossRun.message.replace(acmeFire, 'F'),
    missingRun.message.replace(missingFire, 'F'),
    'in the words of a missing run',
  );
  const crossReplay = await refusal(
    c.call('RunService', 'ReplayRun', { tenant: 'beta', fireId: acmeFire }),
  );
  t.equal(crossReplay.code, 'RUN_NOT_FOUND', "ReplayRun of another tenant's fire id: NOT_FOUND");

  // What the receivers got: distinct fire ids carrying the tenant, each body its own tenant's,
  // sent to its own target, signed with its own tenant's secret only.
  const keys = {
    acme: compileSigningKeys([TEST_SECRET]),
    beta: compileSigningKeys([BETA_SECRET]),
  };
  const delivered = new Map<string, Set<string>>();
  for (const tenant of ['acme', 'beta'] as const) {
    const receipts = ac.sink.receipts.filter((r) => r.jobId === JOB && r.tenant === tenant);
    const otherTenant = tenant === 'acme' ? 'beta' : 'acme';
    t.ok(receipts.length >= 3, `${tenant}: ${receipts.length} deliveries`);
    t.ok(
      receipts.every(
        (r) =>
          r.fireId === `${tenant}/${JOB}:${r.slotMs}` &&
          r.body['fireId'] === r.fireId &&
          r.headers['webhook-id'] === r.fireId,
      ),
      `${tenant}: fire ids ${tenant}/${JOB}:<slot> in the body and headers`,
    );
    t.ok(
      receipts.every((r) => r.path === `/${tenant}`),
      `${tenant}: every delivery reached its own target`,
    );
    const nowMs = Date.now();
    t.ok(
      receipts.every((r) => verifyWebhook(r.headers, r.text, keys[tenant], { nowMs: r.atMs }).ok),
      `${tenant}: every signature verifies with ${tenant}'s secret`,
    );
    t.notOk(
      receipts.some((r) => verifyWebhook(r.headers, r.text, keys[otherTenant], { nowMs }).ok),
      `${tenant}: none verifies with ${otherTenant}'s secret`,
    );
    delivered.set(tenant, new Set(receipts.map((r) => r.fireId)));
  }
  const shared = [...delivered.get('acme')!].filter((id) => delivered.get('beta')!.has(id));
  t.same(shared, [], 'no fire id is delivered for both tenants');

  // tickctl, as a user of beta.
  const endpoint = endpointOf(ac.cluster.node('n2'));
  const shown = await runTickctl([
    'jobs',
    'get',
    JOB,
    '--tenant',
    'beta',
    '--json',
    '--endpoint',
    endpoint,
  ]);
  t.equal(shown.code, 0, `tickctl jobs get --tenant beta: ${shown.stderr}`);
  const betaJob = JSON.parse(shown.stdout) as Obj;
  t.equal((betaJob['spec'] as Obj)['tenant'], 'beta', "tickctl shows beta's job");
  const gammaCli = await runTickctl([
    'jobs',
    'get',
    JOB,
    '--tenant',
    'gamma',
    '--endpoint',
    endpoint,
  ]);
  t.equal(gammaCli.code, 3, "tickctl: another tenant's job is not found (exit 3)");

  // Deleting acme's job leaves beta's, which keeps firing.
  await c.call('JobService', 'DeleteJob', { tenant: 'acme', jobId: JOB });
  const deletedMs = Date.now();
  const gone = await refusal(c.call('JobService', 'GetJob', { tenant: 'acme', jobId: JOB }));
  t.equal(gone.code, 'JOB_NOT_FOUND', "acme's job is gone");
  const kept = await c.call<Obj>('JobService', 'GetJob', { tenant: 'beta', jobId: JOB });
  t.equal((kept['spec'] as Obj)['tenant'], 'beta', "beta's job is still there");
  t.same(
    ((await c.call<Obj>('JobService', 'ListJobs', { tenant: 'acme' }))['jobs'] as Obj[]).length,
    0,
    'acme lists nothing',
  );
  t.same(
    ((await c.call<Obj>('JobService', 'ListJobs', { tenant: 'beta' }))['jobs'] as Obj[]).map(
      (j) => j['id'],
    ),
    [JOB],
    'beta still lists its job',
  );
  await eventually(() => {
    const late = ofTenant('beta').filter((r) => r.slotMs > deletedMs + 1000);
    return late.length >= 2 ? Promise.resolve() : Promise.reject(new Error('beta idle'));
  }, 15_000);
  t.pass('beta keeps firing after acme deleted its job');
  await sleep(1500);
  t.same(
    ofTenant('acme')
      .filter((r) => r.slotMs > deletedMs + 1000)
      .map((r) => r.fireId),
    [],
    'acme fires no slot after its delete',
  );
});
