import t from 'tap';
import { ValidationError } from '../../../src/base/errors.js';
import { TargetPolicy } from '../../../src/delivery/target-policy.js';
import {
  compileJobSpec,
  firstSlotMs,
  JobSpecCompiler,
  PAYLOAD_BYTES_MAX,
  requireFirstSlot,
  type CompileJobSpecOptions,
} from '../../../src/api/job-spec.js';

const NOW = Date.UTC(2026, 2, 8, 6, 0, 0); // 01:00 in New York, the day clocks spring forward
const base = { tenant: 'acme', name: 'report', target: { url: 'https://example.test/hook' } };

function violations(input: Record<string, unknown>): string[] {
  try {
    compileJobSpec(input, NOW);
  } catch (err) {
    if (err instanceof ValidationError) return err.violations.map((v) => v.field);
    throw err;
  }
  return [];
}

t.test('defaults are written out so every replica sees the same spec', (t) => {
  const { spec } = compileJobSpec({ ...base, schedule: '*/5 * * * *' }, NOW);
  t.equal(spec.timezone, 'UTC');
  t.equal(spec.delivery, 'at_least_once');
  t.same(spec.retry, {
    maxAttempts: 5,
    initialBackoffMs: 1000,
    maxBackoffMs: 300_000,
    multiplier: 2,
    maxAgeMs: 86_400_000,
  });
  t.equal(spec.misfire.policy, 'fire_once');
  t.equal(spec.overlap.policy, 'allow');
  t.notOk(
    'maxConcurrency' in spec.overlap,
    'no limit written when none was given: absent means the policy default',
  );
  t.equal(spec.priority, 2);
  t.equal(spec.payload, '{}');
  t.equal(spec.anchorMs, undefined, 'cron schedules have no anchor');
  t.end();
});

t.test('an every schedule is anchored at creation unless told otherwise', (t) => {
  const c = compileJobSpec({ ...base, schedule: 'every 90s' }, NOW);
  t.equal(c.spec.anchorMs, NOW);
  t.equal(firstSlotMs(c, NOW), NOW, 'the anchor itself is the first slot');
  t.equal(firstSlotMs(c, NOW + 1), NOW + 90_000);
  t.end();
});

t.test('the first slot follows the zone and the DST rules', (t) => {
  // 02:30 does not exist in New York on 2026-03-08: the job fires at the transition (03:00 EDT).
  const c = compileJobSpec({ ...base, schedule: '30 2 * * *', timezone: 'America/New_York' }, NOW);
  t.equal(new Date(requireFirstSlot(c, NOW)).toISOString(), '2026-03-08T07:00:00.000Z');
  t.end();
});

t.test('start and end bound the first slot; a job that can never fire is refused', (t) => {
  const c = compileJobSpec({ ...base, schedule: '0 * * * *', startAtMs: NOW + 3 * 3600_000 }, NOW);
  t.equal(firstSlotMs(c, NOW), NOW + 3 * 3600_000);
  const past = compileJobSpec({ ...base, schedule: 'at 2026-01-01T00:00:00Z' }, NOW);
  t.throws(() => requireFirstSlot(past, NOW), /schedule: has no slot/);
  t.end();
});

t.test('bad input names every offending field and changes nothing', (t) => {
  t.same(violations({ ...base, schedule: '61 * * * *' }), ['schedule.minute']);
  t.same(violations({ ...base, schedule: '* * * * *', timezone: 'Mars/Base' }), ['timezone']);
  t.same(violations({ ...base, tenant: 'Bad Tenant', schedule: '* * * * *' }), ['tenant']);
  t.same(violations({ name: 'x', schedule: '* * * * *', target: { url: 'ftp://x' } }), [
    'tenant',
    'target.url',
  ]);
  t.same(violations({ ...base, schedule: '* * * * *', delivery: 'exactly_once' }), ['delivery']);
  t.same(
    violations({ ...base, schedule: '* * * * *', retry: { maxAttempts: 0, multiplier: 0.5 } }),
    ['retry.maxAttempts', 'retry.multiplier'],
  );
  t.same(violations({ ...base, schedule: '* * * * *', priority: 7 }), ['priority']);
  t.same(violations({ ...base, schedule: '* * * * *', overlap: { policy: 'queue' } }), [
    'overlap.policy',
  ]);
  t.same(violations({ ...base, schedule: '* * * * *', misfire: { fireAllCap: 0 } }), [
    'misfire.fireAllCap',
  ]);
  t.same(
    violations({
      ...base,
      schedule: '* * * * *',
      payload: JSON.stringify('x'.repeat(PAYLOAD_BYTES_MAX)),
    }),
    ['payload'],
    'payload over 64 KiB',
  );
  t.same(violations({ ...base, schedule: '* * * * *', payload: '{"a":' }), ['payload']);
  t.same(
    violations({
      ...base,
      schedule: '* * * * *',
      target: { url: 'https://x.test/', headers: { 'Tickraft-Token': 'x' } },
    }),
    ['target.headers.Tickraft-Token'],
  );
  t.same(violations({ ...base, schedule: '* * * * *', startAtMs: NOW + 10, endAtMs: NOW }), [
    'endAtMs',
  ]);
  t.end();
});

