// The cardinality guard of the per-tenant metrics: the top N tenants by decayed activity are
// named, ties go to the smaller name, everyone else is `other`, N = 0 names nobody, a ranking
// waits rerankEveryMs unless a slot is free, idle tenants are forgotten, and each ranking says
// who came in and who dropped out (whose series the metrics then remove).
import t from 'tap';
import { ValidationError } from '../../../src/base/errors.js';
import { OTHER_TENANT, TenantLabeler } from '../../../src/observe/tenant-labels.js';

const sorted = (xs: readonly string[]): string[] => [...xs].sort();

t.test('the top N by activity are named, in rank order; the rest are other', (t) => {
  const l = new TenantLabeler({ topN: 2 });
  l.record('small', 1);
  l.record('big', 50);
  l.record('mid', 10);
  const change = l.rank(0);
  t.same([...l.named], ['big', 'mid'], 'most active first');
  t.same(sorted(change?.added ?? []), ['big', 'mid']);
  t.same(change?.dropped, []);
  t.equal(l.labelOf('big'), 'big');
  t.equal(l.labelOf('small'), OTHER_TENANT, 'outside the top N');
  t.equal(l.labelOf('never-seen'), OTHER_TENANT);
  t.end();
});

t.test('ties are broken by name, the same on every node', (t) => {
  for (const order of [
    ['c', 'b', 'a', 'd'],
    ['d', 'a', 'b', 'c'],
  ]) {
    const l = new TenantLabeler({ topN: 2 });
    for (const tenant of order) l.record(tenant, 5);
    l.rank(0);
    t.same([...l.named], ['a', 'b'], `recorded as ${order.join(',')}`);
  }
  t.end();
});

t.test('N = 0 names nobody; a tenant called other is never named', (t) => {
  const none = new TenantLabeler({ topN: 0 });
  none.record('acme', 100);
  t.same(none.rank(0), { added: [], dropped: [], forgotten: [] });
  t.equal(none.labelOf('acme'), OTHER_TENANT);
  const l = new TenantLabeler({ topN: 5 });
  l.record(OTHER_TENANT, 1000);
  l.record('acme', 1);
  l.rank(0);
  t.same([...l.named], ['acme'], 'the aggregate label stays the aggregate');
  t.end();
});

t.test('rankings wait rerankEveryMs, except to fill a free slot', (t) => {
  const l = new TenantLabeler({ topN: 2, rerankEveryMs: 5000 });
  l.record('a', 10);
  t.ok(l.rank(1000), 'the first ranking is always due');
  t.same([...l.named], ['a']);
  l.record('b', 1);
  t.same(l.rank(1100)?.added, ['b'], 'a free slot is filled at once');
  l.record('c', 100);
  t.equal(l.rank(1200), undefined, 'no free slot: c waits for the next ranking');
  t.equal(l.labelOf('c'), OTHER_TENANT);
  l.record('a', 1);
  t.equal(l.rank(5999), undefined);
  const change = l.rank(6100);
  t.same(change?.added, ['c']);
  t.same(change?.dropped, ['b'], 'the least active leaves; its series go');
  t.same([...l.named], ['c', 'a']);
  t.end();
});

t.test('activity decays: recent activity outranks old activity', (t) => {
  const l = new TenantLabeler({ topN: 1, halfLifeMs: 1000, rerankEveryMs: 0 });
  l.record('old', 100);
  l.rank(0);
  t.same([...l.named], ['old']);
  // Ten half-lives later 100 weighs under 0.1: 1 fresh unit outweighs it.
  l.record('new', 1);
  const change = l.rank(10_000);
  t.same(change?.added, ['new']);
  t.same(change?.dropped, ['old']);
  t.end();
});

t.test('tenants idle for forgetAfterMs are forgotten, named or not', (t) => {
  const l = new TenantLabeler({ topN: 1, rerankEveryMs: 0, forgetAfterMs: 60_000 });
  l.record('busy', 10);
  l.record('quiet', 1);
  l.rank(0);
  t.equal(l.trackedCount, 2);
  for (let ms = 10_000; ms <= 50_000; ms += 10_000) {
    l.record('quiet', 1);
    t.same(l.rank(ms)?.forgotten, [], `nobody forgotten at ${ms} ms`);
  }
  t.same([...l.named], ['busy'], 'busy, idle, still ranks first');
  l.record('quiet', 1);
  const last = l.rank(60_000);
  t.same(last?.forgotten, ['busy'], 'busy was last seen 60 s ago');
  t.same(last?.dropped, ['busy'], 'and its name goes with it');
  t.same(last?.added, ['quiet']);
  t.equal(l.trackedCount, 1, 'memory follows recent activity');
  // A record of 0 (the tenant finished attempts but handed none out) still keeps it alive.
  l.record('quiet', 0);
  t.same(l.rank(110_000)?.forgotten, []);
  t.same(l.rank(169_999)?.forgotten, []);
  const gone = l.rank(170_000);
  t.same(gone?.forgotten, ['quiet']);
  t.same(gone?.dropped, ['quiet']);
  t.equal(l.trackedCount, 0);
  t.equal(l.named.size, 0);
  t.end();
});

t.test('more tenants than N: exactly N named, whatever the count', (t) => {
  const l = new TenantLabeler({ topN: 20 });
  for (let i = 0; i < 500; i++) l.record(`t${String(i).padStart(3, '0')}`, i % 7);
  l.rank(0);
  t.equal(l.named.size, 20);
  t.ok(
    [...l.named].every((name) => Number(name.slice(1)) % 7 === 6),
    'all of the most active',
  );
  t.end();
});

t.test('bad options are a ValidationError naming the field', (t) => {
  for (const topN of [-1, 1.5, Number.NaN, 1001]) {
    try {
      new TenantLabeler({ topN });
      t.fail(`topN ${topN} accepted`);
    } catch (err) {
      t.ok(err instanceof ValidationError, `topN ${topN}: a ValidationError`);
      t.match(err, {
        code: 'OBSERVE_INVALID_OPTIONS',
        violations: [{ field: 'topN', reason: /integer in \[0, 1000\]/ }],
      });
    }
  }
  t.end();
});
