// The leader's check of create-jobs entries another node packed (NodeService.GroupCreateJobs):
// what createCommand + packCreates produce passes unchanged; every field a forger could change
// so that the entry applies differently from a full check is refused, naming the field.
import t from 'tap';
import { ValidationError } from '../../../src/base/errors.js';
import { decode, encode } from '../../../src/base/codec.js';
import { JobSpecCompiler, requireFirstSlot } from '../../../src/api/job-spec.js';
import {
  checkPackedCreates,
  decodePackedCreates,
  PackedPartCache,
  tenantsOf,
  type PackedCheckContext,
} from '../../../src/api/packed-creates.js';
import { TargetPolicy } from '../../../src/delivery/target-policy.js';
import { hashShardKey } from '../../../src/placement/hash.js';
import { lookupRange, splitRing } from '../../../src/placement/ring.js';
import {
  encodeSchedulerCommand,
  packCreates,
  type CreateJobCommand,
} from '../../../src/scheduler/commands.js';

const NOW = Date.UTC(2026, 2, 8, 6, 0, 0);
const ranges = splitRing(2, 1);
const ctx: PackedCheckContext = {
  groupId: 1,
  ranges,
  tenantExists: (tenant) => tenant === 'acme',
  requestIdCharsMax: 128,
  nowMs: NOW + 2_000,
  // Shared by every check below: definitions the first test passes are then known, so the
  // forged ones are refused by the exact comparison, not by the full check.
  checkedParts: new PackedPartCache(),
};

/**
 * `n` jobs of group 1 as the node that took the call checks them: named by their keys
 * (`acme/job-i`), a request id scoped by the tenant.
 */
function creates(n: number, spec: Record<string, unknown> = {}): CreateJobCommand[] {
  const compiler = new JobSpecCompiler(NOW);
  const out: CreateJobCommand[] = [];
  for (let i = 0; out.length < n; i++) {
    const jobId = `acme/job-${i}`;
    if (lookupRange(ranges, hashShardKey(jobId)).groupId !== 1) continue;
    const compiled = compiler.compile({
      tenant: 'acme',
      schedule: i % 2 === 0 ? `${i % 60} 3 * * *` : 'every 90s',
      target: { url: 'https://example.test/hook' },
      ...spec,
    });
    out.push({
      op: 'create-job',
      atMs: NOW,
      jobId,
      spec: compiled.spec,
      nextFireAtMs: requireFirstSlot(compiled, NOW),
      requestId: i === 0 ? 'acme/r-0' : undefined,
    });
  }
  return out;
}

function entryOf(cs: CreateJobCommand[]): Uint8Array {
  const [packed, ...more] = packCreates(cs);
  if (!packed || more.length > 0) throw new Error('expected one entry');
  return encodeSchedulerCommand(packed);
}

/** A decoded entry, open to forging a field of any type. */
interface Forged {
  [field: string]: unknown;
  specs: Record<string, unknown>[];
  jobIds: unknown[];
  specOf: unknown[];
  schedules: unknown[];
  names: unknown[];
  anchorsMs: unknown[];
  nextFireAtMs: unknown[];
  requestIds: unknown[];
}

/** The entry re-encoded after `edit` changed its decoded form. */
function tampered(edit: (m: Forged) => void): Uint8Array {
  const m = decode(entryOf(creates(6))) as Forged;
  edit(m);
  return encode(m);
}

function fieldsRefused(bytes: Uint8Array, c = ctx): string[] {
  try {
    checkPackedCreates(decodePackedCreates(bytes, 'entries[0]'), c, 'entries[0].');
  } catch (err) {
    if (err instanceof ValidationError) return err.violations.map((v) => v.field);
    throw err;
  }
  return [];
}

