// Bad input through the public API and tickctl against real processes. Method: for every field
// of CreateJob, one invalid value; the answer must be INVALID_ARGUMENT whose google.rpc.BadRequest
// (decoded from grpc-status-details-bin) names that field, and the job must not exist afterwards.
// Then tickctl as a user runs it (the real bin/tickctl in a child process): tenants, jobs, runs,
// cluster status, --json, and the exit codes of invalid input and of a missing job.
import t from 'tap';
import { ApiCallError } from '../../src/api/client.js';
import { ApiCluster, endpointOf } from '../helpers/api-cluster.js';
import { runTickctl, type TickctlResult } from '../helpers/tickctl.js';

type Obj = Record<string, unknown>;
const URL_OK = 'http://127.0.0.1:9/hook';

/** [field the violation must name, the request's changes]. */
const CASES: [string, Obj, Obj?][] = [
  ['job_id', {}, { jobId: 'bad id!' }],
  ['request_id', {}, { requestId: 'r'.repeat(200) }],
  ['spec.tenant', { tenant: 'Not A Tenant' }],
  ['spec.tenant', { tenant: '' }],
  ['spec.tenant', { tenant: 'ghost' }],
  ['spec.name', { name: 'n'.repeat(201) }],
  ['spec.schedule', { schedule: '' }],
  ['spec.schedule.minute', { schedule: '61 * * * *' }],
  ['spec.timezone', { timezone: 'Mars/Olympus' }],
  ['spec.anchor_ms', { schedule: 'every 10s', anchorMs: 2 ** 60 }],
  ['spec.target', { target: null }],
  ['spec.target.url', { target: { url: 'ftp://example.com/x' } }],
  ['spec.target.url', { target: { url: 'worker:Not A Pool' } }],
  ['spec.target.url', { target: { url: 'worker:reports?tags=gpu,gpu' } }],
  ['spec.target.headers', { target: { url: 'worker:reports', headers: { 'x-a': 'b' } } }],
  [
    'spec.target.headers.idempotency-key',
    { target: { url: URL_OK, headers: { 'idempotency-key': 'x' } } },
  ],
  ['spec.payload_json', { payloadJson: '{"a":' }],
  ['spec.delivery', { delivery: 7 }],
  ['spec.retry.max_attempts', { retry: { maxAttempts: 0 } }],
  ['spec.retry.initial_backoff_ms', { retry: { initialBackoffMs: -1 } }],
  ['spec.retry.max_backoff_ms', { retry: { maxBackoffMs: -1 } }],
  ['spec.retry.multiplier', { retry: { multiplier: 0.5 } }],
  ['spec.retry.max_age_ms', { retry: { maxAgeMs: -1 } }],
  ['spec.attempt_deadline_ms', { attemptDeadlineMs: 0 }],
  ['spec.misfire.policy', { misfire: { policy: 9 } }],
  ['spec.misfire.fire_all_cap', { misfire: { fireAllCap: 0 } }],
  ['spec.misfire.catch_up_window_ms', { misfire: { catchUpWindowMs: -1 } }],
  ['spec.overlap.policy', { overlap: { policy: 9 } }],
  ['spec.overlap.buffer_cap', { overlap: { bufferCap: 0 } }],
  [
    'spec.overlap.max_concurrency',
    { overlap: { policy: 'OVERLAP_POLICY_SKIP', maxConcurrency: 0 } },
  ],
  [
    'spec.overlap.max_concurrency',
    { overlap: { policy: 'OVERLAP_POLICY_BUFFER_ALL', maxConcurrency: 1001 } },
  ],
  [
    'spec.overlap.max_concurrency',
    { overlap: { policy: 'OVERLAP_POLICY_ALLOW', maxConcurrency: 2 } },
  ],
  ['spec.overlap.max_concurrency', { overlap: { maxConcurrency: 1 } }],
  ['spec.priority', { priority: 9 }],
  ['spec.start_at_ms', { startAtMs: 2 ** 60 }],
  ['spec.end_at_ms', { startAtMs: 2_000_000_000_000, endAtMs: 1_000_000_000_000 }],
  ['spec.remaining_fires', { remainingFires: 0 }],
];

function tickctl(
  t: { teardown: (fn: () => void) => void },
  args: string[],
  endpoint: string,
): Promise<TickctlResult> {
  return runTickctl(args, { t, env: { ...process.env, TICKCTL_ENDPOINT: endpoint } });
}

