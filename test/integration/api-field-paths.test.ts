// One way to name a field: every violation a bad request gets names the proto field path in
// snake_case, under one prefix (the request's own field, e.g. `spec.`), and a reason that names
// other fields the same way. Method: against a real cluster, a table of bad requests through the
// public gRPC API (an ApiClient: proto-loader, enums sent as names or as numbers), each with the
// exact list of paths its INVALID_ARGUMENT must carry; then `tickctl preview` (computed locally)
// and PreviewSchedule (computed by the cluster) for the same bad cron line name the same path.
// Also what a paused job shows (no next fire, through the API and tickctl) and that an update
// cannot move a job to another tenant.
import t from 'tap';
import { ApiCallError } from '../../src/api/client.js';
import type { PublicServiceName } from '../../src/api/proto-options.js';
import { ApiCluster, endpointOf } from '../helpers/api-cluster.js';
import { retryUnavailable } from '../helpers/api-retry.js';
import { freePort, TEST_ADMIN_TOKEN } from '../helpers/cluster.js';
import { runTickctl as runTickctlProcess, runTickctlInProcess } from '../helpers/tickctl.js';

type Obj = Record<string, unknown>;

/** [what, service, method, request, the exact violation paths, a reason must match]. */
type Case = [string, PublicServiceName, string, (ac: ApiCluster) => Obj, string[], RegExp?];

const PAST = Date.UTC(2020, 0, 1);
/** A safe integer that is not an instant (beyond ±8.64e15 ms). */
const NOT_AN_INSTANT = 8_640_000_000_000_001;