t.test('what createCommand and packCreates produce passes as it is', (t) => {
  const bytes = entryOf(creates(50));
  t.same(fieldsRefused(bytes), []);
  const c = decodePackedCreates(bytes, 'entries[0]');
  t.equal(c.jobIds.length, 50);
  t.same([...tenantsOf(c)], ['acme']);
  const custom = entryOf(
    creates(5, {
      timezone: 'America/New_York',
      payload: { a: 1 },
      retry: { maxAttempts: 2 },
      target: { url: 'https://example.test/h', headers: { 'x-a': '1' } },
      startAtMs: NOW + 86_400_000,
      remainingFires: 3,
    }),
  );
  t.same(fieldsRefused(custom), [], 'a definition with every kind of field set');
  const limited = entryOf(creates(5, { overlap: { policy: 'buffer_all', maxConcurrency: 4 } }));
  t.same(fieldsRefused(limited), [], 'an overlap limit');
  t.same(
    decodePackedCreates(limited, 'entries[0]').specs[0]?.overlap,
    { policy: 'buffer_all', bufferCap: 10, maxConcurrency: 4 },
    'the limit travels in the definition',
  );
  t.end();
});

t.test('bytes that are not a create-jobs entry are refused whole', (t) => {
  t.same(fieldsRefused(new Uint8Array([9, 1, 2])), ['entries[0]']);
  t.same(fieldsRefused(encode({ op: 'create-job' })), ['entries[0]']);
  t.same(
    fieldsRefused(
      tampered((m) => {
        m['extra'] = 1;
      }),
    ),
    ['entries[0]'],
  );
  t.same(
    fieldsRefused(
      tampered((m) => {
        m.names.pop();
      }),
    ),
    ['entries[0]'],
    'a column of another length',
  );
  t.same(
    fieldsRefused(
      tampered((m) => {
        m.specOf[0] = 7;
      }),
    ),
    ['entries[0]'],
    'a definition index out of range',
  );
  t.same(
    fieldsRefused(
      tampered((m) => {
        m.anchorsMs[1] = 'soon';
      }),
    ),
    ['entries[0]'],
  );
  t.end();
});

t.test('an entry made at a time far from the leader’s clock is refused', (t) => {
  const bytes = entryOf(creates(3));
  t.same(fieldsRefused(bytes, { ...ctx, nowMs: NOW + 11 * 60_000 }), ['entries[0].atMs']);
  t.same(fieldsRefused(bytes, { ...ctx, nowMs: NOW - 11 * 60_000 }), ['entries[0].atMs']);
  t.end();
});

t.test('each job field a forger could change is refused by name', (t) => {
  const one = (edit: (m: Forged) => void): string[] => fieldsRefused(tampered(edit));
  t.same(
    one((m) => (m.jobIds[1] = 'bad id!')),
    ['entries[0].jobs[1].jobId'],
  );
  const otherGroup = [...Array(100).keys()]
    .map((i) => `acme/other-${i}`)
    .find((id) => lookupRange(ranges, hashShardKey(id)).groupId !== 1)!;
  t.same(
    one((m) => (m.jobIds[2] = otherGroup)),
    ['entries[0].jobs[2].jobId'],
  );
  t.same(
    one((m) => (m.names[2] = 'n'.repeat(201))),
    ['entries[0].jobs[2].name'],
  );
  t.same(
    one((m) => (m.requestIds[0] = `acme/${'r'.repeat(129)}`)),
    ['entries[0].jobs[0].requestId'],
  );
  t.same(
    one((m) => (m.requestIds[0] = 'r-0')),
    ['entries[0].jobs[0].requestId'],
    'a request id not scoped by the tenant',
  );
  t.same(
    one((m) => (m.requestIds[0] = 'beta/r-0')),
    ['entries[0].jobs[0].requestId'],
    'a request id scoped by another tenant',
  );
  t.same(
    one((m) => (m.jobIds[1] = (m.jobIds[1] as string).replace('acme/', ''))),
    ['entries[0].jobs[1].jobId'],
    'a job id that is not a key',
  );
  const otherTenant = [...Array(200).keys()]
    .map((i) => `beta/job-${i}`)
    .find((id) => lookupRange(ranges, hashShardKey(id)).groupId === 1)!;
  t.same(
    one((m) => (m.jobIds[2] = otherTenant)),
    ['entries[0].jobs[2].jobId'],
    "a key of another tenant than its definition's",
  );
  t.same(
    one((m) => (m.schedules[0] = '61 * * * *')),
    ['entries[0].jobs[0].spec.schedule.minute'],
  );
  t.same(
    one((m) => (m.nextFireAtMs[0] = (m.nextFireAtMs[0] as number) + 60_000)),
    ['entries[0].jobs[0].nextFireAtMs'],
    'a first slot that is not the schedule’s',
  );
  t.same(
    one((m) => (m.nextFireAtMs[0] = null)),
    ['entries[0].jobs[0].nextFireAtMs'],
  );
  t.same(
    one((m) => (m.anchorsMs[1] = null)),
    ['entries[0].jobs[1].spec.anchorMs'],
    'an interval without its anchor',
  );
  t.same(
    one((m) => (m.anchorsMs[0] = NOW)),
    ['entries[0].jobs[0].spec.anchorMs'],
    'a cron job with an anchor',
  );
  t.end();
});

