/**
 * Tenant limits on a real three-node cluster, set as an operator does (tickctl tenants
 * create/update) and met as a tenant would meet them:
 * - max jobs: a create past it is RESOURCE_EXHAUSTED naming limits.max_jobs, a CreateJobs past
 *   it writes none of its jobs, a repeated create of a job that exists still answers duplicate;
 * - API writes per second: calls past the bucket are RESOURCE_EXHAUSTED with a retry delay, and
 *   a refused call wrote nothing;
 * - fires per second: runs due together past the rate go out later, every one exactly once and
 *   SUCCEEDED, while another tenant's runs due at the same instant are not delayed;
 * - deliveries in flight: never more at the receiver than the tenant's limit split over the
 *   group leaders;
 * - `tickctl tenants get` shows the usage against each limit.
 */
import t from 'tap';
import { ApiCallError, type ApiClient } from '../../src/api/client.js';
import { nodeShareOf } from '../../src/placement/tenant-limits.js';
import { ApiCluster, endpointOf } from '../helpers/api-cluster.js';
import { refusal, retryUnavailable } from '../helpers/api-retry.js';
import { eventually, sleep } from '../helpers/cluster.js';
import { runTickctl } from '../helpers/tickctl.js';
import { TEST_SECRET, type Receipt } from '../helpers/webhook-sink.js';

type Obj = Record<string, unknown>;
const GROUPS = 3;
/** The narrow tenant's receiver answers after this long, so its deliveries overlap. */
const NARROW_DELAY_MS = 1500;

function oneOff(tenant: string, jobId: string, url: string, slotMs: number): Obj {
  return {
    jobId,
    requestId: jobId,
    spec: { tenant, schedule: `at ${new Date(slotMs).toISOString()}`, target: { url } },
  };
}

/** The most deliveries in flight at once at the receiver, each taking `durationMs`. */
function peakOverlap(receipts: readonly Receipt[], durationMs: number): number {
  const edges = receipts.flatMap((r) => [
    [r.atMs, 1],
    [r.atMs + durationMs, -1],
  ]);
  edges.sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!);
  let now = 0;
  let peak = 0;
  for (const [, d] of edges) peak = Math.max(peak, (now += d!));
  return peak;
}