const CASES: Case[] = [
  [
    'bad tenant',
    'JobService',
    'CreateJob',
    (ac) => ({ jobId: 'p1', spec: ac.spec({ tenant: 'Not A Tenant' }) }),
    ['spec.tenant'],
  ],
  [
    'bad day of month',
    'JobService',
    'CreateJob',
    (ac) => ({ jobId: 'p2', spec: ac.spec({ schedule: '0 0 32 * *' }) }),
    ['spec.schedule.day_of_month'],
  ],
  [
    'end before start',
    'JobService',
    'CreateJob',
    (ac) => ({
      jobId: 'p3',
      spec: ac.spec({ startAtMs: 2_000_000_000_000, endAtMs: 1_900_000_000_000 }),
    }),
    ['spec.end_at_ms'],
    /^must not be before start_at_ms$/,
  ],
  [
    'no slot left',
    'JobService',
    'CreateJob',
    (ac) => ({ jobId: 'p4', spec: ac.spec({ schedule: 'at 2020-01-01T00:00:00Z' }) }),
    ['spec.schedule'],
    /has no slot/,
  ],
  [
    'anchor not an instant',
    'JobService',
    'CreateJob',
    (ac) => ({ jobId: 'p5', spec: ac.spec({ schedule: 'every 10s', anchorMs: NOT_AN_INSTANT }) }),
    ['spec.anchor_ms'],
  ],
  [
    'retry attempts',
    'JobService',
    'CreateJob',
    (ac) => ({ jobId: 'p6', spec: ac.spec({ retry: { maxAttempts: 0 } }) }),
    ['spec.retry.max_attempts'],
  ],
  [
    'backoff above its cap',
    'JobService',
    'CreateJob',
    (ac) => ({
      jobId: 'p7',
      spec: ac.spec({ retry: { initialBackoffMs: 9000, maxBackoffMs: 1000 } }),
    }),
    ['spec.retry.max_backoff_ms'],
    /initial_backoff_ms/,
  ],
  [
    'delivery by number',
    'JobService',
    'CreateJob',
    (ac) => ({ jobId: 'p8', spec: ac.spec({ delivery: 7 }) }),
    ['spec.delivery'],
    /DELIVERY_SEMANTICS_AT_MOST_ONCE/,
  ],
  [
    'misfire by number',
    'JobService',
    'CreateJob',
    (ac) => ({ jobId: 'p9', spec: ac.spec({ misfire: { policy: 9 } }) }),
    ['spec.misfire.policy'],
    /MISFIRE_POLICY_FIRE_ONCE/,
  ],
  [
    'overlap by number',
    'JobService',
    'CreateJob',
    (ac) => ({ jobId: 'p10', spec: ac.spec({ overlap: { policy: 9 } }) }),
    ['spec.overlap.policy'],
    /OVERLAP_POLICY_BUFFER_ALL/,
  ],
  [
    'payload in a batch',
    'JobService',
    'CreateJobs',
    (ac) => ({
      jobs: [
        { jobId: 'b0', spec: ac.spec() },
        { jobId: 'b1', spec: ac.spec({ payloadJson: '{"a":' }) },
      ],
    }),
    ['jobs[1].spec.payload_json'],
  ],
  [
    'batch id twice',
    'JobService',
    'CreateJobs',
    (ac) => ({
      jobs: [
        { jobId: 'b2', spec: ac.spec() },
        { jobId: 'b2', spec: ac.spec() },
      ],
    }),
    ['jobs[1].job_id'],
  ],
  [
    'update: bad tenant',
    'JobService',
    'UpdateJob',
    (ac) => ({ tenant: 'acme', jobId: 'base', spec: ac.spec({ tenant: 'Not A Tenant' }) }),
    ['spec.tenant'],
  ],
  [
    'update: other tenant',
    'JobService',
    'UpdateJob',
    (ac) => ({ tenant: 'acme', jobId: 'base', spec: ac.spec({ tenant: 'other' }) }),
    ['spec.tenant'],
    /^must be the job's tenant acme: a job belongs to its tenant for life/,
  ],
  [
    'update: no tenant',
    'JobService',
    'UpdateJob',
    (ac) => ({ jobId: 'base', spec: ac.spec() }),
    ['tenant'],
    /^is required: job ids are unique per tenant$/,
  ],
  [
    'get: bad tenant and job id',
    'JobService',
    'GetJob',
    () => ({ tenant: 'Bad!', jobId: 'bad id' }),
    ['job_id', 'tenant'],
  ],
  [
    'update: no slot left',
    'JobService',
    'UpdateJob',
    (ac) => ({
      tenant: 'acme',
      jobId: 'base',
      spec: ac.spec({ schedule: 'at 2020-01-01T00:00:00Z' }),
    }),
    ['spec.schedule'],
    /has no slot/,
  ],
  [
    'update: bad version',
    'JobService',
    'UpdateJob',
    (ac) => ({ tenant: 'acme', jobId: 'base', spec: ac.spec(), expectedVersion: -1 }),
    ['expected_version'],
  ],
  [
    'backfill range',
    'JobService',
    'BackfillJob',
    () => ({ tenant: 'acme', jobId: 'base', fromMs: PAST + 1000, toMs: PAST }),
    ['to_ms'],
    /^must be after from_ms$/,
  ],
  [
    'preview day of month',
    'JobService',
    'PreviewSchedule',
    () => ({ schedule: '0 0 32 * *' }),
    ['schedule.day_of_month'],
  ],
  [
    'preview anchor',
    'JobService',
    'PreviewSchedule',
    () => ({ schedule: 'every 10s', anchorMs: NOT_AN_INSTANT }),
    ['anchor_ms'],
  ],
  ['list jobs tenant', 'JobService', 'ListJobs', () => ({ tenant: 'Bad!' }), ['tenant']],
  [
    'run status by number',
    'RunService',
    'ListRuns',
    () => ({ tenant: 'acme', jobId: 'base', status: 99 }),
    ['status'],
    /RUN_STATUS_DEAD/,
  ],
  [
    'fire id',
    'RunService',
    'GetRun',
    () => ({ tenant: 'acme', fireId: 'nocolon' }),
    ['fire_id'],
    /^must be <tenant>\/<job_id>:<slot ms>/,
  ],
  [
    'fire id without its tenant',
    'RunService',
    'ReplayRun',
    () => ({ tenant: 'acme', fireId: 'base:1000' }),
    ['fire_id'],
  ],
  ['run tenant', 'RunService', 'GetRun', () => ({ fireId: 'acme/base:1000' }), ['tenant']],
  [
    'tenant secret',
    'TenantService',
    'CreateTenant',
    () => ({ tenantId: 'gamma', signingSecret: 'nope' }),
    ['signing_secret'],
  ],
  ['tenant id', 'TenantService', 'CreateTenant', () => ({ tenantId: 'Bad Id' }), ['tenant_id']],
  [
    'rotate secret',
    'TenantService',
    'RotateSecret',
    () => ({ tenantId: 'acme', newSecret: 'nope' }),
    ['new_secret'],
  ],
  [
    'tenant weight',
    'TenantService',
    'UpdateTenant',
    () => ({ tenantId: 'acme', priorityWeight: 0 }),
    ['priority_weight'],
  ],
];

const tickctl = (argv: readonly string[]) => runTickctlInProcess(argv);

