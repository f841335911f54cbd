// The column store behind SchedulerStateMachine.jobs: what goes in comes out, field by field,
// undefined included; reads are copies; freed rows are reused without leaking old values.
import t from 'tap';
import { compileJobSpec } from '../../../src/api/job-spec.js';
import { decode, encode } from '../../../src/base/codec.js';
import {
  JobTable,
  type JobRowState,
  type JobTableImage,
} from '../../../src/scheduler/job-table.js';
import { Retained } from '../../../src/scheduler/retained.js';

const T = Date.UTC(2026, 2, 1);
const spec = compileJobSpec(
  {
    tenant: 'acme',
    name: 'nightly',
    schedule: 'every 90s',
    timezone: 'Europe/Paris',
    anchorMs: T - 5,
    target: { url: 'http://127.0.0.1:9/h', headers: { 'x-team': 'ops' } },
    payload: { a: 1 },
    remainingFires: 3,
  },
  T,
).spec;

const state = (over: Partial<JobRowState> = {}): JobRowState => ({
  version: 1,
  paused: false,
  createdAtMs: T,
  updatedAtMs: T,
  nextFireAtMs: T + 90_000,
  lastToken: 0,
  remaining: 3,
  finishedAtMs: undefined,
  ...over,
});

t.test('a job reads back as it was put, and reads are copies', (t) => {
  const keep = new Retained();
  const table = new JobTable();
  table.put('j1', keep.spec(spec), spec.name, spec.anchorMs, state());
  const job = table.get('j1')!;
  t.match(job, { ...spec, id: 'j1', ...state() }, 'every field, spec and state');
  t.equal(job.finishedAtMs, undefined, 'undefined stays undefined');
  table.setPaused('j1', true, T + 1);
  table.setNextFire('j1', undefined);
  table.setRemaining('j1', 0);
  table.setLastToken('j1', 2 ** 40 + 3);
  table.setFinishedAt('j1', T + 2);
  t.equal(job.paused, false, 'an earlier read does not change');
  t.match(table.get('j1'), {
    paused: true,
    updatedAtMs: T + 1,
    nextFireAtMs: undefined,
    remaining: 0,
    lastToken: 2 ** 40 + 3,
    finishedAtMs: T + 2,
  });
  t.end();
});

t.test(
  'firingOf reads what an intent checks and changes, as get() would, and undefined for no job',
  (t) => {
    const keep = new Retained();
    const table = new JobTable();
    table.put('acme/j1', keep.spec(spec), spec.name, spec.anchorMs, state({ version: 4 }));
    table.setPaused('acme/j1', true, T + 1);
    table.setRemaining('acme/j1', undefined);
    const job = table.get('acme/j1')!;
    t.strictSame(table.firingOf('acme/j1'), {
      id: job.id,
      version: 4,
      paused: true,
      nextFireAtMs: T + 90_000,
      remaining: undefined,
    });
    table.setNextFire('acme/j1', undefined);
    t.equal(table.firingOf('acme/j1')?.nextFireAtMs, undefined, 'no next slot');
    t.equal(table.firingOf('acme/nope'), undefined);
    t.end();
  },
);

t.test('a retained copy of a string equals it, whatever it holds', (t) => {
  const keep = new Retained();
  const whole = ['acme/steady-0000001', 'acme/ünïcødé-job-☃', 'x', 'lone \ud800 surrogate ok'].join(
    '\n',
  );
  for (const part of whole.split('\n')) t.equal(keep.flat(part), part, JSON.stringify(part));
  t.end();
});

t.test('jobs with the same settings share one definition', (t) => {
  const keep = new Retained();
  const a = keep.spec(spec);
  const b = keep.spec({ ...spec, name: 'other', anchorMs: T });
  const c = keep.spec({ ...spec, payload: '{"a":2}' });
  t.equal(a, b, 'name and anchor are per job');
  t.not(a, c, 'a different payload is a different definition');
  t.ok(Object.isFrozen(a));
  t.end();
});