t.test(
  'every CreateJob field: INVALID_ARGUMENT naming it, nothing created; then tickctl',
  async (t) => {
    const ac = await ApiCluster.start(t, { groups: 2 });
    const c = ac.client('n3');
    for (const [i, [field, specChanges, reqChanges]] of CASES.entries()) {
      const jobId = `invalid-${i}`;
      const req = { jobId, spec: { ...ac.spec(), ...specChanges }, ...reqChanges };
      const err = await c.call('JobService', 'CreateJob', req).catch((e: unknown) => e);
      t.type(err, ApiCallError, `${field}: refused`);
      const e = err as ApiCallError;
      t.equal(e.status, 3, `${field}: INVALID_ARGUMENT`);
      t.ok(
        e.violations.some((v) => v.field === field && v.reason !== ''),
        `${field}: BadRequest names it (${e.violations.map((v) => `${v.field}: ${v.reason}`).join('; ')})`,
      );
      const gone = await c
        .call('JobService', 'GetJob', { tenant: 'acme', jobId: req.jobId })
        .catch((x: unknown) => x);
      // An id that is itself invalid cannot be read back either: INVALID_ARGUMENT again.
      t.equal(
        (gone as ApiCallError).status,
        field === 'job_id' ? 3 : 5,
        `${field}: nothing created`,
      );
    }
    // One batch with one bad job writes none of them.
    const batch = await c
      .call('JobService', 'CreateJobs', {
        jobs: [
          { jobId: 'batch-ok', spec: ac.spec() },
          { jobId: 'batch-bad', spec: { ...ac.spec(), priority: 9 } },
        ],
      })
      .catch((e: unknown) => e);
    t.same(
      (batch as ApiCallError).violations.map((v) => v.field),
      ['jobs[1].spec.priority'],
    );
    const none = await c
      .call('JobService', 'GetJob', { tenant: 'acme', jobId: 'batch-ok' })
      .catch((e: unknown) => e);
    t.equal((none as ApiCallError).status, 5, 'a batch with a bad job creates nothing');
    // An id twice in one batch is named, and nothing is created.
    const twice = await c
      .call('JobService', 'CreateJobs', {
        jobs: [
          { jobId: 'twice-a', spec: ac.spec() },
          { jobId: 'twice-b', spec: ac.spec() },
          { jobId: 'twice-a', spec: ac.spec() },
        ],
      })
      .catch((e: unknown) => e);
    t.same(
      (twice as ApiCallError).violations.map((v) => v.field),
      ['jobs[2].job_id'],
      'the repeated id is named',
    );
    for (const jobId of ['twice-a', 'twice-b']) {
      const r = await c
        .call('JobService', 'GetJob', { tenant: 'acme', jobId })
        .catch((e: unknown) => e);
      t.equal((r as ApiCallError).status, 5, `${jobId}: not created`);
    }
    // A batch retried with the same request ids creates each job once.
    const withIds = Array.from({ length: 40 }, (_, i) => ({
      jobId: `rq-batch-${i}`,
      requestId: `rq-batch-req-${i}`,
      spec: ac.spec(),
    }));
    const batchFirst = await c.call<{ created: number; duplicates: number }>(
      'JobService',
      'CreateJobs',
      {
        jobs: withIds,
      },
    );
    const batchAgain = await c.call<{ created: number; duplicates: number }>(
      'JobService',
      'CreateJobs',
      {
        jobs: withIds,
      },
    );
    t.same([batchFirst.created, batchFirst.duplicates], [40, 0], 'the first call creates all');
    t.same([batchAgain.created, batchAgain.duplicates], [0, 40], 'the retry creates none');

    // An overlap limit, set or not, reads back as it was sent: through CreateJob and through
    // CreateJobs (whose entries the groups' leaders check again from their packed form).
    const allowReason = (
      (await c
        .call('JobService', 'CreateJob', {
          jobId: 'limit-allow',
          spec: { ...ac.spec(), overlap: { maxConcurrency: 2 } },
        })
        .catch((e: unknown) => e)) as ApiCallError
    ).violations[0]?.reason;
    t.match(
      allowReason,
      /places no limit.*OVERLAP_POLICY_SKIP/,
      'allow + limit: the reason says why',
    );
    const rangeReason = (
      (await c
        .call('JobService', 'CreateJob', {
          jobId: 'limit-range',
          spec: { ...ac.spec(), overlap: { policy: 'OVERLAP_POLICY_SKIP', maxConcurrency: 0 } },
        })
        .catch((e: unknown) => e)) as ApiCallError
    ).violations[0]?.reason;
    t.equal(rangeReason, 'must be in [1, 1000]', 'out of range: the range named');
    await c.call('JobService', 'CreateJob', {
      jobId: 'limit-one',
      spec: { ...ac.spec(), overlap: { policy: 'OVERLAP_POLICY_SKIP', maxConcurrency: 3 } },
    });
    await c.call('JobService', 'CreateJobs', {
      jobs: Array.from({ length: 6 }, (_, i) => ({
        jobId: `limit-bulk-${i}`,
        spec: {
          ...ac.spec(),
          overlap:
            i % 2 === 0
              ? { policy: 'OVERLAP_POLICY_BUFFER_ALL', maxConcurrency: 4 }
              : { policy: 'OVERLAP_POLICY_BUFFER_ALL' },
        },
      })),
    });
    const overlapOf = async (jobId: string): Promise<Obj> =>
      ((await c.call<Obj>('JobService', 'GetJob', { tenant: 'acme', jobId }))['spec'] as Obj)[
        'overlap'
      ] as Obj;
    t.same(
      await overlapOf('limit-one'),
      { policy: 'OVERLAP_POLICY_SKIP', bufferCap: 10, maxConcurrency: 3 },
      'CreateJob: the limit reads back',
    );
    for (let i = 0; i < 6; i++) {
      const o = await overlapOf(`limit-bulk-${i}`);
      t.equal(o['maxConcurrency'], i % 2 === 0 ? 4 : undefined, `limit-bulk-${i}: as sent`);
    }

    // A job id names a job only with its tenant: a call without one is refused, naming it.
    for (const [service, method, req] of [
      ['JobService', 'GetJob', { jobId: 'batch-ok' }],
      ['JobService', 'DeleteJob', { jobId: 'batch-ok' }],
      ['RunService', 'ListRuns', { jobId: 'batch-ok' }],
      ['RunService', 'GetRun', { fireId: 'acme/batch-ok:1000' }],
      ['JobService', 'ListJobs', {}],
      ['AdminService', 'BulkPause', {}],
    ] as const) {
      const e = (await c.call(service, method, req).catch((x: unknown) => x)) as ApiCallError;
      t.equal(e.status, 3, `${method} without a tenant: INVALID_ARGUMENT`);
      t.same(
        e.violations,
        [{ field: 'tenant', reason: 'is required: job ids are unique per tenant' }],
        `${method}: names tenant`,
      );
    }
    const noTenant = (await c
      .call('JobService', 'CreateJob', { jobId: 'no-tenant', spec: { ...ac.spec(), tenant: '' } })
      .catch((x: unknown) => x)) as ApiCallError;
    t.match(
      noTenant.violations,
      [{ field: 'spec.tenant', reason: 'is required: job ids are unique per tenant' }],
      'CreateJob without spec.tenant names it',
    );

    const endpoint = endpointOf(ac.cluster.node('n2'));
    const created = await tickctl(t, ['tenants', 'create', 'beta'], endpoint);
    t.equal(created.code, 0, `tenants create: ${created.stderr}`);
    t.match(created.stdout, /signing secret \(shown once\): whsec_/);
    const createArgs = [
      'jobs',
      'create',
      'cli-job',
      '--tenant',
      'beta',
      '--schedule',
      '0 9 * * 1-5',
      '--tz',
      'Europe/Paris',
      '--url',
      URL_OK,
      '--request-id',
      'cli-1',
    ];
    const job = await tickctl(t, createArgs, endpoint);
    t.equal(job.code, 0, `jobs create: ${job.stderr}`);
    t.match(job.stdout, /cli-job\s+beta\s+0 9 \* \* 1-5 \(Europe\/Paris\)\s+active/);
    const again = await tickctl(t, createArgs, endpoint);
    t.equal(again.code, 0, 'a retried create with the same request id succeeds');
    const list = await tickctl(t, ['jobs', 'list', '--tenant', 'beta', '--json'], endpoint);
    t.equal(list.code, 0);
    t.same(
      (JSON.parse(list.stdout) as { jobs: Obj[] }).jobs.map((j) => j['id']),
      ['cli-job'],
      'one job',
    );
    const noFlag = await tickctl(t, ['jobs', 'pause', 'cli-job'], endpoint);
    t.equal(noFlag.code, 2, 'a job named without --tenant: usage error');
    t.match(noFlag.stderr, "required option '--tenant <id>' not specified");
    t.match(noFlag.stderr, 'job ids are unique per tenant');
    const paused = await tickctl(t, ['jobs', 'pause', 'cli-job', '--tenant', 'beta'], endpoint);
    t.match(paused.stdout, /paused/);
    const upd = await tickctl(
      t,
      ['jobs', 'update', 'cli-job', '--tenant', 'beta', '--name', 'weekday 9am'],
      endpoint,
    );
    t.equal(upd.code, 0, `jobs update: ${upd.stderr}`);
    const get = await tickctl(
      t,
      ['jobs', 'get', 'cli-job', '--tenant', 'beta', '--json'],
      endpoint,
    );
    t.equal((JSON.parse(get.stdout) as Obj)['version'], 2);
    const limit = await tickctl(
      t,
      [
        'jobs',
        'update',
        'cli-job',
        '--tenant',
        'beta',
        '--overlap',
        'buffer_one',
        '--max-concurrency',
        '3',
      ],
      endpoint,
    );
    t.equal(limit.code, 0, `jobs update --max-concurrency: ${limit.stderr}`);
    const shown = await tickctl(t, ['jobs', 'get', 'cli-job', '--tenant', 'beta'], endpoint);
    t.match(shown.stdout, /overlap: +buffer_one \(max concurrency 3\)/);
    const toAllow = await tickctl(
      t,
      ['jobs', 'update', 'cli-job', '--tenant', 'beta', '--overlap', 'allow'],
      endpoint,
    );
    t.equal(toAllow.code, 0, `jobs update --overlap allow drops the limit: ${toAllow.stderr}`);
    const afterAllow = await tickctl(
      t,
      ['jobs', 'get', 'cli-job', '--tenant', 'beta', '--json'],
      endpoint,
    );
    t.same(
      ((JSON.parse(afterAllow.stdout) as Obj)['spec'] as Obj)['overlap'],
      { policy: 'OVERLAP_POLICY_ALLOW', bufferCap: 10 },
      'allow, no limit',
    );
    const allowLimit = await tickctl(
      t,
      ['jobs', 'update', 'cli-job', '--tenant', 'beta', '--max-concurrency', '2'],
      endpoint,
    );
    t.equal(allowLimit.code, 2, "a limit for the job's allow policy: usage error");
    t.match(allowLimit.stderr, /--max-concurrency: overlap policy allow places no limit/);
    const bad = await tickctl(
      t,
      ['jobs', 'create', 'x y', '--tenant', 'beta', '--schedule', '61 * * * *', '--url', URL_OK],
      endpoint,
    );
    t.equal(bad.code, 2, 'invalid input exits 2');
    t.match(bad.stderr, /job_id: /);
    t.match(bad.stderr, /spec\.schedule\.minute: /);
    const missing = await tickctl(t, ['jobs', 'get', 'no-such-job', '--tenant', 'beta'], endpoint);
    t.equal(missing.code, 3, 'not found exits 3');
    const otherTenant = await tickctl(t, ['jobs', 'get', 'cli-job', '--tenant', 'acme'], endpoint);
    t.equal(otherTenant.code, 3, "another tenant's job id is not found either");
    t.equal(
      otherTenant.stderr.replace('cli-job', 'no-such-job'),
      missing.stderr,
      'in the same words',
    );
    const runs = await tickctl(t, ['runs', 'list', 'cli-job', '--tenant', 'beta'], endpoint);
    t.equal(runs.code, 0, `runs list: ${runs.stderr}`);
    const dlq = await tickctl(t, ['dlq', 'list', '--tenant', 'beta', '--json'], endpoint);
    t.same(JSON.parse(dlq.stdout), { runs: [], nextPageToken: '' });
    const status = await tickctl(t, ['cluster', 'status'], endpoint);
    t.equal(status.code, 0);
    t.match(status.stdout, /n1\s+\S+\s+\S+\s+active\s+yes/);
    t.match(
      status.stdout,
      /GROUP\s+LEADER\s+PREFERRED\s+TERM\s+EPOCH\s+JOBS\s+FIRES\/S\s+REPLICAS/,
    );
    t.match(status.stdout, /^0\s+n\d\s+-\s+\d+\s+\d+\s+-\s+-\s+n/m, 'the meta group has no jobs');
    t.match(
      status.stdout,
      // The rate has two decimals below 10 fires/s and none from 10 (its 10 jobs can reach it).
      /^1\s+n\d\s+-\s+\d+\s+\d+\s+\d+\s+\d+(\.\d\d)?\s+n/m,
      'group 1: no preference set, jobs, rate',
    );
    const down = await tickctl(
      t,
      ['cluster', 'status', '--endpoint', '127.0.0.1:1', '--timeout-ms', '1000'],
      endpoint,
    );
    t.equal(down.code, 5, 'no node at the endpoint exits 5');
    const tenants = await tickctl(t, ['tenants', 'list', '--json'], endpoint);
    t.same(
      (JSON.parse(tenants.stdout) as { tenants: Obj[] }).tenants.map((x) => x['id']),
      ['acme', 'beta'],
    );
  },
);