t.test('a definition must be exactly what the full check writes out', (t) => {
  const one = (edit: (p: Record<string, unknown>) => void): string[] =>
    fieldsRefused(tampered((m) => edit(m.specs[0]!)));
  t.same(
    one((p) => (p['tenant'] = 'ghost')),
    ['entries[0].specs[0].tenant'],
  );
  t.same(
    one((p) => (p['priority'] = 9)),
    ['entries[0].jobs[0].spec.priority'],
    'an invalid value is named as the full check names it',
  );
  t.same(
    one((p) => (p['startAtMs'] = null)),
    ['entries[0].specs[0]'],
    'null where the full check writes undefined',
  );
  t.same(
    one((p) => (p['timezone'] = 'utc')),
    ['entries[0].specs[0]'],
    'a zone not as the schedule resolves it',
  );
  t.same(
    one((p) => ((p['retry'] as Record<string, unknown>)['extra'] = 1)),
    ['entries[0].specs[0]'],
  );
  t.same(
    one((p) => delete p['payload']),
    ['entries[0].specs[0]'],
  );
  t.same(
    one((p) => ((p['target'] as Record<string, unknown>)['headers'] = { 'idempotency-key': 'x' })),
    ['entries[0].jobs[0].spec.target.headers.idempotency-key'],
  );
  const overlap = (p: Record<string, unknown>): Record<string, unknown> =>
    p['overlap'] as Record<string, unknown>;
  t.same(
    one((p) => (overlap(p)['maxConcurrency'] = 2)),
    ['entries[0].jobs[0].spec.overlap.maxConcurrency'],
    'a limit added to an allow definition: the full check refuses it',
  );
  t.same(
    one((p) => (overlap(p)['maxConcurrency'] = undefined)),
    ['entries[0].specs[0]'],
    'an absent limit written as undefined is not what the full check writes',
  );
  t.end();
});

t.test('the leader checks targets again with its own policy', (t) => {
  // Packed by a node that allowed loopback (--allow-target 127.0.0.0/8), checked by a leader
  // that does not: refused, naming the first job of the definition's target.url.
  const loose = new JobSpecCompiler(NOW, { targetPolicy: TargetPolicy.of(['127.0.0.0/8']) });
  const compiled = loose.compile({
    tenant: 'acme',
    schedule: '0 3 * * *',
    target: { url: 'http://127.0.0.1:8080/hook' },
  });
  let jobId = 'acme/loop-0';
  for (let i = 1; lookupRange(ranges, hashShardKey(jobId)).groupId !== 1; i++)
    jobId = `acme/loop-${i}`;
  const bytes = entryOf([
    {
      op: 'create-job',
      atMs: NOW,
      jobId,
      spec: compiled.spec,
      nextFireAtMs: requireFirstSlot(compiled, NOW),
      requestId: undefined,
    },
  ]);
  const strict = { ...ctx, checkedParts: new PackedPartCache(), targetPolicy: TargetPolicy.STRICT };
  t.same(fieldsRefused(bytes, strict), ['entries[0].jobs[0].spec.target.url']);
  const allowing = { ...strict, targetPolicy: TargetPolicy.of(['127.0.0.0/8']) };
  t.same(fieldsRefused(bytes, allowing), [], 'a leader allowing loopback takes it');
  t.end();
});