t.test('deleted rows are reused, iteration follows insertion order', (t) => {
  const keep = new Retained();
  const table = new JobTable();
  const shared = keep.spec(spec);
  for (let i = 0; i < 40_000; i++)
    table.put(`j${i}`, shared, `n${i}`, undefined, state({ version: i }));
  let deleted = 0;
  for (let i = 0; i < 40_000; i += 2) if (table.delete(`j${i}`)) deleted++;
  t.equal(deleted, 20_000);
  t.notOk(table.delete('j0'), 'a second delete finds nothing');
  t.equal(table.size, 20_000);
  for (let i = 0; i < 20_000; i++) {
    table.put(`k${i}`, shared, `m${i}`, T + i, state({ version: 7, paused: true }));
  }
  t.equal(table.size, 40_000);
  let bad = 0;
  for (let i = 1; i < 40_000; i += 2) {
    const j = table.get(`j${i}`);
    if (j?.name !== `n${i}` || j.version !== i || j.anchorMs !== undefined || j.paused) bad++;
  }
  for (let i = 0; i < 20_000; i++) {
    const k = table.get(`k${i}`);
    if (k?.name !== `m${i}` || k.version !== 7 || k.anchorMs !== T + i || !k.paused) bad++;
  }
  t.equal(bad, 0, 'no row shows another job’s values');
  t.notOk(table.has('j0'));
  t.equal(table.get('j0'), undefined);
  const order = [...table.keys()];
  t.same(order.slice(0, 2), ['j1', 'j3']);
  t.same(order.slice(-2), ['k19998', 'k19999']);
  t.same(
    [...table.values()].slice(0, 2).map((j) => j.id),
    ['j1', 'j3'],
  );
  table.clear();
  t.equal(table.size, 0);
  t.end();
});

t.test("a tenant's job ids, without reading the others", (t) => {
  const keep = new Retained();
  const table = new JobTable();
  const other = keep.spec({ ...spec, tenant: 'globex' });
  table.put('a1', keep.spec(spec), 'x', undefined, state());
  table.put('g1', other, 'x', undefined, state());
  table.put('a2', keep.spec(spec), 'x', undefined, state());
  table.delete('a1');
  table.put('a3', keep.spec(spec), 'x', undefined, state());
  t.same(table.idsOfTenant('acme'), ['a2', 'a3']);
  t.same(table.idsOfTenant('globex'), ['g1']);
  t.same(table.idsOfTenant('nobody'), []);
  t.end();
});

t.test('a number most rows leave undefined reads right in every chunk, set or not', (t) => {
  const keep = new Retained();
  const table = new JobTable();
  const shared = keep.spec(spec);
  // 10,000 rows span three chunks; only rows 5000 and 9000 have a finish time.
  for (let i = 0; i < 10_000; i++)
    table.put(`r${i}`, shared, '', undefined, state({ remaining: undefined }));
  table.setFinishedAt('r5000', T + 1);
  table.setFinishedAt('r9000', T + 2);
  t.equal(table.get('r0')?.finishedAtMs, undefined, 'a chunk never written');
  t.equal(table.get('r4999')?.finishedAtMs, undefined, 'an unset row in a written chunk');
  t.equal(table.get('r5000')?.finishedAtMs, T + 1);
  t.equal(table.get('r9000')?.finishedAtMs, T + 2);
  t.equal(table.get('r5001')?.anchorMs, undefined);
  table.setFinishedAt('r5000', undefined);
  t.equal(table.get('r5000')?.finishedAtMs, undefined, 'set back to undefined');
  const cols = table.columns();
  t.equal(cols.finishedAtMs.filter((v) => v !== null).length, 1, 'columns() agree');
  t.end();
});