t.test('overlap.maxConcurrency: kept as given, checked, refused with allow', (t) => {
  const reasons = (overlap: unknown): { field: string; reason: string }[] => {
    try {
      compileJobSpec({ ...base, schedule: '* * * * *', overlap }, NOW);
    } catch (err) {
      if (err instanceof ValidationError)
        return err.violations.map(({ field, reason }) => ({ field, reason }));
      throw err;
    }
    return [];
  };
  for (const policy of ['skip', 'buffer_one', 'buffer_all'] as const) {
    const { spec } = compileJobSpec(
      { ...base, schedule: '* * * * *', overlap: { policy, maxConcurrency: 3 } },
      NOW,
    );
    t.same(spec.overlap, { policy, bufferCap: 10, maxConcurrency: 3 }, `${policy}: kept`);
    const without = compileJobSpec({ ...base, schedule: '* * * * *', overlap: { policy } }, NOW);
    t.same(
      without.spec.overlap,
      { policy, bufferCap: 10 },
      `${policy}: none given, none written (1 applies)`,
    );
    t.notOk('maxConcurrency' in without.spec.overlap, `${policy}: not even as undefined`);
  }
  t.same(reasons({ policy: 'skip', maxConcurrency: 1 }), [], '1 is the low end');
  t.same(reasons({ policy: 'skip', maxConcurrency: 1000 }), [], '1000 the high end');
  t.same(reasons({ policy: 'skip', maxConcurrency: null }), [], 'null is absent');
  for (const bad of [0, -1, 1001, 1e9])
    t.same(
      reasons({ policy: 'buffer_all', maxConcurrency: bad }),
      [{ field: 'overlap.maxConcurrency', reason: 'must be in [1, 1000]' }],
      `${bad}: out of range, the range named`,
    );
  for (const bad of [1.5, '2', Number.NaN, true])
    t.same(
      reasons({ policy: 'skip', maxConcurrency: bad }),
      [{ field: 'overlap.maxConcurrency', reason: 'must be an integer in [1, 1000]' }],
      `${String(bad)}: not an integer`,
    );
  const allowReason =
    'OVERLAP_POLICY_ALLOW (the default policy) places no limit on runs in flight: max_concurrency applies only to OVERLAP_POLICY_SKIP, OVERLAP_POLICY_BUFFER_ONE and OVERLAP_POLICY_BUFFER_ALL';
  t.same(
    reasons({ policy: 'allow', maxConcurrency: 2 }),
    [{ field: 'overlap.maxConcurrency', reason: allowReason }],
    'allow with a limit: refused, not dropped',
  );
  t.same(
    reasons({ maxConcurrency: 1 }),
    [{ field: 'overlap.maxConcurrency', reason: allowReason }],
    'no policy is allow: refused too, even with the value the others default to',
  );
  t.same(
    reasons({ policy: 'allow', maxConcurrency: 0 }).map((v) => v.reason),
    ['must be in [1, 1000]', allowReason],
    'both problems named',
  );
  t.end();
});