t.test('bad requests: exact snake_case field paths with one prefix', async (t) => {
  const ac = await ApiCluster.start(t, { groups: 2 });
  const c = ac.client('n3');
  await retryUnavailable(() => c.call('TenantService', 'CreateTenant', { tenantId: 'other' }));
  await retryUnavailable(() =>
    c.call('JobService', 'CreateJob', { jobId: 'base', spec: ac.spec({ schedule: 'every 1h' }) }),
  );
  for (const [what, service, method, req, paths, reason] of CASES) {
    const err = await retryUnavailable(() => c.call(service, method, req(ac))).catch(
      (e: unknown) => e,
    );
    t.type(err, ApiCallError, `${what}: refused`);
    if (!(err instanceof ApiCallError)) continue;
    const e = err;
    t.equal(e.status, 3, `${what}: INVALID_ARGUMENT (${e.message})`);
    t.same(
      e.violations.map((v) => v.field),
      paths,
      `${what}: ${e.violations.map((v) => `${v.field}: ${v.reason}`).join('; ')}`,
    );
    if (reason) t.match(e.violations[0]?.reason ?? '', reason, `${what}: the reason`);
  }
  const base = await c.call<Obj>('JobService', 'GetJob', { tenant: 'acme', jobId: 'base' });
  t.equal((base['spec'] as Obj)['tenant'], 'acme', 'the job is still the tenant it was');
  t.equal(base['version'], 1, 'no refused update changed it');

  // The same bad cron line named the same way by the cluster and by tickctl preview.
  const local = await tickctl(['preview', '0 0 32 * *', '--json']);
  t.equal(local.code, 2);
  const localFields = (
    JSON.parse(local.err) as { error: { violations: { field: string }[] } }
  ).error.violations.map((v) => v.field);
  t.same(localFields, ['schedule.day_of_month'], 'tickctl preview --json names the API path');
  const text = await tickctl(['preview', '0 0 32 * *']);
  t.match(text.err, /^ {2}schedule\.day_of_month \(token 2, char 4\): /m, 'and so does its text');
  const viaCluster = await tickctl([
    'jobs',
    'preview',
    '0 0 32 * *',
    '--endpoint',
    endpointOf(ac.cluster.node('n1')),
  ]);
  t.equal(viaCluster.code, 2);
  t.match(
    viaCluster.err,
    /^ {2}schedule\.day_of_month: /m,
    'tickctl jobs preview (the cluster) names it the same',
  );
  const update = await tickctl([
    'jobs',
    'update',
    'base',
    '--tenant',
    'acme',
    '--schedule',
    '0 0 32 * *',
    '--endpoint',
    endpointOf(ac.cluster.node('n1')),
  ]);
  t.equal(update.code, 2);
  t.match(
    update.err,
    /^ {2}spec\.schedule\.day_of_month: /m,
    'tickctl jobs update names spec.schedule.…',
  );
  t.notMatch(update.err, /spec\.spec/, 'one prefix');
});