t.test('an image loads back as the same table: values, order, free rows, counts', (t) => {
  const keep = new Retained();
  const table = new JobTable();
  const acme = keep.spec(spec);
  const globex = keep.spec({ ...spec, tenant: 'globex' });
  // Three chunks of rows, every other one deleted, some reused, names on some, a sparse column.
  for (let i = 0; i < 10_000; i++)
    table.put(
      `acme/j${i}`,
      i % 3 === 0 ? globex : acme,
      i % 5 === 0 ? `name ${i}` : '',
      i % 7 === 0 ? T + i : undefined,
      state({ version: i, paused: i % 2 === 1, nextFireAtMs: i % 4 === 0 ? undefined : T + i }),
    );
  for (let i = 0; i < 10_000; i += 2) table.delete(`acme/j${i}`);
  for (let i = 0; i < 1000; i++) table.put(`acme/k${i}`, acme, '', undefined, state());
  table.setFinishedAt('acme/j9999', T + 9);

  const img = table.image();
  // What a snapshot does to it: encoded and decoded, so every byte array is a view of a record.
  const copy = decode(encode(img)) as JobTableImage;
  const loaded = new JobTable();
  loaded.put('stale', acme, '', undefined, state()); // loading replaces what was there
  loaded.loadImage(
    copy,
    (k) => img.specs[k]!,
    (s) => s,
  );
  t.same([...loaded.keys()], [...table.keys()], 'the same ids in the same order');
  t.same([...loaded.values()], [...table.values()], 'every field of every job');
  t.equal(loaded.withNextFireCount, table.withNextFireCount, 'jobs with a next slot counted');
  t.same(loaded.idsOfTenant('globex'), table.idsOfTenant('globex'), 'per-tenant ids');
  t.same(loaded.audit(), [], 'its derived parts agree with its rows');
  t.notOk(loaded.has('stale'));
  // The free rows came along: the next jobs reuse them as the original would.
  loaded.put('acme/new', acme, '', undefined, state());
  table.put('acme/new', acme, '', undefined, state());
  loaded.delete('acme/j1');
  table.delete('acme/j1');
  t.same(loaded.image().rows, table.image().rows, 'rows are reused alike');
  t.ok(img.ids instanceof Uint8Array, 'ids travel as one run of UTF-8 bytes');
  t.end();
});

t.test('ids read from bytes: any characters, each its own copy; an empty table', (t) => {
  const keep = new Retained();
  const table = new JobTable();
  const ids = ['acme/été-2026', 'acme/日本-job', 'acme/🙂', 'acme/plain-id-of-some-length'];
  for (const id of ids) table.put(id, keep.spec(spec), '', undefined, state());
  const img = decode(encode(table.image())) as JobTableImage;
  const loaded = new JobTable();
  const flattened: string[] = [];
  loaded.loadImage(
    img,
    () => keep.spec(spec),
    (s) => {
      flattened.push(s);
      return s;
    },
  );
  t.same([...loaded.keys()], ids, 'every id decoded whole');
  t.same(flattened, [], 'ids decoded from bytes are not copied a second time');
  t.ok(
    ids.every((id) => loaded.has(id)),
    'and found by lookup',
  );

  const empty = new JobTable();
  empty.loadImage(
    decode(encode(new JobTable().image())) as JobTableImage,
    () => keep.spec(spec),
    (s) => s,
  );
  t.equal(empty.size, 0, 'an empty image loads as an empty table');
  t.end();
});

t.test('an image of an earlier version, its ids one string, still loads', (t) => {
  const keep = new Retained();
  const table = new JobTable();
  for (let i = 0; i < 5; i++) table.put(`acme/j${i}`, keep.spec(spec), '', undefined, state());
  const img = table.image();
  const asString = { ...img, ids: [...table.keys()].join('\n') };
  const loaded = new JobTable();
  const flattened: string[] = [];
  loaded.loadImage(
    decode(encode(asString)) as JobTableImage,
    (k) => img.specs[k]!,
    (s) => {
      flattened.push(s);
      return s;
    },
  );
  t.same([...loaded.keys()], [...table.keys()]);
  t.equal(flattened.length, 5, 'ids split from one string are copied (they are views of it)');
  t.end();
});

t.test('an image of ids with a newline keeps them as a list', (t) => {
  const keep = new Retained();
  const table = new JobTable();
  table.put('a\nb', keep.spec(spec), '', undefined, state());
  table.put('c', keep.spec(spec), '', undefined, state());
  const img = table.image();
  t.same(img.ids, ['a\nb', 'c']);
  const loaded = new JobTable();
  loaded.loadImage(
    decode(encode(img)) as JobTableImage,
    (k) => img.specs[k]!,
    (s) => s,
  );
  t.same([...loaded.keys()], ['a\nb', 'c']);
  t.end();
});