t.test('JobSpecCompiler gives what compileJobSpec gives, job by job', (t) => {
  const outcome = (f: () => unknown): unknown => {
    try {
      return f();
    } catch (err) {
      if (err instanceof ValidationError) return err.violations;
      throw err;
    }
  };
  const shared = { tenant: 'acme', target: { url: 'https://example.test/hook' }, priority: 1 };
  // One compiler sees them all in order: the first of each shared part goes the full way, the
  // others the short way, and bad own fields must still be named exactly.
  const inputs: Record<string, unknown>[] = [
    { ...shared, schedule: '0 3 * * *' },
    { ...shared, name: 'n', schedule: '5 4 * * *' },
    { ...shared, schedule: 'every 10m' },
    { ...shared, schedule: 'every 10m', anchorMs: NOW - 7 },
    { ...shared, schedule: '0 3 * * *', anchorMs: NOW - 7 },
    { ...shared, schedule: '0 3 * * *', timezone: 'America/New_York' },
    { ...shared, schedule: '61 3 * * *', timezone: 'America/New_York' },
    { ...shared, schedule: '   ' },
    { ...shared, schedule: '0 3 * * *', name: 'x'.repeat(201) },
    { ...shared, schedule: '0 3 * * *', name: 7 },
    { ...shared, schedule: '0 3 * * *', anchorMs: 1.5 },
    { ...shared, schedule: 42 },
    { ...shared, schedule: '0 3 * * *', priority: Number.NaN },
    { ...shared, schedule: '0 3 * * *', priority: null },
    { ...shared, schedule: '0 3 * * *', priority: undefined },
    { ...shared, schedule: 'at 2020-01-01T00:00:00Z' },
    { ...shared, schedule: '0 3 * * *', target: { url: 'ftp://x' } },
    { ...shared, schedule: '0 3 * * *', retry: { multiplier: Number.POSITIVE_INFINITY } },
    { ...shared, schedule: '0 3 * * *', retry: { multiplier: null } },
    // Neighbours that differ in one nested value only: the job before is no base for them.
    { ...shared, schedule: '0 3 * * *', target: { url: 'https://a.test/', headers: { x: '1' } } },
    { ...shared, schedule: '1 3 * * *', target: { url: 'https://a.test/', headers: { x: '1' } } },
    { ...shared, schedule: '0 3 * * *', target: { url: 'https://a.test/', headers: { x: 2 } } },
    { ...shared, schedule: '0 3 * * *', retry: { maxAttempts: 2, multiplier: 3 } },
    { ...shared, schedule: '0 3 * * *', retry: { multiplier: 3, maxAttempts: 2 } },
    { ...shared, schedule: '0 3 * * *', retry: { multiplier: 3, maxAttempts: 0 } },
    { ...shared, schedule: '0 3 * * *', payload: { a: [1, 2] } },
    { ...shared, schedule: '0 3 * * *', payload: { a: [1, 2, 3] } },
    { ...shared, schedule: '0 3 * * *', payload: { a: { 0: 1, 1: 2 } } },
    { ...shared, schedule: '0 3 * * *', endAtMs: null },
    { ...shared, schedule: '0 3 * * *', endAtMs: undefined },
    { ...shared, schedule: '0 3 * * *', endAtMs: NOW - 1 },
    // The limit is a shared field: neighbours differing only in it get their own.
    { ...shared, schedule: '0 3 * * *', overlap: { policy: 'skip', maxConcurrency: 2 } },
    { ...shared, schedule: '1 3 * * *', overlap: { policy: 'skip', maxConcurrency: 3 } },
    { ...shared, schedule: '2 3 * * *', overlap: { policy: 'skip' } },
    { ...shared, schedule: '3 3 * * *', overlap: { policy: 'skip', maxConcurrency: 2 } },
    { ...shared, schedule: '4 3 * * *', overlap: { policy: 'allow', maxConcurrency: 2 } },
    { ...shared, schedule: '5 3 * * *', overlap: { policy: 'skip', maxConcurrency: 0 } },
  ];
  const compiler = new JobSpecCompiler(NOW);
  for (const [i, input] of inputs.entries())
    t.same(
      outcome(() => compiler.compile(input).spec),
      outcome(() => compileJobSpec(input, NOW).spec),
      `input ${i}: ${JSON.stringify(input)}`,
    );
  t.end();
});

t.test("with the node's target policy, a forbidden host is refused on target.url", (t) => {
  const strict = { targetPolicy: TargetPolicy.STRICT };
  const refused = (url: string, options: CompileJobSpecOptions = strict): string[] => {
    try {
      compileJobSpec({ ...base, schedule: '* * * * *', target: { url } }, NOW, options);
    } catch (err) {
      if (err instanceof ValidationError)
        return err.violations.filter((v) => v.field === 'target.url').map((v) => v.reason);
      throw err;
    }
    return [];
  };
  for (const url of [
    'http://127.0.0.1:8080/h',
    'http://[::1]/h',
    'http://10.0.0.1/h',
    'http://169.254.169.254/latest/meta-data',
    'http://[::ffff:127.0.0.1]/h',
    'http://0x7f.1/h', // 127.0.0.1 as the URL parser reads it
    'http://localhost:8080/h',
    'http://api.localhost/h',
  ])
    t.match(
      refused(url),
      [/which webhooks may not reach; a node started with --allow-target/],
      url,
    );
  t.match(refused('http://127.0.0.1/h'), [
    'resolves to a loopback address 127.0.0.1, which webhooks may not reach; a node started with --allow-target covering it may',
  ]);
  t.same(refused('https://example.test/h'), [], 'a name is checked at connect time');
  t.same(refused('http://8.8.8.8/h'), [], 'a public address passes');
  t.same(refused('worker:reports'), [], 'a worker target is not a URL');
  const loopback = { targetPolicy: TargetPolicy.of(['127.0.0.0/8']) };
  t.same(refused('http://127.0.0.1:8080/h', loopback), [], '--allow-target 127.0.0.0/8');
  t.same(refused('http://localhost:8080/h', loopback), []);
  t.equal(refused('http://10.0.0.1/h', loopback).length, 1, 'other ranges stay refused');
  t.same(
    refused('http://127.0.0.1/h', {}),
    [],
    'no policy (a stored job compiled again): no check',
  );
  // The bulk compiler checks the shared target once, with its policy.
  const compiler = new JobSpecCompiler(NOW, strict);
  t.throws(
    () => compiler.compile({ ...base, schedule: '* * * * *', target: { url: 'http://10.1.1.1/' } }),
    ValidationError,
  );
  t.end();
});