t.test('tenant limits: max jobs, write rate, fire rate, in-flight cap, usage', async (t) => {
  const ac = await ApiCluster.start(t, { groups: GROUPS, metrics: true });
  const c: ApiClient = ac.client('n1');
  const endpoint = endpointOf(ac.cluster.node('n2'));
  const tickctl = (args: string[]) => runTickctl([...args, '--endpoint', endpoint]);

  // The operator sets the limits with tickctl; a typo in a flag changes nothing.
  const typo = await tickctl(['tenants', 'create', 'few', '--max-jobs', 'three']);
  t.equal(typo.code, 2, '--max-jobs three: a usage error');
  t.match(typo.stderr, '--max-jobs', 'naming the flag');
  const badBurst = await tickctl([
    'tenants',
    'create',
    'few',
    '--write-rate',
    '5',
    '--write-burst',
    '1',
  ]);
  t.not(badBurst.code, 0, 'a burst below the rate is refused');
  t.match(badBurst.stderr, 'limits.write_burst', 'naming the limit');
  for (const [tenant, flags] of [
    ['few', ['--max-jobs', '3']],
    ['slow-writer', ['--write-rate', '1', '--write-burst', '2']],
    ['paced', ['--fire-rate', '6']],
    ['narrow', ['--inflight-max', '3']],
  ] as const) {
    const r = await tickctl([
      'tenants',
      'create',
      tenant,
      '--secret',
      TEST_SECRET,
      ...flags,
      '--json',
    ]);
    t.equal(r.code, 0, `tenants create ${tenant} ${flags.join(' ')}: ${r.stderr}`);
  }
  const shown = JSON.parse((await tickctl(['tenants', 'get', 'few', '--json'])).stdout) as Obj;
  t.equal((shown['limits'] as Obj)['maxJobs'], 3, 'the limit is stored');
  t.equal((shown['limits'] as Obj)['writesPerSecond'], 1000, 'the others keep their defaults');
  const updated = await tickctl(['tenants', 'update', 'few', '--fire-rate', '7', '--json']);
  t.equal(
    ((JSON.parse(updated.stdout) as Obj)['limits'] as Obj)['maxJobs'],
    3,
    'update keeps the rest',
  );

  await t.test('max jobs', async (t) => {
    const create = (jobId: string) =>
      c.call<Obj>('JobService', 'CreateJob', {
        jobId,
        requestId: jobId,
        spec: ac.spec({ tenant: 'few', schedule: '0 0 1 1 *' }),
      });
    for (const id of ['a-1', 'b-2', 'c-3']) await retryUnavailable(() => create(id));
    const over = await refusal(create('d-4'));
    t.equal(over.status, 8, 'the fourth: RESOURCE_EXHAUSTED');
    t.equal(over.code, 'TENANT_MAX_JOBS_EXCEEDED');
    t.match(over.message, 'limits.max_jobs', 'naming the limit');
    t.equal((await create('a-1'))['duplicate'], true, 'a repeated create still answers duplicate');
    const batch = await refusal(
      c.call('JobService', 'CreateJobs', {
        jobs: [oneOff('few', 'e-5', `${ac.sink.url}/few`, Date.now() + 3_600_000)],
      }),
    );
    t.equal(batch.code, 'TENANT_MAX_JOBS_EXCEEDED', 'a batch past the limit is refused');
    const list = await c.call<Obj>('JobService', 'ListJobs', { tenant: 'few' });
    t.same(
      (list['jobs'] as Obj[]).map((j) => j['id']).sort(),
      ['a-1', 'b-2', 'c-3'],
      'nothing of the refused creates was written',
    );
    const viaCli = await tickctl([
      'jobs',
      'create',
      'f-6',
      '--tenant',
      'few',
      '--schedule',
      '0 0 1 1 *',
      '--url',
      `${ac.sink.url}/few`,
    ]);
    t.equal(viaCli.code, 7, 'tickctl: exit 7, over a tenant limit');
    t.match(viaCli.stderr, 'limits.max_jobs', 'tickctl names the limit');
    const get = await tickctl(['tenants', 'get', 'few']);
    t.match(get.stdout, /jobs\s+3\s+3/, `tickctl tenants get shows 3 of 3 jobs:\n${get.stdout}`);
    await c.call('JobService', 'DeleteJob', { tenant: 'few', jobId: 'c-3' });
    await eventually(() => create('d-4').then(() => undefined), 5_000);
    t.pass('after a delete there is room again');
  });

  await t.test('API writes per second', async (t) => {
    await retryUnavailable(() =>
      c.call('JobService', 'CreateJob', {
        jobId: 'w',
        spec: ac.spec({ tenant: 'slow-writer', schedule: '0 0 1 1 *' }),
      }),
    );
    // The create took one of the two tokens; five triggers at once find at most one more.
    const tries = await Promise.allSettled(
      Array.from({ length: 5 }, () =>
        c.call('JobService', 'TriggerJob', { tenant: 'slow-writer', jobId: 'w' }),
      ),
    );
    const refused = tries.filter((r) => r.status === 'rejected').map((r) => r.reason as unknown);
    t.ok(refused.length >= 3, `${refused.length} of 5 refused`);
    const first = refused[0];
    t.ok(first instanceof ApiCallError, 'a typed API error');
    if (!(first instanceof ApiCallError)) return;
    t.equal(first.status, 8, 'RESOURCE_EXHAUSTED');
    t.equal(first.code, 'TENANT_WRITE_RATE_EXCEEDED');
    t.ok(
      first.retryDelayMs !== undefined && first.retryDelayMs > 0 && first.retryDelayMs <= 1000,
      `with a retry delay (${first.retryDelayMs} ms)`,
    );
    const runs = await c.call<Obj>('RunService', 'ListRuns', {
      tenant: 'slow-writer',
      jobId: 'w',
    });
    t.equal(
      (runs['runs'] as Obj[]).length,
      5 - refused.length,
      'one run per trigger taken, none for a refused one',
    );
    await sleep(first.retryDelayMs ?? 1000);
    await c.call('JobService', 'TriggerJob', { tenant: 'slow-writer', jobId: 'w' });
    t.pass('after the retry delay a write goes through');
  });

  await t.test('fires per second and deliveries in flight', async (t) => {
    ac.sink.behaviour = (r) => (r.tenant === 'narrow' ? { delayMs: NARROW_DELAY_MS } : 'ok');
    const T = Math.ceil((Date.now() + 4000) / 1000) * 1000;
    const of = (tenant: string, n: number) =>
      Array.from({ length: n }, (_, i) =>
        oneOff(tenant, `${i}-${tenant}`, `${ac.sink.url}/${tenant}`, T),
      );
    for (const jobs of [of('paced', 18), of('acme', 18), of('narrow', 9)])
      await retryUnavailable(() => c.call('JobService', 'CreateJobs', { jobs }, 20_000));
    t.ok(Date.now() < T - 1000, 'every job was created before its slot');
    const leaders = await ac.leaders();
    const firstOf = (tenant: string): Receipt[] => {
      const byFire = new Map<string, Receipt>();
      for (const r of ac.sink.receipts)
        if (r.tenant === tenant && !byFire.has(r.fireId)) byFire.set(r.fireId, r);
      return [...byFire.values()];
    };
    await eventually(
      () =>
        firstOf('paced').length === 18 &&
        firstOf('acme').length === 18 &&
        firstOf('narrow').length === 9
          ? Promise.resolve()
          : Promise.reject(new Error('not all delivered yet')),
      30_000,
    );
    const lagOf = (r: Receipt): number => r.atMs - T;
    const acmeWorst = Math.max(...firstOf('acme').map(lagOf));
    const pacedLast = Math.max(...firstOf('paced').map(lagOf));
    t.comment(`acme (no limit) worst lag ${acmeWorst} ms; paced (6/s) last after ${pacedLast} ms`);
    t.ok(acmeWorst < 1000, `the unlimited tenant is not delayed (${acmeWorst} ms)`);
    t.ok(pacedLast >= 1000, `18 fires at 6/s are spread out (last after ${pacedLast} ms)`);
    t.equal(
      ac.sink.receipts.filter((r) => r.tenant === 'paced').length,
      18,
      'each paced run delivered exactly once',
    );
    for (const r of firstOf('paced').slice(-3)) {
      let status: unknown;
      await eventually(async () => {
        const run = await c.call<Obj>('RunService', 'GetRun', {
          tenant: 'paced',
          fireId: r.fireId,
        });
        status = run['status'];
        if (status !== 'RUN_STATUS_SUCCEEDED') throw new Error(`${r.fireId} is ${String(status)}`);
      }, 10_000).catch(() => undefined);
      t.equal(status, 'RUN_STATUS_SUCCEEDED', `${r.fireId}: delayed, not missed`);
    }
    // The wait is counted per tenant in the metrics: the paced tenant's, nobody else's.
    const throttled = async (tenant: string): Promise<number> => {
      let n = 0;
      for (const node of ac.cluster.nodes) {
        const res = await fetch(`http://${node.host}:${node.metricsPort}/metrics`);
        const line = (await res.text())
          .split('\n')
          .find((l) => l.startsWith(`tickraft_tenant_fires_throttled_total{tenant="${tenant}",`));
        n += Number(line?.slice(line.lastIndexOf(' ') + 1) ?? 0);
      }
      return n;
    };
    t.ok((await throttled('paced')) > 0, 'tickraft_tenant_fires_throttled_total counts paced');
    t.equal(await throttled('acme'), 0, 'and not the unlimited tenant');
    // Each leader holds the tenant to its share of inflight_max 3.
    const led = new Map<string, number>();
    for (const [groupId, node] of leaders)
      if (groupId !== 0) led.set(node, (led.get(node) ?? 0) + 1);
    const bound = [...led.values()].reduce((n, k) => n + nodeShareOf(3, k, GROUPS), 0);
    const peak = peakOverlap(firstOf('narrow'), NARROW_DELAY_MS - 50);
    t.comment(`narrow: peak ${peak} deliveries in flight, bound ${bound}`);
    t.ok(peak <= bound, `at most ${bound} in flight at the receiver (saw ${peak})`);
  });
});
