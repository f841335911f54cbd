// Webhook targets a node may not reach (no SSRF), with real processes on loopback. A 3-node
// cluster (2 groups) runs three times on the same data, with a different --allow-target each time:
//
// 1. none (the default policy): CreateJob with literal 127.0.0.1, [::1], 10.0.0.1,
//    169.254.169.254, [::ffff:127.0.0.1] and localhost each get INVALID_ARGUMENT naming
//    spec.target.url with the reason, and nothing is created (read back); CreateJobs with one such
//    job among good ones creates none of them; UpdateJob to such a URL changes nothing.
// 2. --allow-target ::1/128: localhost now passes at create (it may resolve to ::1), but it
//    resolves to 127.0.0.1 here, so the connect-time check refuses it: a triggered run ends DEAD
//    after one attempt that reports TARGET_FORBIDDEN, and the sink on 127.0.0.1 never sees it.
//    127.0.0.1 itself stays refused at create: the widening is exactly the range given.
// 3. --allow-target 127.0.0.0/8: the loopback sink gets its fires, and the DEAD run replayed is
//    delivered through localhost (the connect-time check follows the node's flags).
// Also: a bad --allow-target stops `tickraft serve` with exit 2, naming the flag and the value.
// Nothing ever connects outside 127.0.0.0/8: the refused addresses are refused before connecting.
import { status as grpcStatus } from '@grpc/grpc-js';
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { ApiCallError } from '../../src/api/client.js';
import { ApiCluster, TENANT } from '../helpers/api-cluster.js';
import { retryUnavailable } from '../helpers/api-retry.js';
import { eventually } from '../helpers/cluster.js';
import { TICKRAFT } from '../helpers/tickctl.js';

type Obj = Record<string, unknown>;
const { INVALID_ARGUMENT, NOT_FOUND } = grpcStatus;
/** Once a year: a job that exists without firing on its own (runs come from TriggerJob). */
const YEARLY = '0 0 1 1 *';

t.test('a bad --allow-target stops the node at start, naming the flag and the value', (t) => {
  const dir = t.testdir();
  const run = (...args: string[]) =>
    spawnSync(process.execPath, [TICKRAFT, 'serve', '--id', 'n1', '--data-dir', dir, ...args], {
      encoding: 'utf8',
    });
  const r1 = run('--allow-target', '127.0.0.0/8', '--allow-target', '10.0.0.1/8');
  t.equal(r1.status, 2, 'exit 2');
  t.match(
    r1.stderr,
    "tickraft: --allow-target: '10.0.0.1/8' has bits set past its /8 prefix (did you mean 10.0.0.0/8?)",
  );
  const r2 = run('--allow-target', 'localhost');
  t.equal(r2.status, 2);
  t.match(r2.stderr, "tickraft: --allow-target: 'localhost' is not an IP range");
  t.end();
});

