// A tenant's run retention and `tickctl dlq purge`, as a user meets them: a job that fails every
// second keeps no more DEAD runs than its tenant's retention says (each group's leader sweeps),
// `dlq purge` empties the DLQ (also filtered by age), and every bad flag is named.
import t from 'tap';
import { eventually, freePort } from '../helpers/cluster.js';
import { ApiCluster, endpointOf, TENANT } from '../helpers/api-cluster.js';
import { runTickctlInProcess } from '../helpers/tickctl.js';

type Obj = Record<string, unknown>;

t.test('run retention and dlq purge', async (t) => {
  const ac = await ApiCluster.start(t, { groups: 2 });
  const endpoint = endpointOf(ac.cluster.node('n1'));
  const tickctl = (...argv: string[]) => runTickctlInProcess([...argv, '--endpoint', endpoint]);

  // Bad input is named, by tickctl or by the server, and changes nothing.
  const zero = await tickctl('tenants', 'update', TENANT, '--dead-per-job', '0');
  t.equal(zero.code, 2, 'a count below 1 is a usage error');
  t.match(zero.err, /--dead-per-job: '0' is not a whole number ≥ 1/);
  const typo = await tickctl('tenants', 'update', TENANT, '--dead-max-age', '14x');
  t.equal(typo.code, 2);
  t.match(typo.err, /--dead-max-age: '14x' is not a duration/);
  const tooMany = await tickctl('tenants', 'update', TENANT, '--history-per-job', '500');
  t.not(tooMany.code, 0, 'beyond the bound: refused by the server');
  t.match(tooMany.err, /retention\.history_per_job: must be an integer from 1 to 100/);

  const set = await tickctl(
    'tenants',
    'update',
    TENANT,
    '--dead-per-job',
    '3',
    '--dead-max-age',
    '1h',
  );
  t.equal(set.code, 0, set.err);
  t.match(set.out, /100 \/ 7d\s+3 \/ 1h/, 'tenants update shows history and DLQ retention');

  // Every attempt is refused at once (nothing listens) and the job allows one attempt: one
  // DEAD run a second.
  const closed = await freePort();
  const created = await tickctl(
    'jobs',
    'create',
    'poison',
    '--tenant',
    TENANT,
    '--schedule',
    'every 1s',
    '--url',
    `http://127.0.0.1:${closed}/never`,
    '--max-attempts',
    '1',
  );
  t.equal(created.code, 0, created.err);
  const deadRuns = async (): Promise<Obj[]> => {
    const r = await ac
      .client('n2')
      .call<Obj>('RunService', 'ListDeadRuns', { tenant: TENANT, pageSize: 1000 });
    return r['runs'] as Obj[];
  };
  await eventually(async () => {
    const n = (await deadRuns()).length;
    if (n < 3) throw new Error(`${n} dead runs so far`);
  }, 20_000);
  // Several more seconds of deaths: the sweep keeps the DLQ at 3, give or take the second
  // between a death and the next sweep.
  const counts: number[] = [];
  for (let i = 0; i < 6; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    counts.push((await deadRuns()).length);
  }
  t.ok(
    counts.every((n) => n <= 5),
    `DLQ sizes a second apart while the job keeps dying: ${counts.join(', ')} (retention 3)`,
  );

  const unconfirmed = await tickctl('dlq', 'purge', '--tenant', TENANT);
  t.equal(unconfirmed.code, 2, 'purge without --yes is refused');
  t.match(unconfirmed.err, /add --yes/);
  const both = await tickctl(
    'dlq',
    'purge',
    '--tenant',
    TENANT,
    '--older-than',
    '1h',
    '--died-before',
    '2020-01-01T00:00:00Z',
    '--yes',
  );
  t.equal(both.code, 2);
  t.match(both.err, /not both/);
  const badAge = await tickctl('dlq', 'purge', '--tenant', TENANT, '--older-than', 'soon', '--yes');
  t.equal(badAge.code, 2);
  t.match(badAge.err, /--older-than: 'soon' is not a duration/);

  const none = await tickctl('dlq', 'purge', '--tenant', TENANT, '--older-than', '1h', '--yes');
  t.equal(none.code, 0, none.err);
  t.match(none.out, /purged 0 dead runs of tenant acme in 2 groups/, 'nothing died an hour ago');
  const otherJob = await tickctl('dlq', 'purge', '--tenant', TENANT, '--job', 'nosuch', '--yes');
  t.match(otherJob.out, /purged 0 dead runs/, "another job's filter leaves this job's runs");

  t.ok((await deadRuns()).length >= 1);
  await ac.client('n1').call('JobService', 'PauseJob', { tenant: TENANT, jobId: 'poison' });
  // An attempt started before the pause may still die: let it.
  await new Promise((r) => setTimeout(r, 1500));
  const all = await tickctl('dlq', 'purge', '--tenant', TENANT, '--job', 'poison', '--yes');
  t.equal(all.code, 0, all.err);
  t.match(all.out, /purged [1-9]\d* dead runs of tenant acme in 2 groups/);
  t.strictSame(await deadRuns(), [], 'the DLQ is empty after the purge');
});
