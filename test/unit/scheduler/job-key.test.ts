// Job keys: `<tenant>/<job id>` names a job inside the cluster (job ids are unique per tenant),
// and a fire id `<tenant>/<job id>:<slot ms>` carries the tenant.
import t from 'tap';
import { AssertionError } from '../../../src/base/assert.js';
import {
  jobIdOfKey,
  jobKeyOf,
  parseFireId,
  publicReason,
  splitJobKey,
} from '../../../src/scheduler/job-key.js';
import { fireIdOf } from '../../../src/scheduler/model.js';

t.test('a key joins a tenant and a job id, and splits back into them', (t) => {
  t.equal(jobKeyOf('acme', 'nightly-report'), 'acme/nightly-report');
  t.same(splitJobKey('acme/nightly-report'), { tenant: 'acme', jobId: 'nightly-report' });
  t.equal(jobIdOfKey('beta_2/a.b-c'), 'a.b-c');
  t.not(jobKeyOf('acme', 'x'), jobKeyOf('beta', 'x'), "two tenants' equal ids are two keys");
  for (const [tenant, jobId] of [
    ['a', 'b'],
    ['t-1_x', 'Job.With_all-chars9'],
    ['x'.repeat(63), 'J'.repeat(128)],
  ] as const)
    t.same(splitJobKey(jobKeyOf(tenant, jobId)), { tenant, jobId }, `${tenant} / ${jobId}`);
  t.end();
});

t.test('a key of another shape is a broken invariant', (t) => {
  for (const [tenant, jobId] of [
    ['', 'j'],
    ['acme', ''],
    ['ac/me', 'j'],
    ['acme', 'j/k'],
  ] as const)
    t.throws(() => jobKeyOf(tenant, jobId), AssertionError, `jobKeyOf(${tenant}, ${jobId})`);
  for (const key of ['', 'nightly', '/nightly', 'acme/', 'a/b/c'])
    t.throws(() => splitJobKey(key), AssertionError, `splitJobKey(${JSON.stringify(key)})`);
  t.end();
});

t.test('a fire id carries the key, so the tenant', (t) => {
  const fireId = fireIdOf(jobKeyOf('acme', 'nightly'), 1751333400000);
  t.equal(fireId, 'acme/nightly:1751333400000');
  t.same(parseFireId(fireId), {
    key: 'acme/nightly',
    tenant: 'acme',
    jobId: 'nightly',
    slotMs: 1751333400000,
  });
  for (const bad of [
    '',
    'nightly:1751333400000', // no tenant
    'acme/nightly',
    'acme/nightly:',
    'acme/nightly:12x',
    'acme/:5',
    '/nightly:5',
    'a/b/c:5',
    'acme/nightly:99999999999999999',
  ])
    t.equal(parseFireId(bad), undefined, `${JSON.stringify(bad)} is not a fire id`);
  t.end();
});

t.test('refusals name a job as its tenant knows it, never by its key', (t) => {
  t.equal(publicReason('job acme/nightly does not exist'), 'job "nightly" does not exist');
  t.equal(publicReason('job acme/a.b is at version 3, not 2'), 'job "a.b" is at version 3, not 2');
  t.equal(
    publicReason('run acme/nightly:5 is DEAD'),
    'run acme/nightly:5 is DEAD',
    'a fire id is public: it stays whole',
  );
  t.equal(publicReason('nothing to rewrite'), 'nothing to rewrite');
  t.end();
});
