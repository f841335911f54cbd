// The job table's count of jobs per tenant, which a tenant's max-jobs limit is checked against:
// it follows every way a job comes and goes (put of a new job, put replacing one, of the same
// or another tenant; addNew, including a refused duplicate; delete; clear), idsOfTenant agrees
// with it, and audit() (a full scan against the counts) finds nothing wrong throughout.
import t, { type Test } from 'tap';
import { JobTable, type JobRowState } from '../../../src/scheduler/job-table.js';
import { Retained } from '../../../src/scheduler/retained.js';
import { T0, spec } from './fixtures.js';

const keep = new Retained();
const acme = keep.spec(spec({ tenant: 'acme' }));
const globex = keep.spec(spec({ tenant: 'globex' }));

const state: JobRowState = {
  version: 1,
  paused: false,
  createdAtMs: T0,
  updatedAtMs: T0,
  nextFireAtMs: T0 + 60_000,
  lastToken: 0,
  remaining: undefined,
  finishedAtMs: undefined,
};

/** The counts of the two tenants and of one never used, after checking audit() is clean. */
function counts(t: Test, table: JobTable): [number, number, number] {
  t.same(table.audit(), [], 'audit finds nothing wrong');
  return [
    table.countOfTenant('acme'),
    table.countOfTenant('globex'),
    table.countOfTenant('nobody'),
  ];
}

t.test('counts follow put, addNew, delete and clear', (t) => {
  const table = new JobTable();
  t.same(counts(t, table), [0, 0, 0], 'an empty table');
  t.same(table.idsOfTenant('acme'), []);

  table.put('a1', acme, 'n', undefined, state);
  table.put('a2', acme, 'n', undefined, state);
  table.put('g1', globex, 'n', undefined, state);
  t.same(counts(t, table), [2, 1, 0], 'put of new jobs');

  table.put('a1', acme, 'renamed', undefined, { ...state, version: 2 });
  t.same(counts(t, table), [2, 1, 0], 'put replacing a job of the same tenant');

  table.put('a2', globex, 'n', undefined, { ...state, version: 2 });
  t.same(counts(t, table), [1, 2, 0], 'put replacing a job by one of another tenant');
  t.same(table.idsOfTenant('acme'), ['a1']);
  t.same(table.idsOfTenant('globex'), ['a2', 'g1']);

  t.ok(table.addNew('a3', acme, 'n', undefined, T0, T0 + 60_000, undefined));
  t.ok(table.addNew('g2', globex, 'n', undefined, T0, undefined, 3));
  t.same(counts(t, table), [2, 3, 0], 'addNew of new jobs');

  t.notOk(
    table.addNew('g2', acme, 'n', undefined, T0, undefined, undefined),
    'addNew of an id in the table is refused',
  );
  t.same(counts(t, table), [2, 3, 0], 'a refused addNew changes no count');
  t.equal(table.get('g2')?.tenant, 'globex', 'nor the job');

  t.ok(table.delete('a1'));
  t.ok(table.delete('g1'));
  t.same(counts(t, table), [1, 2, 0], 'delete');
  t.notOk(table.delete('a1'), 'a second delete finds nothing');
  t.notOk(table.delete('never'), 'nor does a delete of an unknown id');
  t.same(counts(t, table), [1, 2, 0], 'a delete that finds nothing changes no count');

  t.ok(table.delete('a3'));
  t.same(counts(t, table), [0, 2, 0], 'the tenant’s last job deleted');
  t.same(table.idsOfTenant('acme'), [], 'no ids left for it');

  table.put('a4', acme, 'n', undefined, state);
  t.same(counts(t, table), [1, 2, 0], 'a freed row reused');

  table.clear();
  t.same(counts(t, table), [0, 0, 0], 'clear');
  t.same(table.idsOfTenant('globex'), []);
  t.ok(table.addNew('a1', acme, 'n', undefined, T0, undefined, undefined));
  t.same(counts(t, table), [1, 0, 0], 'counting starts again after clear');
  t.end();
});

t.test('idsOfTenant of an unknown tenant is []', (t) => {
  const table = new JobTable();
  t.same(table.idsOfTenant('nobody'), [], 'an empty table');
  table.put('a1', acme, 'n', undefined, state);
  t.same(table.idsOfTenant('nobody'), [], 'a table with other tenants’ jobs');
  t.equal(table.countOfTenant('nobody'), 0);
  t.end();
});

t.test('many jobs of many tenants: the counts match a scan', (t) => {
  const table = new JobTable();
  const specs = Array.from({ length: 7 }, (_, i) => keep.spec(spec({ tenant: `t${i}` })));
  const want = new Map<string, string>();
  for (let i = 0; i < 3000; i++) {
    const id = `j${(i * 7919) % 1000}`;
    const s = specs[(i * 31) % 7]!;
    if (i % 5 === 0) {
      table.delete(id);
      want.delete(id);
    } else if (i % 3 === 0) {
      if (table.addNew(id, s, 'n', undefined, T0, undefined, undefined)) want.set(id, s.tenant);
    } else {
      table.put(id, s, 'n', undefined, state);
      want.set(id, s.tenant);
    }
  }
  let wrong = 0;
  for (let i = 0; i < 7; i++) {
    const tenant = `t${i}`;
    const ids = [...want].filter(([, tn]) => tn === tenant).map(([id]) => id);
    if (table.countOfTenant(tenant) !== ids.length) wrong++;
    if (table.idsOfTenant(tenant).length !== ids.length) wrong++;
  }
  t.equal(wrong, 0, 'every tenant’s count and ids match what was put');
  t.same(table.audit(), []);
  t.equal(table.size, want.size);
  t.end();
});