t.test('targets refused at create, at connect, and allowed by --allow-target', async (t) => {
  const ac = await ApiCluster.start(t, { groups: 2, allowTarget: [] });
  const c = ac.client('n3');
  const port = new URL(ac.sink.url).port;
  const spec = (url: string, extra: Obj = {}): Obj => ({
    tenant: TENANT,
    schedule: YEARLY,
    target: { url },
    ...extra,
  });
  const refusal = async (call: Promise<unknown>): Promise<ApiCallError> => {
    const err = await call.catch((e: unknown) => e);
    if (!(err instanceof ApiCallError)) throw new Error(`not refused: ${JSON.stringify(err)}`);
    return err;
  };
  const notFound = async (jobId: string): Promise<boolean> => {
    const err = await c
      .call('JobService', 'GetJob', { jobId, tenant: TENANT })
      .catch((e: unknown) => e);
    return err instanceof ApiCallError && err.status === NOT_FOUND;
  };
  const restartAll = async (flags: string[]): Promise<void> => {
    await Promise.all(ac.cluster.nodes.map((n) => n.term()));
    for (const n of ac.cluster.nodes) n.start(flags);
    await ac.cluster.waitReady(60_000);
  };

  await t.test('without --allow-target, literal forbidden hosts are refused', async (t) => {
    const cases: [string, RegExp][] = [
      [`http://127.0.0.1:${port}/hook`, /^resolves to a loopback address 127\.0\.0\.1, /],
      [`http://[::1]:${port}/hook`, /^resolves to a loopback address ::1, /],
      ['http://10.0.0.1/hook', /^resolves to a private \(RFC 1918\) address 10\.0\.0\.1, /],
      [
        'http://169.254.169.254/latest/meta-data/',
        /link-local address 169\.254\.169\.254 \(where cloud metadata services answer\)/,
      ],
      [
        `http://[::ffff:127.0.0.1]:${port}/hook`,
        /loopback address ::ffff:7f00:1 \(IPv4-mapped 127\.0\.0\.1\)/,
      ],
      [`http://localhost:${port}/hook`, /^localhost is a name that always resolves to a loopback/],
    ];
    for (const [i, [url, reason]] of cases.entries()) {
      const jobId = `forbidden-${i}`;
      const err = await refusal(c.call('JobService', 'CreateJob', { jobId, spec: spec(url) }));
      t.equal(err.status, INVALID_ARGUMENT, `${url}: INVALID_ARGUMENT`);
      const v = err.violations.find((x) => x.field === 'spec.target.url');
      t.match(v?.reason, reason, `${url}: spec.target.url says why`);
      t.match(
        v?.reason,
        /which webhooks may not reach; a node started with --allow-target covering it may$/,
      );
      t.ok(await notFound(jobId), `${url}: nothing created`);
    }
  });

  await t.test('CreateJobs with one forbidden target creates none', async (t) => {
    const err = await refusal(
      c.call('JobService', 'CreateJobs', {
        jobs: [
          { jobId: 'batch-ok', spec: spec('http://webhooks.invalid/hook') },
          { jobId: 'batch-bad', spec: spec('http://192.168.1.10/hook') },
        ],
      }),
    );
    t.equal(err.status, INVALID_ARGUMENT);
    t.same(
      err.violations.map((v) => v.field),
      ['jobs[1].spec.target.url'],
    );
    t.ok(await notFound('batch-ok'), 'the good job of the batch was not created either');
    t.ok(await notFound('batch-bad'));
  });

  await t.test('UpdateJob to a forbidden target changes nothing', async (t) => {
    // A name passes at create (it is checked when a connection is made).
    await retryUnavailable(() =>
      c.call('JobService', 'CreateJob', {
        jobId: 'named',
        requestId: 'named-1',
        spec: spec('http://webhooks.invalid/hook'),
      }),
    );
    const err = await refusal(
      c.call('JobService', 'UpdateJob', {
        jobId: 'named',
        tenant: TENANT,
        spec: spec('http://169.254.169.254/latest/meta-data/'),
      }),
    );
    t.equal(err.status, INVALID_ARGUMENT);
    t.same(
      err.violations.map((v) => v.field),
      ['spec.target.url'],
    );
    const job = await c.call<Obj>('JobService', 'GetJob', { jobId: 'named', tenant: TENANT });
    const target = (job['spec'] as Obj)['target'] as Obj;
    t.equal(target['url'], 'http://webhooks.invalid/hook', 'URL unchanged');
    t.equal(job['version'], 1, 'version unchanged');
  });

  let deadFireId = '';
  await t.test('--allow-target ::1/128: localhost is refused at connect, once', async (t) => {
    await restartAll(['--allow-target', '::1/128']);
    const literal = await refusal(
      c.call('JobService', 'CreateJob', {
        jobId: 'still-forbidden',
        spec: spec(`http://127.0.0.1:${port}/hook`),
      }),
    );
    t.equal(literal.status, INVALID_ARGUMENT, '127.0.0.1 is not in ::1/128');
    await retryUnavailable(() =>
      c.call('JobService', 'CreateJob', {
        jobId: 'lh',
        requestId: 'lh-1',
        spec: spec(`http://localhost:${port}/hook`, { retry: { maxAttempts: 5 } }),
      }),
    );
    const triggered = await retryUnavailable(() =>
      c.call<Obj>('JobService', 'TriggerJob', { jobId: 'lh', tenant: TENANT }),
    );
    deadFireId = String((triggered['run'] as Obj)['fireId']);
    const run = await eventually(async () => {
      const got = await c.call<Obj>('RunService', 'GetRun', { fireId: deadFireId, tenant: TENANT });
      const status = String(got['status']);
      if (!status.endsWith('DEAD')) throw new Error(`run is ${status}`);
      return got;
    }, 30_000);
    const attempts = run['attempts'] as Obj[];
    t.equal(attempts.length, 1, 'one attempt: not retried');
    t.equal(attempts[0]?.['statusCode'], 0, 'no answer: nothing was sent');
    t.match(
      attempts[0]?.['error'],
      /^TARGET_FORBIDDEN: localhost resolved to a loopback address 127\.0\.0\.1, which webhooks may not reach/,
    );
    t.match(run['reason'], /non-retryable: TARGET_FORBIDDEN/);
    t.same(ac.sink.of('lh'), [], 'the sink never saw it');
  });

  await t.test('--allow-target 127.0.0.0/8: the loopback sink gets its fires', async (t) => {
    await restartAll(['--allow-target', '127.0.0.0/8']);
    await retryUnavailable(() =>
      c.call('JobService', 'CreateJob', {
        jobId: 'loop',
        requestId: 'loop-1',
        spec: spec(`${ac.sink.url}/hook`, { schedule: '* * * * * *' }),
      }),
    );
    await eventually(() => {
      const n = ac.sink.of('loop').filter((r) => r.status === 200).length;
      return n >= 3 ? Promise.resolve() : Promise.reject(new Error(`${n} fires so far`));
    }, 30_000);
    t.ok(
      ac.sink.of('loop').every((r) => r.signatureOk),
      'fires arrive signed',
    );
    // The run refused before is delivered once replayed: localhost → 127.0.0.1 is allowed now.
    await retryUnavailable(() =>
      c.call('RunService', 'ReplayRun', { fireId: deadFireId, tenant: TENANT }),
    );
    await eventually(
      () =>
        ac.sink.of('lh').length > 0
          ? Promise.resolve()
          : Promise.reject(new Error('not delivered yet')),
      30_000,
    );
    t.equal(ac.sink.of('lh')[0]?.fireId, deadFireId, 'the replayed run arrived');
    await c.call('JobService', 'DeleteJob', { jobId: 'loop', tenant: TENANT });
  });
});