t.test('a paused job shows no next fire, through the API and tickctl', async (t) => {
  const ac = await ApiCluster.start(t, { groups: 2 });
  const c = ac.client('n1');
  const endpoint = endpointOf(ac.cluster.node('n2'));
  await retryUnavailable(() =>
    c.call('JobService', 'CreateJob', { jobId: 'pz', spec: ac.spec({ schedule: 'every 1h' }) }),
  );
  const paused = await retryUnavailable(() =>
    c.call<Obj>('JobService', 'PauseJob', { tenant: 'acme', jobId: 'pz' }),
  );
  t.equal(paused['paused'], true);
  t.equal(paused['nextFireAtMs'], undefined, 'PauseJob: no next_fire_at_ms');
  t.equal(paused['nextFireAt'], '', 'PauseJob: no next_fire_at');
  const got = await c.call<Obj>('JobService', 'GetJob', { tenant: 'acme', jobId: 'pz' });
  t.equal(got['nextFireAtMs'], undefined, 'GetJob: no next_fire_at_ms');
  const listed = await c.call<{ jobs: Obj[] }>('JobService', 'ListJobs', { tenant: 'acme' });
  t.equal(listed.jobs.find((j) => j['id'] === 'pz')?.['nextFireAtMs'], undefined, 'ListJobs: none');
  const shown = await tickctl(['jobs', 'get', 'pz', '--tenant', 'acme', '--endpoint', endpoint]);
  t.match(
    shown.out,
    /^pz\s+acme\s+every 1h\s+paused\s+-\s+\d+$/m,
    'tickctl jobs get: paused, NEXT FIRE -',
  );
  // jobs create --anchor: the interval counts from the instant given.
  const anchor = '2025-07-01T09:00:07Z';
  const made = await tickctl([
    'jobs',
    'create',
    'anchored',
    '--tenant',
    'acme',
    '--schedule',
    'every 10s',
    '--anchor',
    anchor,
    '--url',
    `${ac.sink.url}/hook`,
    '--endpoint',
    endpoint,
  ]);
  t.equal(made.code, 0, `jobs create --anchor: ${made.err}`);
  const anchored = await c.call<Obj>('JobService', 'GetJob', {
    tenant: 'acme',
    jobId: 'anchored',
  });
  t.equal((anchored['spec'] as Obj)['anchorMs'], Date.parse(anchor), 'the anchor is the one given');
  t.equal(
    ((anchored['nextFireAtMs'] as number) - Date.parse(anchor)) % 10_000,
    0,
    'slots 10 s apart from it',
  );
  const resumed = await retryUnavailable(() =>
    c.call<Obj>('JobService', 'ResumeJob', { tenant: 'acme', jobId: 'pz' }),
  );
  t.type(resumed['nextFireAtMs'], 'number', 'resumed: a next fire again');

  // --endpoints: a real bin/tickctl process, the first address a port nothing listens on.
  const dead = `${ac.cluster.node('n1').host}:${await freePort(ac.cluster.node('n1').host)}`;
  const viaSecond = await runTickctlProcess([
    'jobs',
    'get',
    'pz',
    '--tenant',
    'acme',
    '--endpoints',
    `${dead},${endpoint}`,
  ]);
  t.equal(viaSecond.code, 0, `--endpoints dead,live: served by the live one (${viaSecond.stderr})`);
  t.match(viaSecond.stdout, /^pz\s+acme\s+every 1h/m, 'and prints the job');
  const dead2 = `${ac.cluster.node('n1').host}:${await freePort(ac.cluster.node('n1').host)}`;
  const none = await runTickctlProcess([
    'jobs',
    'get',
    'pz',
    '--tenant',
    'acme',
    '--endpoints',
    `${dead},${dead2}`,
  ]);
  t.equal(none.code, 5, 'every endpoint dead: exit 5 (unavailable, safe to retry)');
  t.match(none.stderr, dead, 'the error names the first endpoint');
  t.match(none.stderr, dead2, 'and the second');
  const env = {
    ...process.env,
    TICKRAFT_TOKEN: TEST_ADMIN_TOKEN,
    TICKCTL_ENDPOINTS: `${dead},${endpoint}`,
  };
  const viaEnv = await runTickctlProcess(['jobs', 'get', 'pz', '--tenant', 'acme'], { env });
  t.equal(viaEnv.code, 0, `TICKCTL_ENDPOINTS works as --endpoints (${viaEnv.stderr})`);
  const typo = await runTickctlProcess([
    'jobs',
    'get',
    'pz',
    '--tenant',
    'acme',
    '--endpoints',
    `${endpoint};${dead}`,
  ]);
  t.equal(typo.code, 2, 'a malformed list is a usage error');
  t.match(typo.stderr, /--endpoints: '.*' is not host:port/, 'naming the flag');
  const both = await runTickctlProcess([
    'jobs',
    'get',
    'pz',
    '--tenant',
    'acme',
    '--endpoint',
    endpoint,
    '--endpoints',
    endpoint,
  ]);
  t.equal(both.code, 2, '--endpoint and --endpoints together: a usage error');
  // The connection options before the command, as etcdctl takes them.
  const first = await runTickctlProcess([
    '--endpoints',
    `${dead},${endpoint}`,
    '--json',
    'jobs',
    'get',
    'pz',
    '--tenant',
    'acme',
  ]);
  t.equal(first.code, 0, `--endpoints and --json before the command (${first.stderr})`);
  t.equal((JSON.parse(first.stdout) as Obj)['id'], 'pz', 'served by the live one, as JSON');
  // A flag wins over the other flag's variable: --endpoints over TICKCTL_ENDPOINT, and the reverse.
  const overEnv = await runTickctlProcess(
    ['jobs', 'get', 'pz', '--tenant', 'acme', '--endpoints', `${dead},${endpoint}`],
    {
      env: { ...process.env, TICKRAFT_TOKEN: TEST_ADMIN_TOKEN, TICKCTL_ENDPOINT: dead },
    },
  );
  t.equal(
    overEnv.code,
    0,
    `--endpoints with TICKCTL_ENDPOINT set: the flag wins (${overEnv.stderr})`,
  );
  const overList = await runTickctlProcess(
    ['--endpoint', endpoint, 'jobs', 'get', 'pz', '--tenant', 'acme'],
    {
      env: {
        ...process.env,
        TICKRAFT_TOKEN: TEST_ADMIN_TOKEN,
        TICKCTL_ENDPOINTS: `${dead},${dead2}`,
      },
    },
  );
  t.equal(
    overList.code,
    0,
    `--endpoint with TICKCTL_ENDPOINTS set: the flag wins (${overList.stderr})`,
  );
});
